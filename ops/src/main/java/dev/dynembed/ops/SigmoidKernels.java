package dev.dynembed.ops;

import dev.dynembed.table.common.FloatKernels;

/**
 * The elementwise float loops of {@link SigmoidCrossEntropy} and its backward. With the JDK's
 * vector module (whenever {@link FloatKernels#VECTOR} is on) they run on SIMD lanes through
 * {@link VectorSigmoid}, whose {@code exp} and {@code log} are the JDK's SVML stubs; otherwise
 * plain loops. Measured on this project's 2-core AVX-512 VM, 49,152 logits (one word2vec step):
 * the loss term 19.7 -> 1.8 ns and {@code sigmoid - label} 10-14 -> 1.0 ns per element, the two
 * agreeing within 9e-8 (docs/benchmarks.md).
 *
 * <p>Both are written in the overflow-free form: with {@code t = exp(-|x|)} in (0, 1],
 * {@code log(1 + exp(x)) - x y = max(x, 0) - x y + log(1 + t)} and {@code sigmoid(x) = 1 / (1 +
 * t)} for x &gt;= 0, {@code t / (1 + t)} otherwise.
 */
final class SigmoidKernels {
  private SigmoidKernels() {}

  /** {@code out[i] = max(x, 0) - x y + log(1 + exp(-|x|))} for x = x[i], y = y[i], i in [0, n). */
  static void lossTerms(float[] x, float[] y, float[] out, int n) {
    if (FloatKernels.VECTOR) {
      VectorSigmoid.lossTerms(x, y, out, n);
    } else {
      scalarLossTerms(x, y, out, 0, n);
    }
  }

  /** {@code out[i] = sigmoid(x[i]) - y[i]} for i in [0, n). */
  static void sigmoidMinus(float[] x, float[] y, float[] out, int n) {
    if (FloatKernels.VECTOR) {
      VectorSigmoid.sigmoidMinus(x, y, out, n);
    } else {
      scalarSigmoidMinus(x, y, out, 0, n);
    }
  }

  static void scalarLossTerms(float[] x, float[] y, float[] out, int from, int n) {
    for (int i = from; i < n; i++) {
      double v = x[i];
      out[i] = (float) (Math.max(v, 0) - v * y[i] + SigmoidCrossEntropy.softplusOfMinusAbs(v));
    }
  }

  static void scalarSigmoidMinus(float[] x, float[] y, float[] out, int from, int n) {
    for (int i = from; i < n; i++) {
      double v = x[i];
      double t = Math.exp(-Math.abs(v));
      out[i] = (float) ((v >= 0 ? 1 / (1 + t) : t / (1 + t)) - y[i]);
    }
  }
}
