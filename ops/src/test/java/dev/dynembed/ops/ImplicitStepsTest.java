package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Implicit row steps: every gradient row the tables receive is the summed row G times {@code 1 /
 * (1 + 2 lr C)}, with C, the curvature along G, recomputed here from the rows, the activations
 * and the logistic loss's second derivative, for the candidate rows (sampledLogits) and for the
 * looked-up rows (the gathered lookup, which sums its pairs' curvature per key).
 */
class ImplicitStepsTest {
  static final int D = 3;
  static final float LR = 0.5f;
  // pairs: center of each, positive of each; the batch shares the draws x and a
  static final String[] CENTERS = {"c1", "c2"};
  static final int[] CENTER_OF = {0, 0, 1};
  static final String[] POSITIVE = {"a", "b", "x"};
  // "x" is pair 2's positive and a draw of pairs 0 and 1, "a" pair 0's positive (its own draw of
  // "a" is an accidental hit) and a draw of pairs 1 and 2: each has two gradient rows that the
  // table sums, and both must take the key's total curvature for the check to hold
  static final String[] DRAWN = {"x", "a"};

  private static Map<String, double[]> run(boolean implicit, boolean mean, ProbeTable in,
      ProbeTable out) {
    SameDiff sd = SameDiff.create();
    DynEmbed ops = new DynEmbed(sd);
    SDVariable centers = sd.placeHolder("centers", DataType.UTF8, -1);
    SDVariable centerOf = sd.placeHolder("center_of", DataType.INT32, -1);
    SDVariable pos = sd.placeHolder("pos", DataType.UTF8, -1, 1);
    SDVariable mask = sd.placeHolder("mask", DataType.DOUBLE, -1, 1);
    SDVariable h = ops.dynamicEmbeddingLookup("h", centers, centerOf, in, true, DataType.DOUBLE,
        false);
    SDVariable[] logits = ops.sampledLogits("sl", h, pos, mask, out,
        Sampling.builder(DRAWN.length).seed(1).implicitRowSteps(implicit).build());
    SDVariable perPair = ops.sigmoidCrossEntropy("xent", logits[0], logits[1]);
    sd.setLossVariables(mean ? perPair.mean() : perPair.sum());
    GraphTables.of(sd).setDetachedSettings(LR, 3, 0, true);
    String[][] p = new String[POSITIVE.length][];
    for (int i = 0; i < p.length; i++) {
      p[i] = new String[] {POSITIVE[i]};
    }
    Map<String, INDArray> ph = Map.of("centers", KeyArrays.of(CENTERS),
        "center_of", Nd4j.createFromArray(CENTER_OF), "pos", Strings.matrix(p),
        "mask", Nd4j.ones(DataType.DOUBLE, POSITIVE.length, 1));
    in.received.clear();
    out.received.clear();
    sd.calculateGradients(ph, DynEmbed.handleName(sd, in), DynEmbed.handleName(sd, out));
    Map<String, double[]> got = new HashMap<>();
    in.received.forEach((k, v) -> got.put("in:" + k, v.clone()));
    out.received.forEach((k, v) -> got.put("out:" + k, v.clone()));
    return got;
  }

  private static ProbeTable out() {
    ProbeTable t = new ProbeTable("out", D);
    t.sampled = DRAWN;
    return t;
  }

  /**
   * C per received key, from first principles: over its live (pair, candidate) terms, {@code
   * sum L''(f) (partner . G)^2 / |G|^2} with G the key's summed gradient.
   */
  private static Map<String, Double> curvature(ProbeTable in, ProbeTable out, double w,
      Map<String, double[]> summed) {
    Map<String, Double> c = new HashMap<>();
    for (int e = 0; e < POSITIVE.length; e++) {
      float[] hv = in.row(CENTERS[CENTER_OF[e]]);
      List<String> candidates = new java.util.ArrayList<>(List.of(POSITIVE[e]));
      for (String k : DRAWN) {
        if (!k.equals(POSITIVE[e])) { // accidental hits get no logit
          candidates.add(k);
        }
      }
      for (int i = 0; i < candidates.size(); i++) {
        float[] u = out.row(candidates.get(i));
        double f = dot(hv, u);
        double sigma = 1 / (1 + Math.exp(-f));
        double second = w * sigma * (1 - sigma); // d2/df2 of w * logistic loss, either label
        c.merge("out:" + candidates.get(i), second * along(hv, summed.get("out:"
            + candidates.get(i))), Double::sum);
        c.merge("in:" + CENTERS[CENTER_OF[e]], second * along(u, summed.get("in:"
            + CENTERS[CENTER_OF[e]])), Double::sum);
      }
    }
    return c;
  }

  /** {@code (x . g)^2 / |g|^2}. */
  private static double along(float[] x, double[] g) {
    double t = 0;
    double n = 0;
    for (int j = 0; j < x.length; j++) {
      t += x[j] * g[j];
      n += g[j] * g[j];
    }
    return t * t / n;
  }

  private static double dot(float[] a, float[] b) {
    double s = 0;
    for (int j = 0; j < a.length; j++) {
      s += (double) a[j] * b[j];
    }
    return s;
  }

  private static void check(boolean mean) {
    ProbeTable in = new ProbeTable("in", D);
    ProbeTable out = out();
    Map<String, double[]> summed = run(false, mean, in, out);
    Map<String, double[]> damped = run(true, mean, in, out);
    Map<String, Double> c = curvature(in, out, mean ? 1.0 / POSITIVE.length : 1.0, summed);
    assertEquals(summed.keySet(), damped.keySet());
    assertEquals(c.keySet(), summed.keySet(), "every key with a term got a gradient row");
    for (String k : summed.keySet()) {
      double factor = 1 / (1 + 2 * LR * c.get(k));
      assertTrue(factor < 0.999, k + ": the damping is visible at this rate (" + factor + ")");
      for (int j = 0; j < D; j++) {
        assertEquals(summed.get(k)[j] * factor, damped.get(k)[j],
            1e-5 * Math.max(1, Math.abs(summed.get(k)[j])), k + " column " + j);
      }
    }
  }

  @Test
  void summedLoss_everyRowIsDampedByItsCurvature() {
    check(false);
  }

  @Test
  void meanLoss_curvatureFollowsTheLossWeight() {
    check(true);
  }

  @Test
  void logisticCurvature_matchesTheSecondDerivative() {
    for (double f : new double[] {-30, -2, 0, 0.7, 5, 30}) {
      double sigma = 1 / (1 + Math.exp(-f));
      for (double w : new double[] {1, 0.25}) {
        double expected = w * sigma * (1 - sigma);
        assertEquals(expected, ImplicitSteps.logisticCurvature(f, true, w * (sigma - 1)), 1e-12);
        assertEquals(expected, ImplicitSteps.logisticCurvature(f, false, w * sigma), 1e-12);
      }
    }
  }
}
