package dev.dynembed.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

/**
 * The SameDiff side of a growing dimension (docs/design/0025): a classifier trained at dim 4,
 * its table grown to 6 ({@code TableClient.growTable}) and its graph built again at the new
 * width with the dense weights widened beside it (zero rows for the new columns). At the moment
 * of growth the model computes exactly what it did (the new columns meet zero weights), and it
 * trains on from there, the new columns included.
 */
class GrowingModelTest {
  private static final int CLASSES = 3;
  private static final int LEN = 3;
  private static final String[] VOCAB = new String[24];

  static {
    for (int i = 0; i < VOCAB.length; i++) {
      VOCAB[i] = (i % 3 == 0 ? "мир" : "w") + i;
    }
  }

  private static List<Map<String, INDArray>> batches(int n, long seed) {
    Random r = new Random(seed);
    List<Map<String, INDArray>> out = new ArrayList<>();
    for (int s = 0; s < n; s++) {
      int b = 8;
      String[] k = new String[b * LEN];
      float[][] y = new float[b][CLASSES];
      for (int i = 0; i < b; i++) {
        int c = r.nextInt(CLASSES);
        y[i][c] = 1f;
        for (int j = 0; j < LEN; j++) {
          k[i * LEN + j] = VOCAB[c * 8 + r.nextInt(8)];
        }
      }
      out.add(Map.of("keys", KeyArrays.of(k).reshape(b, LEN), "label", Nd4j.createFromArray(y)));
    }
    return out;
  }

  private static SameDiff graph(EmbeddingTable t, INDArray w) {
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1, LEN);
    SDVariable label = sd.placeHolder("label", DataType.FLOAT, -1, CLASSES);
    SDVariable rows = layers.ops().dynamicEmbeddingLookup("rows", keys, t, true);
    layers.softmaxLoss("loss", rows.mean(1).mmul(sd.var("w", w)), label);
    return sd;
  }

  private static double meanLoss(SameDiff sd, List<Map<String, INDArray>> data) {
    double sum = 0;
    for (Map<String, INDArray> feeds : data) {
      sum += sd.output(feeds, "loss").get("loss").sumNumber().doubleValue();
    }
    return sum / data.size();
  }

  @Test
  void aModelGrownMidway_computesWhatItDid_thenTrainsOnAtTheNewWidth() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable t = tables.createTable(TableConfigs.builder("grow", 4)
          .setOptimizer(TableConfigs.adagrad(0.3f, 0.1f, 1e-8f))
          .setInitializer(TableConfigs.normal(0f, 0.1f, 5)).build());
      t.findOrInsert(VOCAB);
      List<Map<String, INDArray>> eval = batches(4, 99);
      SameDiff narrow = graph(t, Nd4j.linspace(-0.5, 0.5, 4 * CLASSES, DataType.FLOAT)
          .reshape(4, CLASSES));
      Trainer before = new Trainer(narrow, "loss", new Adam(0.01), List.of(t));
      for (Map<String, INDArray> feeds : batches(20, 1)) {
        before.step(feeds, 0f);
      }
      before.flush();
      double atGrowth = meanLoss(narrow, eval);

      EmbeddingTable wide = tables.growTable("grow", 6);
      INDArray w = narrow.getVariable("w").getArr();
      INDArray widened = Nd4j.vstack(w, Nd4j.zeros(DataType.FLOAT, 2, CLASSES));
      SameDiff grown = graph(wide, widened);
      assertEquals(atGrowth, meanLoss(grown, eval), 1e-6, "the grown model computes the same");

      Trainer after = new Trainer(grown, "loss", new Adam(0.01), List.of(wide));
      for (Map<String, INDArray> feeds : batches(40, 2)) {
        after.step(feeds, 0f);
      }
      after.flush();
      double trained = meanLoss(grown, eval);
      assertTrue(trained < atGrowth - 0.02, "trains on: " + atGrowth + " -> " + trained);
      INDArray newWeights = grown.getVariable("w").getArr().get(
          org.nd4j.linalg.indexing.NDArrayIndex.interval(4, 6),
          org.nd4j.linalg.indexing.NDArrayIndex.all());
      assertTrue(newWeights.norm2Number().doubleValue() > 0, "the new columns are used");
    }
  }
}
