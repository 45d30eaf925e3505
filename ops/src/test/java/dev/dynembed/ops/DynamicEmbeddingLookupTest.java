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
  void gathered_readsEachKeyOnce_sendsOneSummedGradientRowPerKey() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable emb = tables.createTable(TableConfigs.builder("gathered", 3)
          .setOptimizer(TableConfigs.sgd(0.5f))
          .setInitializer(TableConfigs.uniform(-1f, 1f, 3)).build());
      float[] before = emb.findOrInsert("a", "b", "c");
      SameDiff sd = SameDiff.create();
      SDVariable k = sd.placeHolder("keys", DataType.UTF8, -1);
      SDVariable idx = sd.placeHolder("idx", DataType.INT32, -1, 2);
      SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", k, idx, emb, true,
          DataType.FLOAT, true); // [2, 2, 3]
      SDVariable w = sd.var("w", Nd4j.createFromArray(new float[] {1f, 2f, 3f}));
      sd.setLossVariables(rows.mul(w).sum().rename("loss"));
      // positions read a, b / a, c
      Map<String, INDArray> ph = Map.of("keys", Nd4j.create("a", "b", "c"),
          "idx", Nd4j.createFromArray(new int[][] {{0, 1}, {0, 2}}));
      INDArray out = sd.output(ph, "rows").get("rows");
      assertArrayEquals(new long[] {2, 2, 3}, out.shape());
      int[] order = {0, 1, 0, 2};
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
          assertEquals(before[order[i] * 3 + j], out.getFloat(i / 2, i % 2, j));
        }
      }
      long updates = emb.describe().getCounters().getUpdates();
      sd.calculateGradients(ph, "w", DynEmbed.handleName(sd, emb));
      // one gradient row per key: a's two uses summed (2 w), b and c once (w)
      assertEquals(updates + 3, emb.describe().getCounters().getUpdates());
      float[] after = emb.find("a", "b", "c").rows();
      float[] uses = {2, 1, 1};
      for (int key = 0; key < 3; key++) {
        for (int j = 0; j < 3; j++) {
          assertEquals(before[key * 3 + j] - 0.5f * uses[key] * (j + 1), after[key * 3 + j],
              1e-5f);
        }
      }
      // an index past the keys is refused with a message naming it
      Map<String, INDArray> bad = Map.of("keys", Nd4j.create("a", "b", "c"),
          "idx", Nd4j.createFromArray(new int[][] {{0, 3}}));
      Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class,
          () -> sd.output(bad, "rows"));
      Throwable root = e;
      while (root.getCause() != null && !root.getMessage().contains("index")) {
        root = root.getCause();
      }
      org.junit.jupiter.api.Assertions.assertTrue(
          root.getMessage().contains("index 1 is 3 but there are 3 keys"), root.getMessage());
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
      Map<String, INDArray> g = sd.calculateGradients(ph, DynEmbed.handleName(sd, emb));
      assertEquals(0.0, g.get(DynEmbed.handleName(sd, emb)).getDouble(0));
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
