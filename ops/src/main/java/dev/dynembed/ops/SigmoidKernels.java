package dev.dynembed.ops;

import dev.dynembed.table.common.FloatKernels;

/**
 * The elementwise arithmetic of {@link SigmoidCrossEntropy} and its backward: the float loops,
 * and the one-logit double formulas ({@link #lossTerm}, {@link #sigmoid}) that the scalar loops
 * and the ops' DOUBLE path share. With the JDK's
 * vector module (whenever {@link FloatKernels#VECTOR} is on) they run on SIMD lanes through
 * {@link VectorSigmoid}, whose {@code exp} and {@code log} are float polynomials ({@link #exp},
 * {@link #log1p}) that give the same bits in every JIT tier; otherwise plain loops. Measured on
 * this project's 2-core AVX-512 VM, 49,152 logits (one word2vec step): the loss term 19.7 -> 1.8
 * ns and {@code sigmoid - label} 10-14 -> 1.0 ns per element, the two agreeing within 9e-8
 * (docs/benchmarks.md).
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

  // Cephes' single-precision exp and log (S. L. Moshier, cephes/single/expf.c, logf.c): the
  // vector kernels' arithmetic, here one float at a time (what each lane computes, bit for bit)

  /** Below this, exp(x) would leave the normal range that {@link #exp}'s 2^n is built in. */
  static final float EXP_MIN = -87f;
  static final float LOG2E = 1.44269504088896341f;
  /** 1.5 * 2^23: x + ROUNDER is x rounded to an integer, held in the low bits. */
  static final float ROUNDER = 12582912f;
  /** The bits of ROUNDER + n, less this, are n + 127: the exponent field of 2^n. */
  static final int ROUNDER_BITS_LESS_BIAS = Float.floatToRawIntBits(ROUNDER) - 127;
  static final float LN2_HI = 0.693359375f;
  static final float LN2_LO = -2.12194440e-4f;
  static final float E5 = 1.9875691500e-4f;
  static final float E4 = 1.3981999507e-3f;
  static final float E3 = 8.3334519073e-3f;
  static final float E2 = 4.1665795894e-2f;
  static final float E1 = 1.6666665459e-1f;
  static final float E0 = 5.0000001201e-1f;
  static final float SQRT2_M1 = 0.41421356f;
  static final float L8 = 7.0376836292e-2f;
  static final float L7 = -1.1514610310e-1f;
  static final float L6 = 1.1676998740e-1f;
  static final float L5 = -1.2420140846e-1f;
  static final float L4 = 1.4249322787e-1f;
  static final float L3 = -1.6668057665e-1f;
  static final float L2 = 2.0000714765e-1f;
  static final float L1 = -2.4999993993e-1f;
  static final float L0 = 3.3333331174e-1f;

  /**
   * exp(x) for x &lt;= 0 (below {@link #EXP_MIN}: exp(-87)): x = n ln 2 + r with n = round(x / ln
   * 2) and |r| &lt;= ln 2 / 2, then a degree-7 polynomial in r times 2^n, within 2 ulps of exp.
   */
  static float exp(float x) {
    x = Math.max(x, EXP_MIN);
    float shifted = x * LOG2E + ROUNDER;
    float n = shifted - ROUNDER;
    float r = n * -LN2_HI + x;
    r = n * -LN2_LO + r;
    float z = r * r;
    float p = ((((r * E5 + E4) * r + E3) * r + E2) * r + E1) * r + E0;
    p = p * z + r + 1f;
    return p * Float.intBitsToFloat(
        (Float.floatToRawIntBits(shifted) - ROUNDER_BITS_LESS_BIAS) << 23);
  }

  /**
   * log(1 + t) for t in [0, 1] without forming 1 + t (exact for tiny t): m = t, or (t - 1) / 2
   * with one ln 2 added when 1 + t &gt; sqrt 2, then Cephes' polynomial in m in [sqrt(1/2) - 1,
   * sqrt 2 - 1].
   */
  static float log1p(float t) {
    boolean big = t > SQRT2_M1;
    float m = big ? (t - 1f) * 0.5f : t;
    float e = big ? 1f : 0f;
    float z = m * m;
    float p = (((((((m * L8 + L7) * m + L6) * m + L5) * m + L4) * m + L3) * m + L2) * m + L1) * m
        + L0;
    float y = p * m * z;
    y = e * LN2_LO + y;
    y = z * -0.5f + y;
    return e * LN2_HI + (m + y);
  }
}
