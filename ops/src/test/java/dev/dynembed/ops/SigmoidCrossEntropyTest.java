package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** The fused loss against the textbook formula and against central differences. */
class SigmoidCrossEntropyTest {
  // every regime: masked, large of both signs (exp underflows), small, zero
  private static final double[][] X = {
      {SampledLogits.MASKED, -40, -3.5, -1e-3, 0},
      {1e-9, 0.7, 4, 40, 750}};
  private static final double[][] Y = {{0, 0, 1, 0, 1}, {1, 0, 1, 1, 0}};

  private static double reference(double v, double y) {
    return Math.max(v, 0) - v * y + Math.log1p(Math.exp(-Math.abs(v)));
  }

  private static double[] lossOf(double[][] x) {
    SameDiff sd = SameDiff.create();
    SDVariable xs = sd.var("x", Nd4j.createFromArray(x));
    SDVariable ys = sd.constant("y", Nd4j.createFromArray(Y));
    new DynEmbed(sd).sigmoidCrossEntropy("loss", xs, ys);
    return sd.output(Map.of(), "loss").get("loss").toDoubleVector();
  }

  @Test
  void loss_matchesTheLog1pFormula_inEveryRegime() {
    double[] loss = lossOf(X);
    for (int e = 0; e < X.length; e++) {
      double want = 0;
      for (int j = 0; j < X[e].length; j++) {
        if (X[e][j] != SampledLogits.MASKED) {
          want += reference(X[e][j], Y[e][j]);
        }
      }
      assertEquals(want, loss[e], 1e-12 * Math.max(1, Math.abs(want)), "row " + e);
    }
  }

  @Test
  void gradient_isSigmoidMinusLabel_andMatchesCentralDifferences() {
    SameDiff sd = SameDiff.create();
    SDVariable xs = sd.var("x", Nd4j.createFromArray(X));
    SDVariable ys = sd.constant("y", Nd4j.createFromArray(Y));
    SDVariable loss = new DynEmbed(sd).sigmoidCrossEntropy("loss", xs, ys).sum("total");
    sd.setLossVariables(loss);
    INDArray g = sd.calculateGradients(Map.of(), "x").get("x");
    for (int e = 0; e < X.length; e++) {
      for (int j = 0; j < X[e].length; j++) {
        double v = X[e][j];
        double want = v == SampledLogits.MASKED ? 0 : 1 / (1 + Math.exp(-v)) - Y[e][j];
        assertEquals(want, g.getDouble(e, j), 1e-12, "d/dx[" + e + "][" + j + "]");
        if (Math.abs(v) < 10) {
          double h = 1e-6;
          double[][] plus = copy(X);
          double[][] minus = copy(X);
          plus[e][j] += h;
          minus[e][j] -= h;
          double fd = (lossOf(plus)[e] - lossOf(minus)[e]) / (2 * h);
          assertEquals(fd, g.getDouble(e, j), 1e-7, "finite difference at [" + e + "][" + j + "]");
        }
      }
    }
  }

  private static double[][] copy(double[][] a) {
    double[][] c = new double[a.length][];
    for (int i = 0; i < a.length; i++) {
      c[i] = a[i].clone();
    }
    return c;
  }

  /** FLOAT graphs (training) run in float on SIMD lanes: the same values to float precision. */
  @Test
  void floatGraph_matchesTheFormula_lossAndGradient() {
    SameDiff sd = SameDiff.create();
    SDVariable xs = sd.var("x", Nd4j.createFromArray(X).castTo(DataType.FLOAT));
    SDVariable ys = sd.constant("y", Nd4j.createFromArray(Y).castTo(DataType.FLOAT));
    SDVariable loss = new DynEmbed(sd).sigmoidCrossEntropy("loss", xs, ys);
    loss.sum("total");
    sd.setLossVariables("total");
    INDArray out = sd.output(Map.of(), "loss").get("loss");
    assertEquals(DataType.FLOAT, out.dataType());
    INDArray g = sd.calculateGradients(Map.of(), "x").get("x");
    assertEquals(DataType.FLOAT, g.dataType());
    for (int e = 0; e < X.length; e++) {
      double want = 0;
      for (int j = 0; j < X[e].length; j++) {
        double v = (float) X[e][j];
        if (X[e][j] != SampledLogits.MASKED) {
          want += reference(v, Y[e][j]);
        }
        double dwant = X[e][j] == SampledLogits.MASKED ? 0 : 1 / (1 + Math.exp(-v)) - Y[e][j];
        assertEquals(dwant, g.getDouble(e, j), 1e-6, "d/dx[" + e + "][" + j + "]");
      }
      assertEquals(want, out.getDouble(e), 1e-6 * Math.max(1, Math.abs(want)), "row " + e);
    }
  }

  /**
   * The SIMD kernels against the scalar loops, at lengths around the lane count (tails) and over
   * every regime of the logit: saturated, tiny, zero, masked.
   */
  @Test
  void simdKernels_agreeWithTheScalarLoops() {
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(7);
    for (int n : new int[] {0, 1, 7, 15, 16, 17, 33, 100, 1021}) {
      float[] x = new float[n];
      float[] y = new float[n];
      for (int i = 0; i < n; i++) {
        x[i] = switch (i % 5) {
          case 0 -> (float) (rnd.nextGaussian() * 4);
          case 1 -> (float) (rnd.nextDouble(-100, 100));
          case 2 -> (float) (rnd.nextGaussian() * 1e-6);
          case 3 -> (float) SampledLogits.MASKED;
          default -> 0f;
        };
        y[i] = rnd.nextInt(3) == 0 ? 1f : 0f;
      }
      float[] loss = new float[n];
      float[] lossScalar = new float[n];
      float[] sig = new float[n];
      float[] sigScalar = new float[n];
      SigmoidKernels.lossTerms(x, y, loss, n);
      SigmoidKernels.scalarLossTerms(x, y, lossScalar, 0, n);
      SigmoidKernels.sigmoidMinus(x, y, sig, n);
      SigmoidKernels.scalarSigmoidMinus(x, y, sigScalar, 0, n);
      for (int i = 0; i < n; i++) {
        assertEquals(lossScalar[i], loss[i], 2e-6 * Math.max(1, Math.abs(lossScalar[i])),
            "loss term " + i + " of " + n + " at x=" + x[i]);
        assertEquals(sigScalar[i], sig[i], 1e-6, "sigmoid - y " + i + " of " + n + " at x=" + x[i]);
      }
    }
  }

  /**
   * The SIMD lanes compute exactly the scalar float polynomials, bit for bit: IEEE arithmetic
   * only, so every JIT tier gives the same bits (the vector API's EXP and LOG did not: SVML once
   * compiled, Math.exp before). And the polynomials are within 2 ulps of exp and log1p.
   */
  @Test
  void expAndLog1p_sameBitsOnEveryLane_within2UlpsOfTheJdk() {
    org.junit.jupiter.api.Assumptions.assumeTrue(dev.dynembed.table.common.FloatKernels.VECTOR);
    var species = jdk.incubator.vector.FloatVector.SPECIES_PREFERRED;
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(11);
    int n = species.length() * 4096;
    float[] x = new float[n];
    float[] t = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = i < 8 ? new float[] {0f, -0f, -1e-30f, -86.9f, -87f, -88f, -1e30f, -0.3465736f}[i]
          : (float) -rnd.nextDouble(0, i % 2 == 0 ? 1 : 90);
      t[i] = i < 6 ? new float[] {0f, 1f, 1e-30f, 1e-8f, 0.41421356f, 0.41421357f}[i]
          : (float) Math.exp(-rnd.nextDouble(0, i % 3 == 0 ? 40 : 3));
    }
    float[] e = new float[n];
    float[] l = new float[n];
    for (int i = 0; i < n; i += species.length()) {
      VectorSigmoid.exp(jdk.incubator.vector.FloatVector.fromArray(species, x, i)).intoArray(e, i);
      VectorSigmoid.log1p(jdk.incubator.vector.FloatVector.fromArray(species, t, i))
          .intoArray(l, i);
    }
    for (int i = 0; i < n; i++) {
      float es = SigmoidKernels.exp(x[i]);
      float ls = SigmoidKernels.log1p(t[i]);
      assertEquals(Float.floatToRawIntBits(es), Float.floatToRawIntBits(e[i]),
          "exp lane at x=" + x[i]);
      assertEquals(Float.floatToRawIntBits(ls), Float.floatToRawIntBits(l[i]),
          "log1p lane at t=" + t[i]);
      double want = Math.exp(Math.max(x[i], SigmoidKernels.EXP_MIN));
      assertEquals(want, es, 2 * Math.ulp((float) want), "exp at x=" + x[i]);
      double wantLog = Math.log1p(t[i]);
      assertEquals(wantLog, ls, 2 * Math.ulp((float) wantLog), "log1p at t=" + t[i]);
    }
  }
}
