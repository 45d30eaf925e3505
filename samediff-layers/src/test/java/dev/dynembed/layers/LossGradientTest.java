package dev.dynembed.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.GraphTables;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.SamplerKind;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The losses' gradients w.r.t. the activations agree with finite differences, batch averaging
 * included. (A loss built on ND4J M2.1's loss ops would fail: their backward ignores any scaling
 * applied after them.)
 */
class LossGradientTest {
  @ParameterizedTest
  @ValueSource(strings = {"negativeSampling", "sampledSoftmax"})
  void lossGradient_matchesCentralDifferences(String loss) {
    int b = 6;
    int d = 4;
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable out = tables.createTable(TableConfigs.builder("out_" + loss, d)
          .setInitializer(TableConfigs.normal(0f, 0.5f, 3)).build());
      // large counts: the few occurrences each forward pass adds stay far below the 1% that
      // rebuilds the sampler snapshot, so draws and logQ terms are identical across evaluations
      String[] vocab = {"a", "b", "c", "d", "e", "f", "g", "x"};
      String[] many = new String[80_000];
      for (int i = 0; i < many.length; i++) {
        many[i] = vocab[i % vocab.length];
      }
      out.findOrInsert(many);
      SameDiff sd = SameDiff.create();
      Nd4j.getRandom().setSeed(5);
      SDVariable act = sd.var("act", Nd4j.rand(DataType.DOUBLE, b, d).subi(0.5).muli(2));
      SDVariable pos = sd.placeHolder("pos", DataType.UTF8, b, 2);
      SDVariable mask = sd.placeHolder("mask", DataType.DOUBLE, b, 2);
      Layers layers = new Layers(sd);
      if (loss.equals("negativeSampling")) {
        layers.negativeSamplingLoss("loss", act, pos, mask, out, 3, 1);
      } else {
        layers.sampledSoftmaxLoss("loss", act, pos, mask, out, 3, 1);
      }
      sd.setLossVariables("loss");
      Map<String, INDArray> ph = Map.of(
          "pos", KeyArrays.of(List.of("a", "b", "c", "a", "d", "x", "e", "f", "g", "a", "b", "b"),
              b, 2),
          "mask", Nd4j.createFromArray(new double[][] {{1, 1}, {1, 1}, {1, 0}, {1, 1}, {1, 1},
              {1, 0}}));
      // the same draws every call; (almost) no row change
      GraphTables.of(sd).setDetachedSettings(1e-12f, 1, 0, true);
      INDArray g = sd.calculateGradients(ph, "act", DynEmbed.handleName(sd, out)).get("act").dup();
      double eps = 1e-4;
      INDArray a = act.getArr();
      for (int e = 0; e < b; e++) {
        for (int j = 0; j < d; j++) {
          double orig = a.getDouble(e, j);
          a.putScalar(new long[] {e, j}, orig + eps);
          double up = sd.output(ph, "loss").get("loss").getDouble(0);
          a.putScalar(new long[] {e, j}, orig - eps);
          double down = sd.output(ph, "loss").get("loss").getDouble(0);
          a.putScalar(new long[] {e, j}, orig);
          assertEquals((up - down) / (2 * eps), g.getDouble(e, j), 1e-6,
              loss + " dL/dact " + e + "," + j);
        }
      }
    }
  }
}
