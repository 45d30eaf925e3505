package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.SamplerKind;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

class SampledLogitsTest {
  static final int D = 3;

  /** Example 0: positives {a, b}, 1 pad; example 1: {c}, 2 pads. Sampled: a, x, y, x. */
  private final String[][] positives = {{"a", "b", "pad"}, {"c", "pad", "pad"}};
  private final double[][] mask = {{1, 1, 0}, {1, 0, 0}};

  private ProbeTable table(String name) {
    return table(name, D);
  }

  private ProbeTable table(String name, int dim) {
    ProbeTable t = new ProbeTable(name, dim);
    t.sampled = new String[] {"a", "x", "y", "x"};
    t.probability = Map.of("a", 0.2, "b", 0.1, "c", 0.05, "x", 0.4, "y", 0.25);
    return t;
  }

  private static final class Graph {
    final SameDiff sd = SameDiff.create();
    final SDVariable act;
    final SDVariable[] out;
    final Map<String, INDArray> ph;
    final ProbeTable table;

    Graph(EmbeddingTableRef t, String[][] pos, double[][] mask, boolean hits, boolean logQ,
        DataType type) {
      this(t, pos, mask, hits, logQ, type, 4, false);
    }

    Graph(EmbeddingTableRef t, String[][] pos, double[][] mask, boolean hits, boolean logQ,
        DataType type, int numSampled, boolean perExample) {
      act = sd.var("act", Nd4j.rand(DataType.DOUBLE, 2, D).subi(0.5).castTo(type));
      table = t.table;
      SDVariable p = sd.placeHolder("pos", DataType.UTF8, 2, 3);
      SDVariable m = sd.placeHolder("mask", type, 2, 3);
      Sampling.Builder sampling = Sampling.builder(numSampled).seed(1).logQCorrection(logQ);
      if (!hits) {
        sampling.keepAccidentalHits();
      }
      if (perExample) {
        sampling.perExample(0);
      }
      out = new DynEmbed(sd).sampledLogits("sl", act, p, m, t.table, sampling.build());
      SDVariable loss = sd.loss().sigmoidCrossEntropy("loss", out[1], out[0], null);
      sd.setLossVariables(loss);
      ph = Map.of("pos", Strings.matrix(pos), "mask", Nd4j.createFromArray(mask).castTo(type));
    }
  }

  private record EmbeddingTableRef(ProbeTable table) {}

  @Test
  void forward_mergesPositivesWithSamples_masksPaddingAndAccidentalHits_correctsLogQ() {
    ProbeTable t = table("sl1");
    Graph g = new Graph(new EmbeddingTableRef(t), positives, mask, true, true, DataType.DOUBLE);
    Map<String, INDArray> r = g.sd.output(g.ph, "sl_logits", "sl_labels");
    INDArray logits = r.get("sl_logits");
    INDArray labels = r.get("sl_labels");
    assertEquals(2, logits.rows());
    assertEquals(3 + 4, logits.columns());
    double[][] expectedLabels = {{1, 1, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0}};
    double[] a = g.act.getArr().getRow(0).toDoubleVector();
    for (int e = 0; e < 2; e++) {
      for (int j = 0; j < 7; j++) {
        assertEquals(expectedLabels[e][j], labels.getDouble(e, j), "label " + e + "," + j);
      }
    }
    // padding masked
    assertEquals(SampledLogits.MASKED, logits.getDouble(0, 2));
    assertEquals(SampledLogits.MASKED, logits.getDouble(1, 1));
    // sampled "a" is an accidental hit for example 0 only
    assertEquals(SampledLogits.MASKED, logits.getDouble(0, 3));
    assertTrue(logits.getDouble(1, 3) > SampledLogits.MASKED);
    // logQ: logit(0, "x") = act0 . row(x) - log(S * q(x)) with S = 4, q = 0.4
    double dot = 0;
    for (int j = 0; j < D; j++) {
      dot += a[j] * t.row("x")[j];
    }
    assertEquals(dot - Math.log(4 * 0.4), logits.getDouble(0, 4), 1e-6);
    assertEquals(SamplerKind.UNIGRAM_SAMPLER, t.lastSampler);
    assertEquals(0.75f, t.lastAlpha);
  }

  @Test
  void perExample_eachExampleGetsItsOwnDraws() {
    ProbeTable t = table("sl4");
    // S = 2 per example: the probe's draws a, x go to example 0, y, x to example 1
    Graph g = new Graph(new EmbeddingTableRef(t), positives, mask, true, true, DataType.DOUBLE, 2,
        true);
    INDArray logits = g.sd.output(g.ph, "sl_logits").get("sl_logits");
    assertEquals(3 + 2, logits.columns());
    assertEquals(SampledLogits.MASKED, logits.getDouble(0, 3)); // "a" is example 0's positive
    double[] a1 = g.act.getArr().getRow(1).toDoubleVector();
    double dotY = 0;
    double dotX = 0;
    for (int j = 0; j < D; j++) {
      dotY += a1[j] * t.row("y")[j];
      dotX += a1[j] * t.row("x")[j];
    }
    assertEquals(dotY - Math.log(2 * 0.25), logits.getDouble(1, 3), 1e-6);
    assertEquals(dotX - Math.log(2 * 0.4), logits.getDouble(1, 4), 1e-6);
  }

  @Test
  void pool_examplesPickTheirCandidatesAmongThePooledDraws() {
    ProbeTable t = table("sl7");
    SameDiff sd = SameDiff.create();
    SDVariable act = sd.var("act", Nd4j.rand(DataType.DOUBLE, 2, D).subi(0.5));
    SDVariable p = sd.placeHolder("pos", DataType.UTF8, 2, 3);
    SDVariable m = sd.placeHolder("mask", DataType.DOUBLE, 2, 3);
    // S = 3 per example from a pool of 2 draws: the probe draws a, x
    SDVariable[] out = new DynEmbed(sd).sampledLogits("sl", act, p, m, t,
        Sampling.builder(3).seed(1).perExample(2).build());
    GraphTables.of(sd).setDetachedSettings(0f, 5, 0, true); // draws of step 5, stream 0
    long drawSeed = 1 + 0x9E3779B97F4A7C15L * 6;
    INDArray logits = sd.output(Map.of("pos", Strings.matrix(positives), "mask",
        Nd4j.createFromArray(mask)), out[0].name()).get(out[0].name());
    assertEquals(3 + 3, logits.columns());
    String[] pool = {"a", "x"};
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (int e = 0; e < 2; e++) {
      double[] a = act.getArr().getRow(e).toDoubleVector();
      for (int k = 0; k < 3; k++) {
        // candidate (e, k) is the pooled draw its pick names, a function of (seed, position)
        String key = pool[SampledLogits.pick(drawSeed, e * 3 + k, 2)];
        seen.add(key);
        double v = logits.getDouble(e, 3 + k);
        if (e == 0 && key.equals("a")) {
          assertEquals(SampledLogits.MASKED, v, "'a' is example 0's positive: an accidental hit");
          continue;
        }
        double dot = 0;
        for (int j = 0; j < D; j++) {
          dot += a[j] * t.row(key)[j];
        }
        assertEquals(dot, v, 1e-9, "candidate " + e + "," + k + " must be pooled draw " + key);
      }
    }
    assertEquals(java.util.Set.of("a", "x"), seen, "the six picks use both pooled draws");
  }

  @Test
  void pick_isUniformOverThePool() {
    int draws = 10;
    int[] counts = new int[draws];
    for (int i = 0; i < 100_000; i++) {
      counts[SampledLogits.pick(42, i, draws)]++;
    }
    for (int c : counts) {
      assertEquals(10_000, c, 400); // ~4 standard deviations
    }
    assertEquals(SampledLogits.pick(7, 3, 1000), SampledLogits.pick(7, 3, 1000)); // a function
  }

  @Test
  void backward_matchesCentralDifferences_forActivationsAndRows() {
    checkBackward(new Graph(new EmbeddingTableRef(table("sl2")), positives, mask, true, true,
        DataType.DOUBLE));
  }

  @Test
  void backward_perExampleDraws_matchesCentralDifferences() {
    checkBackward(new Graph(new EmbeddingTableRef(table("sl5")), positives, mask, true, true,
        DataType.DOUBLE, 3, true));
  }

  private void checkBackward(Graph g) {
    ProbeTable t = g.table;
    INDArray dAct = g.sd.calculateGradients(g.ph, "act", DynEmbed.handleName(g.sd, t)).get("act")
        .dup();
    double eps = 1.0 / 1024;
    INDArray act = g.act.getArr();
    for (int e = 0; e < 2; e++) {
      for (int j = 0; j < D; j++) {
        double orig = act.getDouble(e, j);
        act.putScalar(new long[] {e, j}, orig + eps);
        double up = g.sd.output(g.ph, "loss").get("loss").getDouble(0);
        act.putScalar(new long[] {e, j}, orig - eps);
        double down = g.sd.output(g.ph, "loss").get("loss").getDouble(0);
        act.putScalar(new long[] {e, j}, orig);
        assertEquals((up - down) / (2 * eps), dAct.getDouble(e, j), 1e-6, "dL/dact " + e + "," + j);
      }
    }
    for (String k : new String[] {"a", "b", "c", "x", "y"}) {
      for (int j = 0; j < D; j++) {
        float[] r = t.row(k);
        float orig = r[j];
        r[j] = (float) (orig + eps);
        double up = g.sd.output(g.ph, "loss").get("loss").getDouble(0);
        r[j] = (float) (orig - eps);
        double down = g.sd.output(g.ph, "loss").get("loss").getDouble(0);
        r[j] = orig;
        double numeric = (up - down) / (2 * eps);
        double analytic = t.received.getOrDefault(k, new double[D])[j];
        assertEquals(numeric, analytic, 1e-5 * Math.max(1, Math.abs(numeric)),
            "dL/d row(" + k + ")[" + j + "]");
      }
    }
    assertTrue(!t.received.containsKey("pad"), "padding must get no gradient");
  }

  @Test
  void backward_linearLoss_maskedSlotsAndAccidentalHitsGetNoGradient() {
    linearLoss("sl3", DataType.DOUBLE, D, 1e-6);
  }

  @Test
  void backward_floatGraph_simdKernels_matchTheDoubleReference() {
    // FLOAT graphs run on FloatKernels' SIMD loops: dim 37 covers whole lanes and a tail
    linearLoss("sl6", DataType.FLOAT, 37, 1e-5);
  }

  /**
   * A linear loss puts gradient 1 on every logit, masked ones included, so any leak through a
   * masked slot would show (sigmoid/softmax losses hide it: their gradient there is ~0).
   */
  private void linearLoss(String name, DataType type, int dim, double tol) {
    ProbeTable t = table(name, dim);
    SameDiff sd = SameDiff.create();
    SDVariable act = sd.var("act", Nd4j.rand(DataType.DOUBLE, 2, dim).subi(0.5).castTo(type));
    SDVariable p = sd.placeHolder("pos", DataType.UTF8, 2, 3);
    SDVariable m = sd.placeHolder("mask", type, 2, 3);
    SDVariable[] out = new DynEmbed(sd).sampledLogits("sl", act, p, m, t,
        Sampling.builder(4).seed(1).build());
    sd.setLossVariables(out[0].sum().rename("loss"));
    Map<String, INDArray> ph = Map.of("pos", Strings.matrix(positives),
        "mask", Nd4j.createFromArray(mask).castTo(type));
    INDArray logits = sd.output(ph, out[0].name()).get(out[0].name());
    INDArray dAct = sd.calculateGradients(ph, "act", DynEmbed.handleName(sd, t)).get("act");
    String[][] live = {{"a", "b", "x", "y", "x"}, {"c", "a", "x", "y", "x"}}; // unmasked candidates
    double[][] a = {act.getArr().getRow(0).toDoubleVector(), act.getArr().getRow(1).toDoubleVector()};
    Map<String, double[]> expectedRows = new java.util.HashMap<>();
    String[][] columns = {{"a", "b", null, null, "x", "y", "x"}, {"c", null, null, "a", "x", "y",
        "x"}}; // null: padding, or the accidental hit of 'a' in example 0
    for (int e = 0; e < 2; e++) {
      for (int c = 0; c < columns[e].length; c++) {
        double want = SampledLogits.MASKED;
        if (columns[e][c] != null) {
          want = 0;
          for (int j = 0; j < dim; j++) {
            want += a[e][j] * t.row(columns[e][c])[j];
          }
        }
        assertEquals(want, logits.getDouble(e, c), tol, "logit " + e + "," + c);
      }
      double[] expected = new double[dim];
      for (String k : live[e]) {
        for (int j = 0; j < dim; j++) {
          expected[j] += t.row(k)[j];
          expectedRows.computeIfAbsent(k, x -> new double[dim])[j] += a[e][j];
        }
      }
      for (int j = 0; j < dim; j++) {
        assertEquals(expected[j], dAct.getDouble(e, j), tol, "dL/dact " + e + "," + j);
      }
    }
    assertEquals(expectedRows.keySet(), t.received.keySet());
    for (String k : expectedRows.keySet()) {
      for (int j = 0; j < dim; j++) {
        assertEquals(expectedRows.get(k)[j], t.received.get(k)[j], tol, "row " + k);
      }
    }
  }

  /**
   * Shared by runs (word2vec's --shared-negatives): consecutive examples with the same positive
   * take the candidates the run's first example would take, and the gradients are those of the
   * per-example loss written out directly (a linear loss: each live logit's gradient is 1).
   */
  @Test
  void sharedByRuns_aRunsExamplesShareTheirCandidates_gradientsMatchTheDirectSums() {
    int dim = 5;
    ProbeTable t = table("sl8", dim);
    SameDiff sd = SameDiff.create();
    int b = 5;
    SDVariable act = sd.var("act", Nd4j.rand(DataType.DOUBLE, b, dim).subi(0.5)
        .castTo(DataType.FLOAT));
    SDVariable p = sd.placeHolder("pos", DataType.UTF8, b, 1);
    SDVariable m = sd.placeHolder("mask", DataType.FLOAT, b, 1);
    // S = 2 per example, picked among a pool of 3 draws (the probe draws a, x, y)
    SDVariable[] out = new DynEmbed(sd).sampledLogits("sl", act, p, m, t,
        Sampling.builder(2).seed(1).perExample(3).sharedByRuns(true).build());
    sd.setLossVariables(out[0].sum().rename("loss"));
    GraphTables.of(sd).setDetachedSettings(0f, 5, 0, true);
    long drawSeed = 1 + 0x9E3779B97F4A7C15L * 6;
    // runs: {c, c, c} (examples 0-2), {a} (3), {c} (4: the same key, but not adjacent)
    String[][] pos = {{"c"}, {"c"}, {"c"}, {"a"}, {"c"}};
    int[] run = {0, 0, 0, 1, 2};
    assertEquals(java.util.Arrays.toString(run), java.util.Arrays.toString(
        SampledLogits.runs(new int[] {0, 0, 0, 1, 0}, b, 1)));
    Map<String, INDArray> ph = Map.of("pos", Strings.matrix(pos), "mask",
        Nd4j.ones(DataType.FLOAT, b, 1));
    INDArray logits = sd.output(ph, out[0].name()).get(out[0].name());
    INDArray dAct = sd.calculateGradients(ph, "act", DynEmbed.handleName(sd, t)).get("act");
    String[] pool = {"a", "x", "y"};
    Map<String, double[]> expectedRows = new java.util.HashMap<>();
    java.util.Set<String> runZero = new java.util.HashSet<>();
    for (int e = 0; e < b; e++) {
      double[] a = act.getArr().getRow(e).toDoubleVector();
      java.util.List<String> live = new java.util.ArrayList<>(java.util.List.of(pos[e][0]));
      assertEquals(dot(a, t.row(pos[e][0])), logits.getDouble(e, 0), 1e-5, "positive " + e);
      for (int k = 0; k < 2; k++) {
        String key = pool[SampledLogits.pick(drawSeed, run[e] * 2 + k, 3)];
        if (run[e] == 0) {
          runZero.add(k + key);
        }
        if (key.equals(pos[e][0])) {
          assertEquals(SampledLogits.MASKED, logits.getDouble(e, 1 + k), "accidental hit");
          continue;
        }
        assertEquals(dot(a, t.row(key)), logits.getDouble(e, 1 + k), 1e-5,
            "candidate " + e + "," + k + " must be run " + run[e] + "'s draw " + key);
        live.add(key);
      }
      double[] expected = new double[dim];
      for (String k : live) {
        for (int j = 0; j < dim; j++) {
          expected[j] += t.row(k)[j];
          expectedRows.computeIfAbsent(k, x -> new double[dim])[j] += a[j];
        }
      }
      for (int j = 0; j < dim; j++) {
        assertEquals(expected[j], dAct.getDouble(e, j), 1e-5, "dL/dact " + e + "," + j);
      }
    }
    assertEquals(2, runZero.size(), "one set of 2 candidates for the 3 examples of run 0");
    assertEquals(expectedRows.keySet(), t.received.keySet());
    for (String k : expectedRows.keySet()) {
      for (int j = 0; j < dim; j++) {
        assertEquals(expectedRows.get(k)[j], t.received.get(k)[j], 1e-5, "row " + k);
      }
    }
    IllegalArgumentException bad = org.junit.jupiter.api.Assertions.assertThrows(
        IllegalArgumentException.class, () -> Sampling.builder(2).sharedByRuns(true).build());
    assertTrue(bad.getMessage().contains("per-example"), bad.getMessage());
  }

  private static double dot(double[] a, float[] r) {
    double v = 0;
    for (int j = 0; j < a.length; j++) {
      v += a[j] * r[j];
    }
    return v;
  }
}
