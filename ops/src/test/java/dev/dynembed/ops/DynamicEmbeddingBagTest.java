package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The pooled bag ({@code dynamicEmbeddingBag}) against the same function built on the client
 * (lookup, weights, sum, divide) in double: equal outputs, equal gradients sent to the table;
 * and its gradient against central finite differences.
 */
class DynamicEmbeddingBagTest {
  private static final int DIM = 4;
  private static final String[][] KEYS = {
      {"x", "y", "x", "pad"}, {"z", "z", "y", "w"}, {"pad", "pad", "pad", "pad"}};
  private static final double[][] WEIGHTS = {{1, 0.5, 2, 0}, {1, 1, 0.25, 3}, {0, 0, 0, 0}};

  private static ProbeTable table() {
    ProbeTable t = new ProbeTable("probe", DIM);
    Random rnd = new Random(11);
    for (String k : new String[] {"x", "y", "z", "w", "pad"}) {
      float[] r = new float[DIM];
      for (int j = 0; j < DIM; j++) {
        r[j] = (float) (rnd.nextGaussian() * 0.5);
      }
      t.rows.put(k, r);
    }
    return t;
  }

  /** A non-linear loss of the bag: tanh(bag . w) squared, plus a square of the bag itself. */
  private static SameDiff graph(ProbeTable t, Combiner c, boolean onShards) {
    SameDiff sd = SameDiff.create();
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, 3, 4);
    SDVariable weights = sd.placeHolder("weights", DataType.DOUBLE, 3, 4);
    SDVariable bag;
    if (onShards) {
      bag = new DynEmbed(sd).dynamicEmbeddingBag("bag", keys, weights, t, c, true,
          DataType.DOUBLE);
    } else { // the client-side form of Layers.embeddingBag, in double
      SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", keys, t, true,
          DataType.DOUBLE);
      SDVariable summed = rows.mul(sd.expandDims(weights, 2)).sum(1);
      SDVariable norm = c == Combiner.MEAN ? weights.sum(true, 1)
          : sd.math().sqrt(weights.mul(weights).sum(true, 1));
      bag = c == Combiner.SUM ? summed
          : summed.div(sd.math().max(norm, sd.constant(Nd4j.scalar(1e-30))));
      bag = sd.updateVariableNameAndReference(bag, "bag");
    }
    SDVariable w = sd.var("w", Nd4j.linspace(-1, 1, DIM * 2, DataType.DOUBLE).reshape(DIM, 2));
    SDVariable h = sd.math().tanh(bag.mmul(w));
    SDVariable loss = h.mul(h).sum().add(bag.mul(bag).sum().mul(0.1)).rename("loss");
    sd.setLossVariables(loss);
    return sd;
  }

  private static Map<String, INDArray> feeds() {
    return Map.of("keys", Strings.matrix(KEYS), "weights", Nd4j.createFromArray(WEIGHTS));
  }

  @ParameterizedTest
  @EnumSource(Combiner.class)
  void pooled_equalsClientPooling_forwardAndBackward(Combiner c) {
    Map<String, double[]> received = new HashMap<>();
    double[][] outputs = new double[2][];
    for (boolean onShards : new boolean[] {false, true}) {
      ProbeTable t = table();
      SameDiff sd = graph(t, c, onShards);
      outputs[onShards ? 1 : 0] = sd.output(feeds(), "bag").get("bag").data().asDouble();
      sd.calculateGradients(feeds(), DynEmbed.handleName(sd, t));
      for (var e : t.received.entrySet()) {
        double[] prev = received.putIfAbsent(e.getKey(), e.getValue());
        if (prev != null) {
          for (int j = 0; j < DIM; j++) {
            assertEquals(prev[j], e.getValue()[j], 1e-5, c + ": gradient of " + e.getKey());
          }
        }
      }
      if (onShards) {
        assertEquals(4, t.received.size(), "x, y, z, w; padding (weight 0) gets nothing");
      }
    }
    for (int i = 0; i < outputs[0].length; i++) {
      assertEquals(outputs[0][i], outputs[1][i], 1e-6, c + ": bag value " + i);
    }
    for (int j = 0; j < DIM; j++) {
      assertEquals(0.0, outputs[1][2 * DIM + j], "an example without keys pools to zeros");
    }
  }

  @ParameterizedTest
  @EnumSource(Combiner.class)
  void pooledBackward_matchesCentralDifferences(Combiner c) {
    ProbeTable t = table();
    SameDiff sd = graph(t, c, true);
    sd.calculateGradients(feeds(), DynEmbed.handleName(sd, t));
    double eps = 1.0 / 1024;
    for (String k : new String[] {"x", "y", "z", "w"}) {
      for (int j = 0; j < DIM; j++) {
        float[] r = t.rows.get(k);
        float orig = r[j];
        r[j] = (float) (orig + eps);
        double up = sd.output(feeds(), "loss").get("loss").getDouble(0);
        r[j] = (float) (orig - eps);
        double down = sd.output(feeds(), "loss").get("loss").getDouble(0);
        r[j] = orig;
        double numeric = (up - down) / (2 * eps);
        // the rows are pooled in float (as a shard does): ~1e-7 relative per value
        assertEquals(numeric, t.received.get(k)[j], 2e-3 * Math.max(1, Math.abs(numeric)),
            c + ": dL/d row(" + k + ")[" + j + "]");
      }
    }
  }

  @Test
  void badWeights_areRefusedWithTheirPosition() {
    ProbeTable t = table();
    SameDiff sd = graph(t, Combiner.MEAN, true);
    double[][] negative = {{1, -1, 0, 0}, {1, 1, 1, 1}, {0, 0, 0, 0}};
    RuntimeException e = assertThrows(RuntimeException.class, () -> sd.output(Map.of("keys",
        Strings.matrix(KEYS), "weights", Nd4j.createFromArray(negative)), "bag"));
    assertTrue(messages(e).contains("example 0 has weights summing to 0.0; a MEAN bag needs a"
        + " positive sum"), messages(e));
    double[][] nan = {{1, Double.NaN, 0, 0}, {1, 1, 1, 1}, {0, 0, 0, 0}};
    e = assertThrows(RuntimeException.class, () -> sd.output(Map.of("keys",
        Strings.matrix(KEYS), "weights", Nd4j.createFromArray(nan)), "bag"));
    assertTrue(messages(e).contains("weight of example 0 position 1 is NaN"), messages(e));
  }

  private static String messages(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (Throwable x = e; x != null; x = x.getCause()) {
      b.append(x.getMessage()).append(" | ");
    }
    return b.toString();
  }
}
