package dev.dynembed.table.common;

import dev.dynembed.table.v1.OptimizerConfig;

/**
 * The optimizers, as pure functions of (weight row, slot rows, gradient row, hyperparameters):
 * the weights are {@code dim} floats at {@code w[wOff]}, the slots {@code slots() x dim} floats
 * at {@code s[sOff]} (slot 0, then slot 1). A shard keeps a row's record as {@code [w | slot 0 |
 * slot 1]} in one page; a pipelined trainer replays its own in-flight update on a row it read
 * with its slots (docs/design/0007-pipelined-steps.md), with the same code, so both get the same
 * floats. Formulas (textbook forms):
 *
 * <ul>
 *   <li>SGD: {@code w -= lr g}
 *   <li>MOMENTUM: {@code m = mu m + g; w -= lr m}
 *   <li>ADAGRAD: {@code a += g^2; w -= lr g / (sqrt(a) + eps)}
 *   <li>ADAM (t = the row's own update count, so rows seen rarely are corrected properly):
 *       {@code m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *       w -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)}
 *   <li>FTRL-proximal (McMahan et al. 2013, learning-rate power -1/2):
 *       {@code n' = n + g^2; z += g - (sqrt(n') - sqrt(n)) / lr * w; n = n';
 *       w = |z| <= l1 ? 0 : -(z - sign(z) l1) / ((beta + sqrt(n)) / lr + l2)}
 * </ul>
 */
public abstract class RowOptimizer {
  /** Floats per row (and per slot row). */
  protected final int dim;

  protected RowOptimizer(int dim) {
    this.dim = dim;
  }

  /** Slot rows beside each weight row. */
  public abstract int slots();

  /**
   * Whether an update with a rate and gradient values of at most 1 moves each weight and each
   * slot value by at most 1, whatever the row holds (SGD: lr g; Adagrad: its accumulator takes
   * g^2 before the step, so the step is at most lr). The shard checks the result of every other
   * update (docs/design/0009: "Rows stay finite and bounded").
   */
  public boolean unitStep() {
    return false;
  }

  /** Writes the initial slot values of a new row at {@code s[sOff]}. */
  public void initSlots(float[] s, int sOff) {}

  /**
   * Applies one gradient row. {@code t} is the row's update count including this one (1-based).
   */
  public abstract void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff,
      float lr, long t);

  /**
   * The optimizer of a normalized config ({@link TableConfigs#normalize}): a built-in's, or the
   * named rule's ({@link RowRules}).
   */
  public static RowOptimizer create(OptimizerConfig c, int dim) {
    RowOptimizer o = RowRules.of(c).create(c, dim);
    if (o.dim != dim) {
      throw new IllegalStateException("rule '" + RowRules.of(c).name() + "' made an update for"
          + " dim " + o.dim + ", asked " + dim);
    }
    return c.hasKeyPolicy() ? KeyPolicies.wrap(o, c.getKeyPolicy()) : o;
  }

  static final class Sgd extends RowOptimizer {
    Sgd(int dim) {
      super(dim);
    }

    @Override
    public int slots() {
      return 0;
    }

    @Override
    public boolean unitStep() {
      return true;
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      for (int j = 0; j < dim; j++) {
        w[wOff + j] -= lr * g[gOff + j];
      }
    }
  }

  static final class Momentum extends RowOptimizer {
    private final float mu;

    Momentum(int dim, float mu) {
      super(dim);
      this.mu = mu;
    }

    @Override
    public int slots() {
      return 1;
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      for (int j = 0; j < dim; j++) {
        float mj = mu * s[sOff + j] + g[gOff + j];
        s[sOff + j] = mj;
        w[wOff + j] -= lr * mj;
      }
    }
  }

  static final class Adagrad extends RowOptimizer {
    private final float init;
    private final float eps;

    Adagrad(int dim, float init, float eps) {
      super(dim);
      this.init = init;
      this.eps = eps;
    }

    @Override
    public int slots() {
      return 1;
    }

    @Override
    public boolean unitStep() {
      return true;
    }

    @Override
    public void initSlots(float[] s, int sOff) {
      java.util.Arrays.fill(s, sOff, sOff + dim, init);
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      FloatKernels.adagrad(w, wOff, s, sOff, g, gOff, dim, lr, eps);
    }
  }

  static final class Adam extends RowOptimizer {
    private final float b1;
    private final float b2;
    private final float eps;

    Adam(int dim, float b1, float b2, float eps) {
      super(dim);
      this.b1 = b1;
      this.b2 = b2;
      this.eps = eps;
    }

    @Override
    public int slots() {
      return 2;
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      int m = sOff;
      int v = sOff + dim;
      float c1 = (float) (1.0 - Math.pow(b1, t));
      float c2 = (float) (1.0 - Math.pow(b2, t));
      for (int j = 0; j < dim; j++) {
        float gj = g[gOff + j];
        float mj = b1 * s[m + j] + (1f - b1) * gj;
        float vj = b2 * s[v + j] + (1f - b2) * gj * gj;
        s[m + j] = mj;
        s[v + j] = vj;
        w[wOff + j] -= lr * (mj / c1) / ((float) Math.sqrt(vj / c2) + eps);
      }
    }
  }

  static final class Ftrl extends RowOptimizer {
    private final float init;
    private final float l1;
    private final float l2;
    private final float beta;

    Ftrl(int dim, float init, float l1, float l2, float beta) {
      super(dim);
      this.init = init;
      this.l1 = l1;
      this.l2 = l2;
      this.beta = beta;
    }

    @Override
    public int slots() {
      return 2;
    }

    @Override
    public void initSlots(float[] s, int sOff) {
      // slot 0: z = 0; slot 1: n = initial accumulator
      java.util.Arrays.fill(s, sOff + dim, sOff + 2 * dim, init);
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      int z = sOff;
      int n = sOff + dim;
      for (int j = 0; j < dim; j++) {
        float gj = g[gOff + j];
        float nOld = s[n + j];
        float nNew = nOld + gj * gj;
        float sigma = ((float) Math.sqrt(nNew) - (float) Math.sqrt(nOld)) / lr;
        float zj = s[z + j] + gj - sigma * w[wOff + j];
        s[z + j] = zj;
        s[n + j] = nNew;
        if (Math.abs(zj) <= l1) {
          w[wOff + j] = 0f;
        } else {
          w[wOff + j] = -(zj - Math.signum(zj) * l1)
              / ((beta + (float) Math.sqrt(nNew)) / lr + l2);
        }
      }
    }
  }
}
