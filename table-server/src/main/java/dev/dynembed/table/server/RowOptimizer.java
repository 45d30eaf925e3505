package dev.dynembed.table.server;

import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.OptimizerConfig;

/**
 * The optimizers, as pure functions of (weight row, slot rows, gradient row, hyperparameters).
 * A row record is {@code [w (dim) | slot 0 (dim) | slot 1 (dim)]} at {@code base} in a float page;
 * slot state lives beside the row on the owning shard. Formulas (textbook forms):
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
abstract class RowOptimizer {
  final int dim;

  RowOptimizer(int dim) {
    this.dim = dim;
  }

  abstract int slots();

  /** Writes the initial slot values of a new row. */
  void initSlots(float[] page, int base) {}

  /**
   * Applies one gradient row. {@code t} is the row's update count including this one (1-based).
   */
  abstract void apply(float[] page, int base, float[] g, int gOff, float lr, long t);

  static RowOptimizer create(OptimizerConfig c, int dim) {
    return switch (c.getKind()) {
      case SGD -> new Sgd(dim);
      case MOMENTUM -> new Momentum(dim, c.getMomentum());
      case ADAGRAD -> new Adagrad(dim, c.getInitialAccumulator(), c.getEpsilon());
      case ADAM -> new Adam(dim, c.getBeta1(), c.getBeta2(), c.getEpsilon());
      case FTRL -> new Ftrl(dim, c.getInitialAccumulator(), c.getL1(), c.getL2(), c.getBeta());
      default -> throw new IllegalArgumentException("unsupported optimizer " + c.getKind());
    };
  }

  static int slotsOf(OptimizerConfig c) {
    return TableConfigs.slots(c.getKind());
  }

  static final class Sgd extends RowOptimizer {
    Sgd(int dim) {
      super(dim);
    }

    @Override
    int slots() {
      return 0;
    }

    @Override
    void apply(float[] p, int base, float[] g, int gOff, float lr, long t) {
      for (int j = 0; j < dim; j++) {
        p[base + j] -= lr * g[gOff + j];
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
    int slots() {
      return 1;
    }

    @Override
    void apply(float[] p, int base, float[] g, int gOff, float lr, long t) {
      int m = base + dim;
      for (int j = 0; j < dim; j++) {
        float mj = mu * p[m + j] + g[gOff + j];
        p[m + j] = mj;
        p[base + j] -= lr * mj;
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
    int slots() {
      return 1;
    }

    @Override
    void initSlots(float[] p, int base) {
      java.util.Arrays.fill(p, base + dim, base + 2 * dim, init);
    }

    @Override
    void apply(float[] p, int base, float[] g, int gOff, float lr, long t) {
      FloatKernels.adagrad(p, base, base + dim, g, gOff, dim, lr, eps);
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
    int slots() {
      return 2;
    }

    @Override
    void apply(float[] p, int base, float[] g, int gOff, float lr, long t) {
      int m = base + dim;
      int v = base + 2 * dim;
      float c1 = (float) (1.0 - Math.pow(b1, t));
      float c2 = (float) (1.0 - Math.pow(b2, t));
      for (int j = 0; j < dim; j++) {
        float gj = g[gOff + j];
        float mj = b1 * p[m + j] + (1f - b1) * gj;
        float vj = b2 * p[v + j] + (1f - b2) * gj * gj;
        p[m + j] = mj;
        p[v + j] = vj;
        p[base + j] -= lr * (mj / c1) / ((float) Math.sqrt(vj / c2) + eps);
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
    int slots() {
      return 2;
    }

    @Override
    void initSlots(float[] p, int base) {
      // slot 0: z = 0; slot 1: n = initial accumulator
      java.util.Arrays.fill(p, base + 2 * dim, base + 3 * dim, init);
    }

    @Override
    void apply(float[] p, int base, float[] g, int gOff, float lr, long t) {
      int z = base + dim;
      int n = base + 2 * dim;
      for (int j = 0; j < dim; j++) {
        float gj = g[gOff + j];
        float nOld = p[n + j];
        float nNew = nOld + gj * gj;
        float sigma = ((float) Math.sqrt(nNew) - (float) Math.sqrt(nOld)) / lr;
        float zj = p[z + j] + gj - sigma * p[base + j];
        p[z + j] = zj;
        p[n + j] = nNew;
        if (Math.abs(zj) <= l1) {
          p[base + j] = 0f;
        } else {
          p[base + j] = -(zj - Math.signum(zj) * l1) / ((beta + (float) Math.sqrt(nNew)) / lr + l2);
        }
      }
    }
  }
}
