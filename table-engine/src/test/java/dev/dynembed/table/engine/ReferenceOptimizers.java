package dev.dynembed.table.engine;

import dev.dynembed.table.v1.OptimizerConfig;
import java.util.HashMap;
import java.util.Map;

/**
 * A plain-Java reference: {@code HashMap<String, double[]>} rows and the textbook optimizer
 * formulas in double precision, written independently of {@link dev.dynembed.table.common.RowOptimizer}.
 */
public final class ReferenceOptimizers {
  final OptimizerConfig c;
  final int dim;
  final Map<String, double[]> w = new HashMap<>();
  final Map<String, double[]> s1 = new HashMap<>();
  final Map<String, double[]> s2 = new HashMap<>();
  final Map<String, Integer> t = new HashMap<>();

  ReferenceOptimizers(OptimizerConfig c, int dim) {
    this.c = c;
    this.dim = dim;
  }

  void init(String key, float[] row) {
    double[] x = new double[dim];
    for (int j = 0; j < dim; j++) {
      x[j] = row[j];
    }
    w.put(key, x);
    double[] a = new double[dim];
    double[] b = new double[dim];
    switch (c.getKind()) {
      case ADAGRAD -> java.util.Arrays.fill(a, c.getInitialAccumulator());
      case FTRL -> java.util.Arrays.fill(b, c.getInitialAccumulator());
      default -> { }
    }
    s1.put(key, a);
    s2.put(key, b);
    t.put(key, 0);
  }

  /** One update of one key with an already summed gradient. */
  void apply(String key, double[] g, double lr) {
    double[] x = w.get(key);
    double[] a = s1.get(key);
    double[] b = s2.get(key);
    int step = t.merge(key, 1, Integer::sum);
    for (int j = 0; j < dim; j++) {
      switch (c.getKind()) {
        case SGD -> x[j] -= lr * g[j];
        case MOMENTUM -> {
          a[j] = c.getMomentum() * a[j] + g[j];
          x[j] -= lr * a[j];
        }
        case ADAGRAD -> {
          a[j] += g[j] * g[j];
          x[j] -= lr * g[j] / (Math.sqrt(a[j]) + c.getEpsilon());
        }
        case ADAM -> {
          double b1 = c.getBeta1();
          double b2 = c.getBeta2();
          a[j] = b1 * a[j] + (1 - b1) * g[j];
          b[j] = b2 * b[j] + (1 - b2) * g[j] * g[j];
          double mhat = a[j] / (1 - Math.pow(b1, step));
          double vhat = b[j] / (1 - Math.pow(b2, step));
          x[j] -= lr * mhat / (Math.sqrt(vhat) + c.getEpsilon());
        }
        case FTRL -> { // McMahan et al. 2013, Algorithm 1 (per coordinate), alpha = lr
          double n = b[j];
          double nNew = n + g[j] * g[j];
          double sigma = (Math.sqrt(nNew) - Math.sqrt(n)) / lr;
          a[j] += g[j] - sigma * x[j];
          b[j] = nNew;
          double z = a[j];
          x[j] = Math.abs(z) <= c.getL1() ? 0
              : -(z - Math.signum(z) * c.getL1()) / ((c.getBeta() + Math.sqrt(nNew)) / lr + c.getL2());
        }
        default -> throw new IllegalStateException();
      }
    }
  }
}
