package dev.dynembed.table.common;

/**
 * The float loops on the training path: dot products, axpy and the Adagrad row update. With the
 * JDK's vector module ({@code --add-modules jdk.incubator.vector}, which the project's scripts
 * and tests pass) they run on SIMD lanes through {@link VectorKernels}; without it, plain loops.
 * Measured at dim 100 (AVX-512 machine, docs/benchmarks.md): the vector dot is ~3x and the vector
 * axpy ~4x faster than the scalar loops, which C2 does not vectorise across two arrays at
 * arbitrary offsets. {@code -Ddynembed.vector=false} forces the scalar loops.
 *
 * <p>Results differ from the scalar loops only by float rounding (sums in another order).
 */
public final class FloatKernels {
  private FloatKernels() {}

  /** Whether the vector kernels are in use. */
  public static final boolean VECTOR = detect();

  private static boolean detect() {
    if (!Boolean.parseBoolean(System.getProperty("dynembed.vector", "true"))) {
      return false;
    }
    if (ModuleLayer.boot().findModule("jdk.incubator.vector").isEmpty()) {
      return false;
    }
    try {
      return VectorKernels.lanes() > 1;
    } catch (LinkageError e) {
      return false; // the module is there but unusable on this JVM: scalar loops
    }
  }

  /** {@code sum x[xo + j] * y[yo + j]} for j in [0, n). */
  public static float dot(float[] x, int xo, float[] y, int yo, int n) {
    return VECTOR ? VectorKernels.dot(x, xo, y, yo, n) : scalarDot(x, xo, y, yo, n);
  }

  /** {@code y[yo + j] += a * x[xo + j]} for j in [0, n). */
  public static void axpy(float a, float[] x, int xo, float[] y, int yo, int n) {
    if (VECTOR) {
      VectorKernels.axpy(a, x, xo, y, yo, n);
    } else {
      scalarAxpy(a, x, xo, y, yo, n);
    }
  }

  /**
   * m dot products of one vector with m rows: {@code out[c] = x[xo..xo+n) . rows[c][rowOffs[c]
   * ..]} for c in [0, m). The vector path takes the rows four at a time, so that each chunk of x
   * is loaded once per four rows; every result equals {@link #dot} of that row exactly (the same
   * sums in the same order).
   */
  public static void dots(float[] x, int xo, int n, int m, float[][] rows, int[] rowOffs,
      float[] out) {
    if (VECTOR) {
      VectorKernels.dots(x, xo, n, m, rows, rowOffs, out);
    } else {
      for (int c = 0; c < m; c++) {
        out[c] = scalarDot(x, xo, rows[c], rowOffs[c], n);
      }
    }
  }

  /**
   * The backward of m dot products {@code x . rows[c]} (c in [0, m)) with incoming gradients
   * {@code g[c]}, over n columns: {@code xGrad += g[c] rows[c]} and {@code rowGrad[rowGradOffs[c]
   * ..] += g[c] x}, in one pass over the columns, so that x and xGrad are read and written once
   * instead of m times. Every element sees the same operations in the same order as m pairs of
   * {@link #axpy} calls, so the results are identical. Candidates may share a rowGrad range (the
   * same key drawn twice): they are added in turn.
   */
  public static void dotBackward(float[] x, int xo, float[] xGrad, int xgo, int n, int m,
      float[] g, float[][] rows, int[] rowOffs, float[] rowGrad, int[] rowGradOffs) {
    if (VECTOR) {
      VectorKernels.dotBackward(x, xo, xGrad, xgo, n, m, g, rows, rowOffs, rowGrad, rowGradOffs);
    } else {
      scalarDotBackward(x, xo, xGrad, xgo, n, m, g, rows, rowOffs, rowGrad, rowGradOffs, 0);
    }
  }

  /**
   * Adagrad on one row: {@code acc += g^2; w -= lr g / (sqrt(acc) + eps)}, the weights at {@code
   * p[w..w+n)}, the accumulators at {@code p[acc..acc+n)}, the gradient at {@code g[go..go+n)}.
   */
  public static void adagrad(float[] p, int w, int acc, float[] g, int go, int n, float lr,
      float eps) {
    adagrad(p, w, p, acc, g, go, n, lr, eps);
  }

  /** As above, with the weights in {@code wa} and the accumulators in {@code aa}. */
  public static void adagrad(float[] wa, int w, float[] aa, int acc, float[] g, int go, int n,
      float lr, float eps) {
    if (VECTOR) {
      VectorKernels.adagrad(wa, w, aa, acc, g, go, n, lr, eps);
    } else {
      scalarAdagrad(wa, w, aa, acc, g, go, n, lr, eps, 0);
    }
  }

  /**
   * The index of the first NaN or infinity in {@code x[xo..xo+n)}, or -1 when all are finite. The
   * vector path multiplies by zero (finite gives 0, NaN and infinity give NaN) and looks for the
   * index only when the sum is NaN; a gradient batch of 8k rows is checked in ~0.1 ms.
   */
  /** The largest |x[xo..xo+n)|, NaN if one is NaN (0 for none). */
  public static float maxAbs(float[] x, int xo, int n) {
    if (VECTOR) {
      return VectorKernels.maxAbs(x, xo, n);
    }
    float m = 0f;
    for (int j = 0; j < n; j++) {
      m = Math.max(m, Math.abs(x[xo + j]));
    }
    return m;
  }

  public static int firstNonFinite(float[] x, int xo, int n) {
    if (VECTOR && VectorKernels.allFinite(x, xo, n)) {
      return -1;
    }
    return scalarFirstNonFinite(x, xo, n);
  }

  // The plain loops: the fallback, public as the reference for tests and benchmarks (KernelBench).

  public static float scalarDot(float[] x, int xo, float[] y, int yo, int n) {
    // four independent sums: one running sum is bound by the add latency, not by the loads
    float s0 = 0;
    float s1 = 0;
    float s2 = 0;
    float s3 = 0;
    int j = 0;
    for (; j + 3 < n; j += 4) {
      s0 += x[xo + j] * y[yo + j];
      s1 += x[xo + j + 1] * y[yo + j + 1];
      s2 += x[xo + j + 2] * y[yo + j + 2];
      s3 += x[xo + j + 3] * y[yo + j + 3];
    }
    for (; j < n; j++) {
      s0 += x[xo + j] * y[yo + j];
    }
    return (s0 + s1) + (s2 + s3);
  }

  public static int scalarFirstNonFinite(float[] x, int xo, int n) {
    for (int j = 0; j < n; j++) {
      if (!Float.isFinite(x[xo + j])) {
        return j;
      }
    }
    return -1;
  }

  public static void scalarAxpy(float a, float[] x, int xo, float[] y, int yo, int n) {
    for (int j = 0; j < n; j++) {
      y[yo + j] += a * x[xo + j];
    }
  }

  /** {@link #dotBackward} from column {@code from} on (the vector kernel's tail). */
  public static void scalarDotBackward(float[] x, int xo, float[] xGrad, int xgo, int n, int m,
      float[] g, float[][] rows, int[] rowOffs, float[] rowGrad, int[] rowGradOffs, int from) {
    for (int j = from; j < n; j++) {
      float xj = x[xo + j];
      float s = xGrad[xgo + j];
      for (int c = 0; c < m; c++) {
        s += g[c] * rows[c][rowOffs[c] + j];
        rowGrad[rowGradOffs[c] + j] += g[c] * xj;
      }
      xGrad[xgo + j] = s;
    }
  }

  /** The Adagrad update from column {@code from} on (the vector kernel's tail). */
  public static void scalarAdagrad(float[] wa, int w, float[] aa, int acc, float[] g, int go,
      int n, float lr, float eps, int from) {
    for (int j = from; j < n; j++) {
      float gj = g[go + j];
      float aj = aa[acc + j] + gj * gj;
      aa[acc + j] = aj;
      wa[w + j] -= lr * gj / ((float) Math.sqrt(aj) + eps);
    }
  }
}
