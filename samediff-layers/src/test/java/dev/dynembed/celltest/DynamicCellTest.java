package dev.dynembed.celltest;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.layers.Layers;
import dev.dynembed.layers.Trainer;
import dev.dynembed.ops.Cells;
import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

/**
 * The public cell API used from outside the project's packages (docs/design/0025): the gradient
 * cell trains exactly as {@code dynamicEmbeddingLookup}; a cell with its own forward and backward
 * and a table whose rule is a reaction defined here (found by the ServiceLoader on this class
 * path) train in process and on 2 loopback shards to the rows a direct computation gives.
 */
class DynamicCellTest {
  @TempDir Path dir;

  private static final int DIM = 6;
  private static final String[] KEYS = {"a", "b", "c", "d", "e", "f", "g", "h", "мир", "k", "l",
      "m"};

  // ------------------------------------------------------------ the gradient cell

  private record Run(double[] losses, float[] rows, float[] w) {}

  private static Run classify(TableClient tables, String table, boolean cell) {
    int b = 8;
    int len = 3;
    int classes = 3;
    EmbeddingTable t = tables.createTable(TableConfigs.builder(table, DIM)
        .setOptimizer(TableConfigs.adagrad(0.3f, 0.1f, 1e-8f))
        .setInitializer(TableConfigs.normal(0f, 0.1f, 9)).build());
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1, len);
    SDVariable label = sd.placeHolder("label", DataType.FLOAT, -1, classes);
    SDVariable rows = cell ? layers.ops().cell("rows", Cells.gradient(), keys, t, true)
        : layers.ops().dynamicEmbeddingLookup("rows", keys, t, true);
    SDVariable w = sd.var("w", Nd4j.linspace(-0.5, 0.5, DIM * classes, DataType.FLOAT)
        .reshape(DIM, classes));
    layers.softmaxLoss("loss", rows.mean(1).mmul(w), label);
    Trainer trainer = new Trainer(sd, "loss", new Adam(0.01), List.of(t));
    Random r = new Random(5);
    double[] losses = new double[30];
    for (int s = 0; s < losses.length; s++) {
      String[] k = new String[b * len];
      float[][] y = new float[b][classes];
      for (int i = 0; i < b; i++) {
        int c = r.nextInt(classes);
        y[i][c] = 1f;
        for (int j = 0; j < len; j++) {
          k[i * len + j] = KEYS[(c * 4 + r.nextInt(6)) % KEYS.length];
        }
      }
      losses[s] = trainer.step(Map.of("keys", KeyArrays.of(k).reshape(b, len), "label",
          Nd4j.createFromArray(y)), 0f);
    }
    trainer.flush();
    return new Run(losses, t.find(KEYS).rows(), sd.getVariable("w").getArr().ravel().toFloatVector());
  }

  @Test
  void theGradientCell_trainsBitForBitAsDynamicEmbeddingLookup() {
    try (TableClient tables = TableClients.inProcess()) {
      Run lookup = classify(tables, "by_lookup", false);
      Run cell = classify(tables, "by_cell", true);
      assertArrayEquals(lookup.losses(), cell.losses(), 0.0);
      assertArrayEquals(bits(lookup.rows()), bits(cell.rows()));
      assertArrayEquals(bits(lookup.w()), bits(cell.w()));
      assertTrue(lookup.losses()[29] < lookup.losses()[0] - 0.05, "the model learns: "
          + lookup.losses()[0] + " -> " + lookup.losses()[29]);
    }
  }

  private static int[] bits(float[] v) {
    int[] b = new int[v.length];
    for (int i = 0; i < v.length; i++) {
      b[i] = Float.floatToIntBits(v[i]);
    }
    return b;
  }

  // ------------------------------------------------------------ a custom cell and reaction

  private static final float LR = 0.05f;
  private static final float BOUND = 0.3f;

  private static TableConfig clampedTable(String name) {
    return TableConfigs.builder(name, DIM)
        .setOptimizer(TableConfigs.rule("test_clamped_step", LR, Map.of("bound", (double) BOUND)))
        .setInitializer(TableConfigs.uniform(-0.05f, 0.05f, 3)).build();
  }

  /** Trains out = cell(keys, x) * a, loss = sum (out - y)^2, and follows it directly. */
  private static void trainsAsComputedDirectly(TableClient tables) {
    EmbeddingTable t = tables.createTable(clampedTable("clamped"));
    assertEquals(Map.of("bound", (double) BOUND), t.config().getOptimizer().getParamsMap());
    Map<String, float[]> direct = new HashMap<>();
    float[] initial = t.findOrInsert(KEYS);
    for (int i = 0; i < KEYS.length; i++) {
      direct.put(KEYS[i], java.util.Arrays.copyOfRange(initial, i * DIM, (i + 1) * DIM));
    }
    SameDiff sd = SameDiff.create();
    DynEmbed ops = new DynEmbed(sd);
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1);
    SDVariable x = sd.placeHolder("x", DataType.FLOAT, -1, DIM);
    SDVariable y = sd.placeHolder("y", DataType.FLOAT, -1);
    SDVariable a = sd.var("a", Nd4j.scalar(1.5f));
    SDVariable d = ops.cell("dot", new SignedDotCell(), keys, t, true, x).mul(a).sub(y);
    d.mul(d).sum("loss");
    Trainer trainer = new Trainer(sd, "loss", new Adam(0.01), List.of(t));
    Random r = new Random(11);
    int n = 10;
    int clamped = 0;
    for (int s = 0; s < 40; s++) {
      String[] k = new String[n];
      float[] xs = new float[n * DIM];
      float[] ys = new float[n];
      for (int i = 0; i < n; i++) {
        k[i] = KEYS[r.nextInt(KEYS.length)]; // repeats: the table sums a key's feedback
        for (int j = 0; j < DIM; j++) {
          xs[i * DIM + j] = (float) r.nextGaussian();
        }
        ys[i] = (float) r.nextGaussian();
      }
      float av = sd.getVariable("a").getArr().getFloat(0);
      Map<String, float[]> summed = new java.util.LinkedHashMap<>();
      for (int i = 0; i < n; i++) {
        float[] row = direct.get(k[i]);
        float out = 0f;
        for (int j = 0; j < DIM; j++) {
          out += row[j] * xs[i * DIM + j];
        }
        float sign = Math.signum(2f * (out * av - ys[i]) * av);
        float[] f = summed.computeIfAbsent(k[i], key -> new float[DIM]);
        for (int j = 0; j < DIM; j++) {
          f[j] += sign * xs[i * DIM + j];
        }
      }
      for (Map.Entry<String, float[]> e : summed.entrySet()) {
        float[] row = direct.get(e.getKey());
        for (int j = 0; j < DIM; j++) {
          float v = row[j] - LR * e.getValue()[j];
          clamped += Math.abs(v) > BOUND ? 1 : 0;
          row[j] = ClampedStep.clamp(v, BOUND);
        }
      }
      trainer.step(Map.of("keys", KeyArrays.of(k), "x", Nd4j.create(xs, n, DIM), "y",
          Nd4j.createFromArray(ys)), 0f);
    }
    trainer.flush();
    assertTrue(clamped > 20, "the rule's clamp is exercised: " + clamped);
    float[] rows = t.find(KEYS).rows();
    for (int i = 0; i < KEYS.length; i++) {
      assertArrayEquals(direct.get(KEYS[i]), java.util.Arrays.copyOfRange(rows, i * DIM,
          (i + 1) * DIM), 1e-5f, "row of " + KEYS[i]);
    }
  }

  @Test
  void aCustomCellAndReaction_inProcess_trainAsComputedDirectly() {
    try (TableClient tables = TableClients.inProcess()) {
      trainsAsComputedDirectly(tables);
    }
  }

  @Test
  void aCustomCellAndReaction_onTwoLoopbackShards_trainAsComputedDirectly() throws Exception {
    List<TableServer> servers = new ArrayList<>();
    try {
      List<String> endpoints = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        TableServer srv = new TableServer(new ShardEngine(i, 2, dir.resolve("s" + i)),
            "127.0.0.1", 0, 2);
        servers.add(srv);
        endpoints.add("127.0.0.1:" + srv.port());
      }
      try (TableClient tables = TableClients.connect(endpoints)) {
        trainsAsComputedDirectly(tables);
      }
    } finally {
      servers.forEach(TableServer::close);
    }
  }

  @Test
  void theCellsInputGets_theGradientItsBackwardGives() {
    try (TableClient tables = TableClients.inProcess()) {
      EmbeddingTable t = tables.createTable(clampedTable("grads"));
      SameDiff sd = SameDiff.create();
      DynEmbed ops = new DynEmbed(sd);
      SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1);
      SDVariable x = sd.var("x", Nd4j.linspace(-1, 1, 3 * DIM, DataType.FLOAT).reshape(3, DIM));
      ops.cell("dot", new SignedDotCell(), keys, t, false, x).mul(2f).sum("loss");
      sd.setLossVariables("loss");
      String[] k = {"a", "b", "a"};
      float[] rows = t.findOrInsert(k);
      INDArray gx = sd.calculateGradients(Map.of("keys", KeyArrays.of(k)), "x").get("x");
      float[] expected = new float[3 * DIM];
      for (int i = 0; i < expected.length; i++) {
        expected[i] = 2f * rows[i];
      }
      assertArrayEquals(expected, gx.ravel().toFloatVector(), 1e-6f);
      assertArrayEquals(rows, t.find(k).rows(), "inference sends no feedback");
    }
  }

  @Test
  void aTableWhoseRuleTheShardLacks_isRefusedByName() {
    try (TableClient tables = TableClients.inProcess()) {
      TableException e = assertThrows(TableException.class, () -> tables.createTable(
          TableConfigs.builder("x", DIM).setOptimizer(TableConfigs.rule("test_no_such_rule",
              0.1f, Map.of())).build()));
      assertTrue(e.getMessage().contains("optimizer rule 'test_no_such_rule' is not installed")
          && e.getMessage().contains("test_clamped_step"), e.getMessage());
      TableException p = assertThrows(TableException.class, () -> tables.createTable(
          TableConfigs.builder("x", DIM).setOptimizer(TableConfigs.rule("test_clamped_step",
              0.1f, Map.of("bound", -1.0))).build()));
      assertTrue(p.getMessage().contains("parameter 'bound' must be in (0.0, 1000000.0]"),
          p.getMessage());
    }
  }
}
