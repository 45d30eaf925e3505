package dev.dynembed.ops;

import dev.dynembed.table.common.FloatKernels;

/**
 * The elementwise arithmetic of {@link SigmoidCrossEntropy} and its backward: the float loops,
 * and the one-logit double formulas ({@link #lossTerm}, {@link #sigmoid}) that the scalar loops
 * and the ops' DOUBLE path share. With the JDK's
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
      out[i] = (float) lossTerm(x[i], y[i]);
    }
  }

  static void scalarSigmoidMinus(float[] x, float[] y, float[] out, int from, int n) {
    for (int i = from; i < n; i++) {
      out[i] = (float) (sigmoid(x[i]) - y[i]);
    }
  }

  /**
   * One logit's loss term in double: {@code max(v, 0) - v y + log(1 + exp(-|v|))}, with the
   * intrinsic {@code Math.log}: {@code Math.log1p} is StrictMath's software routine in JDK 17 (445
   * of the op's 1,085 profile samples). With t = exp(-|v|) in (0, 1], 1 + t loses t's bits below
   * 2^-53, an absolute error under 1.2e-16.
   */
  static double lossTerm(double v, double y) {
    return Math.max(v, 0) - v * y + Math.log(1 + Math.exp(-Math.abs(v)));
  }

  /** {@code sigmoid(v)} in double with one {@code exp}, never overflowing. */
  static double sigmoid(double v) {
    double t = Math.exp(-Math.abs(v));
    return v >= 0 ? 1 / (1 + t) : t / (1 + t);
  }
}
