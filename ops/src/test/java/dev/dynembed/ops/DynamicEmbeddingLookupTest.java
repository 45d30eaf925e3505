package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

class DynamicEmbeddingLookupTest {
  @Test
  void forwardAndBackward_inSameDiffGraph_readRowsAndApplySgdToTable() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable emb = tables.createTable(TableConfigs.builder("spike", 3)
          .setOptimizer(TableConfigs.sgd(0.5f))
          .setInitializer(TableConfigs.uniform(-1f, 1f, 3)).build());
      String[] keys = {"a", "b", "a", "c"};
      float[] before = emb.findOrInsert(keys);

      SameDiff sd = SameDiff.create();
      SDVariable k = sd.placeHolder("keys", DataType.UTF8, -1);
      SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", k, emb, true); // [n, 3]
      SDVariable w = sd.var("w", Nd4j.createFromArray(new float[][] {{1f}, {2f}, {3f}})); // [3, 1]
      SDVariable loss = rows.mmul(w).sum().rename("loss"); // sum_i rows_i . w
      sd.setLossVariables(loss);

      Map<String, INDArray> ph = Map.of("keys", Nd4j.create(keys));
      INDArray out = sd.output(ph, "rows").get("rows");
      assertArrayEquals(new long[] {4, 3}, out.shape());
      assertArrayEquals(before, out.data().asFloat());

      Map<String, INDArray> g = sd.calculateGradients(ph, "w", "dynembed_handle_spike");
      // dL/dw = sum of the rows
      float[] colSums = new float[3];
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
          colSums[j] += before[i * 3 + j];
        }
      }
      assertArrayEquals(colSums, g.get("w").data().asFloat(), 1e-5f);
      // the table took one SGD step: dL/d(row of key) = w for each occurrence ("a" twice)
      float[] a = emb.find("a", "b", "c").rows();
      float[] wv = {1f, 2f, 3f};
      for (int j = 0; j < 3; j++) {
        assertEquals(before[j] - 0.5f * 2 * wv[j], a[j], 1e-5f);          // a: twice
        assertEquals(before[3 + j] - 0.5f * wv[j], a[3 + j], 1e-5f);      // b: once
        assertEquals(before[9 + j] - 0.5f * wv[j], a[6 + j], 1e-5f);      // c: once
      }
    }
  }

  @Test
  void inferenceMode_unknownKeysReadZeros_nothingCreatedOrUpdated() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable emb = tables.createTable(TableConfigs.builder("infer", 2)
          .setOptimizer(TableConfigs.sgd(1f)).build());
      float[] known = emb.findOrInsert("known");
      SameDiff sd = SameDiff.create();
      SDVariable k = sd.placeHolder("keys", DataType.UTF8, -1);
      SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", k, emb, false);
      SDVariable loss = rows.sum().rename("loss");
      sd.setLossVariables(loss);
      Map<String, INDArray> ph = Map.of("keys", Nd4j.create("known", "never-seen"));
      INDArray out = sd.output(ph, "rows").get("rows");
      assertArrayEquals(new float[] {known[0], known[1], 0f, 0f}, out.data().asFloat());
      Map<String, INDArray> g = sd.calculateGradients(ph, DynEmbed.handleName(emb));
      assertEquals(0.0, g.get(DynEmbed.handleName(emb)).getDouble(0));
      assertEquals(1, emb.describe().getCounters().getKeys());          // nothing created
      assertArrayEquals(known, emb.find("known").rows());               // nothing updated
      assertEquals(0, emb.describe().getCounters().getUpdates());
    }
  }

  @Test
  void keysOfWrongType_areRefusedWhenTheGraphIsBuilt() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable emb = tables.createTable(TableConfigs.builder("types", 2).build());
      SameDiff sd = SameDiff.create();
      SDVariable ints = sd.placeHolder("ids", DataType.INT, -1);
      IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
          IllegalArgumentException.class,
          () -> new DynEmbed(sd).dynamicEmbeddingLookup("rows", ints, emb, true));
      org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("keys must be UTF8"));
    }
  }
}
