package dev.dynembed.layers;

import dev.dynembed.ops.Combiner;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.SamplerKind;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

class TrainerTest {
  static final int B = 16;
  static final int S = 3;
  static final int D = 8;
  static final String[] VOCAB = IntStream.range(0, 60).mapToObj(i -> "w" + i)
      .toArray(String[]::new);

  @TempDir Path dir;

  /** Bag of 3 context words -> hidden layer -> negative-sampling loss against a target word. */
  static final class Model {
    final SameDiff sd = SameDiff.create();
    final Trainer trainer;
    final EmbeddingTable in;
    final EmbeddingTable out;

    Model(TableClient tables, String prefix) {
      this(tables, prefix, false);
    }

    /** @param extraScalar also give the graph a second scalar output (a reported statistic) */
    Model(TableClient tables, String prefix, boolean extraScalar) {
      in = tables.createTable(TableConfigs.builder(prefix + "in", D)
          .setOptimizer(TableConfigs.adagrad(0.2f, 0f, 0f))
          .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 1)).build());
      out = tables.createTable(TableConfigs.builder(prefix + "out", D)
          .setOptimizer(TableConfigs.sgd(0.1f)).setInitializer(TableConfigs.zeros()).build());
      Nd4j.getRandom().setSeed(12);
      Layers layers = new Layers(sd);
      SDVariable ctx = sd.placeHolder("ctx", DataType.UTF8, -1, S);
      SDVariable ctxMask = sd.placeHolder("ctxMask", DataType.FLOAT, -1, S);
      SDVariable target = sd.placeHolder("target", DataType.UTF8, -1, 1);
      SDVariable targetMask = sd.placeHolder("targetMask", DataType.FLOAT, -1, 1);
      SDVariable bag = layers.embeddingBag("bag", ctx, ctxMask, in, Combiner.MEAN, true);
      SDVariable w = sd.var("w", Nd4j.rand(DataType.FLOAT, D, D).subi(0.5)
          .muli(0.5));
      SDVariable h = sd.math().tanh(bag.mmul(w));
      SDVariable loss = layers.negativeSamplingLoss("loss", h, target, targetMask, out, 5, 77);
      if (extraScalar) {
        sd.updateVariableNameAndReference(loss.mul(100.0).add(h.mean()), "reported");
      }
      trainer = new Trainer(sd, "loss", new Adam(0.01), List.of(in, out));
    }

    Map<String, INDArray> batch(Random rnd) {
      List<String> ctx = new ArrayList<>();
      List<String> target = new ArrayList<>();
      float[][] mask = new float[B][S];
      for (int b = 0; b < B; b++) {
        int center = rnd.nextInt(VOCAB.length - 3);
        for (int s = 0; s < S; s++) {
          ctx.add(VOCAB[center + s]);
          mask[b][s] = s < 2 || rnd.nextBoolean() ? 1f : 0f;
        }
        target.add(VOCAB[center + S]);
      }
      float[][] tmask = new float[B][1];
      for (float[] row : tmask) {
        row[0] = 1f;
      }
      return Map.of("ctx", KeyArrays.of(ctx, B, S), "ctxMask", Nd4j.createFromArray(mask),
          "target", KeyArrays.of(target, B, 1), "targetMask", Nd4j.createFromArray(tmask));
    }

    float[] state() {
      float[] a = in.find(VOCAB).rows();
      float[] b = out.find(VOCAB).rows();
      float[] c = sd.getVariable("w").getArr().dup('c').data().asFloat();
      float[] all = new float[a.length + b.length + c.length];
      System.arraycopy(a, 0, all, 0, a.length);
      System.arraycopy(b, 0, all, a.length, b.length);
      System.arraycopy(c, 0, all, a.length + b.length, c.length);
      return all;
    }
  }

  @Test
  void checkpoint_restoreAndReplay_reproducesTrainingExactly() {
    try (TableClient tables = TableClients.inProcess(dir)) {
      Model m = new Model(tables, "ck_");
      Random data = new Random(3);
      List<Map<String, INDArray>> batches = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        batches.add(m.batch(data));
      }
      List<Double> first = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        first.add(m.trainer.step(batches.get(i), 0f));
      }
      m.trainer.save(dir.resolve("ckpt"));
      List<Double> a = new ArrayList<>();
      for (int i = 5; i < 10; i++) {
        a.add(m.trainer.step(batches.get(i), 0f));
      }
      float[] stateA = m.state();
      assertEquals(10, m.trainer.step());

      m.trainer.restore(dir.resolve("ckpt"));
      assertEquals(5, m.trainer.step());
      List<Double> b = new ArrayList<>();
      for (int i = 5; i < 10; i++) {
        b.add(m.trainer.step(batches.get(i), 0f));
      }
      assertEquals(a, b);
      assertArrayEquals(stateA, m.state());
      assertTrue(first.get(0) > 0);
    }
  }

  /**
   * A warm start: a new trainer (its own graph and tables) starts from a checkpoint's dense values
   * and tables, with step 0 and a fresh Adam state; its first step equals the step of a trainer
   * restored from that checkpoint whose Adam state is reset, bit for bit.
   */
  @Test
  void initFrom_takesTheModel_butNotItsStepOrUpdaterState() {
    try (TableClient tables = TableClients.inProcess(dir.resolve("a"));
        TableClient other = TableClients.inProcess(dir.resolve("b"))) {
      Model m = new Model(tables, "w_");
      Random data = new Random(5);
      for (int i = 0; i < 6; i++) {
        m.trainer.step(m.batch(data), 0f);
      }
      m.trainer.save(dir.resolve("ckpt"));
      float[] saved = m.state();
      Model fresh = new Model(other, "w_");
      assertTrue(!java.util.Arrays.equals(saved, fresh.state()));
      fresh.trainer.initFrom(dir.resolve("ckpt"));
      assertEquals(0, fresh.trainer.step(), "a new run's step count");
      assertArrayEquals(saved, fresh.state(), "the model's dense values and table rows");
      // the next step from a fresh Adam: as a model built anew (fresh updater) restored there
      Map<String, INDArray> next = m.batch(data);
      double warm = fresh.trainer.step(next, 0f);
      try (TableClient third = TableClients.inProcess(dir.resolve("c"))) {
        Model again = new Model(third, "w_");
        again.trainer.initFrom(dir.resolve("ckpt"));
        assertEquals(warm, again.trainer.step(next, 0f));
        assertArrayEquals(fresh.state(), again.state());
      }
      m.trainer.restore(dir.resolve("ckpt"));
      assertEquals(6, m.trainer.step(), "restore, by contrast, brings the step back");
      m.trainer.step(next, 0f); // and Adam's moments: its dense step differs
      assertTrue(!java.util.Arrays.equals(fresh.state(), m.state()),
          "a restored Adam state moves w otherwise than a fresh one");
    }
  }

  @Test
  void training_manySteps_lossFalls() {
    try (TableClient tables = TableClients.inProcess(dir)) {
      Model m = new Model(tables, "fall_");
      Random data = new Random(4);
      List<Double> losses = new ArrayList<>();
      m.trainer.addListener((step, loss) -> losses.add(loss));
      for (int i = 0; i < 150; i++) {
        m.trainer.step(m.batch(data), 0f);
      }
      double early = losses.subList(0, 20).stream().mapToDouble(x -> x).average().orElseThrow();
      double late = losses.subList(130, 150).stream().mapToDouble(x -> x).average().orElseThrow();
      assertEquals(150, losses.size());
      assertTrue(late < 0.8 * early, "loss " + early + " -> " + late);
    }
  }

  @Test
  void sameDiffListeners_seeEveryIterationLossAndDenseUpdate() {
    try (TableClient tables = TableClients.inProcess(dir)) {
      Model m = new Model(tables, "lst_");
      List<Double> seen = new ArrayList<>();
      List<String> updated = new ArrayList<>();
      List<Integer> iterations = new ArrayList<>();
      m.trainer.setEpoch(3);
      m.trainer.addListener(new org.nd4j.autodiff.listeners.BaseListener() {
        @Override
        public boolean isActive(org.nd4j.autodiff.listeners.Operation op) {
          return op == org.nd4j.autodiff.listeners.Operation.TRAINING;
        }

        @Override
        public void iterationDone(SameDiff sd, org.nd4j.autodiff.listeners.At at,
            org.nd4j.linalg.dataset.api.MultiDataSet ds, org.nd4j.autodiff.listeners.Loss loss) {
          assertEquals(3, at.epoch());
          iterations.add(at.iteration());
          seen.add(loss.getLoss("loss"));
        }

        @Override
        public void preUpdate(SameDiff sd, org.nd4j.autodiff.listeners.At at,
            org.nd4j.autodiff.samediff.internal.Variable v, INDArray update) {
          updated.add(v.getName());
        }
      });
      Random data = new Random(8);
      List<Double> returned = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        returned.add(m.trainer.step(m.batch(data), 0f));
      }
      assertEquals(returned, seen);
      assertEquals(List.of(1, 2, 3, 4), iterations);
      assertEquals(List.of("w", "w", "w", "w"), updated);
    }
  }

  @Test
  void anotherScalarOutput_doesNotChangeTheGradient_onlyTheNamedLossIsTrained() {
    List<List<Double>> runs = new ArrayList<>();
    for (boolean extra : new boolean[] {false, true}) {
      try (TableClient tables = TableClients.inProcess(dir)) {
        Model m = new Model(tables, "x" + extra + "_", extra);
        Random data = new Random(6);
        List<Double> losses = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
          losses.add(m.trainer.step(m.batch(data), 0f));
        }
        runs.add(losses);
      }
    }
    assertEquals(runs.get(0), runs.get(1));
  }

  @Test
  void training_onTwoLoopbackShards_withSampledLoss_lossFalls() throws Exception {
    List<dev.dynembed.table.server.TableServer> servers = new ArrayList<>();
    List<String> endpoints = new ArrayList<>();
    try {
      for (int i = 0; i < 2; i++) {
        dev.dynembed.table.server.TableServer srv = new dev.dynembed.table.server.TableServer(
            new dev.dynembed.table.engine.ShardEngine(i, 2, dir), "127.0.0.1", 0, 4);
        servers.add(srv);
        endpoints.add("127.0.0.1:" + srv.port());
      }
      try (TableClient tables = TableClients.connect(endpoints)) {
        Model m = new Model(tables, "remote_");
        Random data = new Random(4);
        List<Double> losses = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
          losses.add(m.trainer.step(m.batch(data), 0f));
        }
        double early = losses.subList(0, 20).stream().mapToDouble(x -> x).average().orElseThrow();
        double late = losses.subList(130, 150).stream().mapToDouble(x -> x).average()
            .orElseThrow();
        assertTrue(late < 0.8 * early, "loss " + early + " -> " + late);
        for (dev.dynembed.table.server.TableServer srv : servers) { // both shards hold rows
          assertTrue(srv.engine().get("remote_in").size() > 0);
          assertTrue(srv.engine().get("remote_out").size() > 0);
        }
      }
    } finally {
      servers.forEach(dev.dynembed.table.server.TableServer::close);
    }
  }

  @Test
  void twoGraphs_sameTable_shareRows() {
    try (TableClient tables = TableClients.inProcess(dir)) {
      EmbeddingTable shared = tables.createTable(TableConfigs.builder("shared", 2)
          .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
      SameDiff taskA = SameDiff.create();
      SDVariable ka = taskA.placeHolder("k", DataType.UTF8, -1);
      new DynEmbed(taskA).dynamicEmbeddingLookup("rows", ka, shared, true).sum().rename("loss");
      Trainer ta = new Trainer(taskA, "loss", new Adam(0.01), List.of(shared));
      SameDiff taskB = SameDiff.create();
      SDVariable kb = taskB.placeHolder("k", DataType.UTF8, -1);
      new DynEmbed(taskB).dynamicEmbeddingLookup("rows", kb, shared, false);
      ta.step(Map.of("k", Nd4j.create("x")), 0f); // d(sum)/d(row) = 1: row becomes -1
      INDArray seenByB = taskB.output(Map.of("k", Nd4j.create("x")), "rows").get("rows");
      assertArrayEquals(new float[] {-1f, -1f}, seenByB.data().asFloat());
    }
  }

  @Test
  void embeddingBag_sumAndMean_matchDirectComputation() {
    try (TableClient tables = TableClients.inProcess(dir)) {
      EmbeddingTable t = tables.createTable(TableConfigs.builder("bag", 2)
          .setInitializer(TableConfigs.uniform(-1f, 1f, 2)).build());
      float[] r = t.findOrInsert("a", "b", "c");
      for (Combiner c : Combiner.values()) {
        for (boolean onShards : new boolean[] {false, true}) {
          SameDiff sd = SameDiff.create();
          SDVariable k = sd.placeHolder("k", DataType.UTF8, -1, 3);
          SDVariable mask = sd.placeHolder("m", DataType.FLOAT, -1, 3);
          if (onShards) {
            new Layers(sd).embeddingBagOnShards("bag", k, mask, t, c, false);
          } else {
            new Layers(sd).embeddingBag("bag", k, mask, t, c, false);
          }
          INDArray out = sd.output(Map.of("k", KeyArrays.of(List.of("a", "b", "c", "c", "a", "a"),
              2, 3), "m", Nd4j.createFromArray(new float[][] {{1, 1, 0}, {0, 0, 0}})), "bag")
              .get("bag");
          float[] sum = {r[0] + r[2], r[1] + r[3]};
          float div = c == Combiner.MEAN ? 2f : c == Combiner.SQRTN ? (float) Math.sqrt(2) : 1f;
          assertEquals(sum[0] / div, out.getFloat(0, 0), 1e-6, c + " on shards " + onShards);
          assertEquals(sum[1] / div, out.getFloat(0, 1), 1e-6, c + " on shards " + onShards);
          assertEquals(0f, out.getFloat(1, 0)); // an example with no real keys
        }
      }
    }
  }
}
