package dev.dynembed.table.redis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Redis backend against a real {@code redis-server} (one node, and a 3-master Cluster): the
 * same calls give the same rows, slots, probabilities, hits and checkpoints as the in-process
 * table, since the optimizer, the initializer, the samplers and the checkpoint codec are the
 * engine's.
 */
@Tag("redis")
class RedisTableTest {
  private static LocalRedis redis;
  private static int tableSeq;

  @BeforeAll
  static void start() {
    redis = LocalRedis.single();
  }

  @AfterAll
  static void stop() {
    if (redis != null) {
      redis.close();
    }
  }

  private static String fresh(String prefix) {
    return prefix + (tableSeq++);
  }

  private static String[] keys(int n, String prefix) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = prefix + i + (i % 5 == 0 ? "é" : "");
    }
    return k;
  }

  private static float[] gradients(int n, int dim, long seed) {
    Random r = new Random(seed);
    float[] g = new float[n * dim];
    for (int i = 0; i < g.length; i++) {
      g[i] = (float) r.nextGaussian();
    }
    return g;
  }

  /** Trains both tables the same way: first sight, two gradient steps, a repeat key. */
  private static void trainBoth(EmbeddingTable a, EmbeddingTable b, String[] keys) {
    assertArrayEquals(a.findOrInsert(keys), b.findOrInsert(keys), "first-sight rows");
    for (int step = 1; step <= 3; step++) {
      float[] g = gradients(keys.length, a.dim(), step);
      assertEquals(a.applyGradients(keys, g, 0f, step), b.applyGradients(keys, g, 0f, step));
    }
  }

  @Test
  void rowsSlotsAndUpdates_equalTheInProcessTable_forEveryOptimizer() {
    for (var opt : List.of(TableConfigs.sgd(0.1f), TableConfigs.adagrad(0.2f, 0.1f, 1e-7f),
        TableConfigs.adam(0.01f, 0.9f, 0.999f, 1e-8f))) {
      TableConfig cfg = TableConfigs.builder(fresh("opt"), 8).setOptimizer(opt)
          .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 7)).build();
      try (TableClient local = TableClients.inProcess();
          TableClient remote = RedisTables.connect(redis.uri())) {
        EmbeddingTable a = local.createTable(cfg);
        EmbeddingTable b = remote.createTable(cfg);
        String[] k = keys(300, "k");
        trainBoth(a, b, k);
        assertArrayEquals(a.find(k).rows(), b.find(k).rows(), opt.getKind() + " rows");
        // slots and update counts, through a scan of each
        Map<String, float[]> la = new HashMap<>();
        a.scan(100, p -> {
          for (int i = 0; i < p.keys().length; i++) {
            la.put(p.keys()[i], java.util.Arrays.copyOfRange(p.rows(), i * 8, i * 8 + 8));
          }
        });
        int[] seen = {0};
        b.scan(64, p -> {
          for (int i = 0; i < p.keys().length; i++) {
            assertArrayEquals(la.get(p.keys()[i]),
                java.util.Arrays.copyOfRange(p.rows(), i * 8, i * 8 + 8));
            assertEquals(1, p.frequencies()[i], "counted once by findOrInsert");
            assertEquals(3, p.steps()[i]);
            seen[0]++;
          }
        });
        assertEquals(300, seen[0]);
        var ca = a.describe().getCounters();
        var cb = b.describe().getCounters();
        assertEquals(300, cb.getKeys());
        assertEquals(ca.getTotalFrequency(), cb.getTotalFrequency(), "total count (subsampling)");
        assertEquals(900, cb.getUpdates());
      }
    }
  }

  @Test
  void admission_keysBelowMinCount_readAsZeros_andTheirGradientsAreDropped() {
    TableConfig cfg = TableConfigs.builder(fresh("adm"), 4).setMinCount(3)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.uniform(1f, 2f, 3))
        .build();
    try (TableClient c = RedisTables.connect(redis.uri())) {
      EmbeddingTable t = c.createTable(cfg);
      float[] r = t.findOrInsert("rare", "rare");
      assertArrayEquals(new float[8], r, "counted twice: not admitted, zero rows");
      assertEquals(0, t.applyGradients(new String[] {"rare"}, new float[] {1, 1, 1, 1}, 0f, 1));
      assertFalse(t.find("rare").found()[0]);
      var counts = t.count(new String[] {"rare"}, true);
      assertTrue(counts.admitted()[0], "admitted at the third count");
      assertEquals(3, counts.frequencies()[0]);
      float[] row = t.find("rare").rows();
      assertTrue(row[0] >= 1f && row[0] < 2f, "the initializer's row");
    }
  }

  @Test
  void badInput_isRefused_namingTheProblem_andChangesNothing() {
    TableConfig cfg = TableConfigs.builder(fresh("bad"), 4).build();
    try (TableClient c = RedisTables.connect(redis.uri())) {
      EmbeddingTable t = c.createTable(cfg);
      float[] before = t.findOrInsert("a", "b");
      TableException e = assertThrows(TableException.class, () -> t.applyGradients(
          new String[] {"a", "b"}, new float[] {1, 1, 1, 1, 1, Float.NaN, 1, 1}, 0f, 1));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().contains("NaN"), e.getMessage());
      assertArrayEquals(before, t.find("a", "b").rows(), "nothing applied");
      TableException exists = assertThrows(TableException.class,
          () -> c.createTable(cfg.toBuilder().setDim(5).build()));
      assertEquals(ErrorCode.ALREADY_EXISTS, exists.code());
      assertEquals(4, c.createTable(cfg).dim(), "the same config opens it");
      TableException sketch = assertThrows(TableException.class, () -> c.createTable(
          TableConfigs.builder(fresh("sk"), 4).setMinCount(2).setAdmissionSketchKib(64).build()));
      assertTrue(sketch.getMessage().contains("admission_sketch_kib"), sketch.getMessage());
      TableException evict = assertThrows(TableException.class,
          () -> t.evict(0, 0, 1, dev.dynembed.table.v1.EvictionPolicy.LFU));
      assertTrue(evict.getMessage().contains("maxmemory"), evict.getMessage());
    }
    IllegalArgumentException uri = assertThrows(IllegalArgumentException.class,
        () -> RedisTables.connect("redis://127.0.0.1:1,127.0.0.1:2"));
    assertTrue(uri.getMessage().contains("redis-cluster://"), uri.getMessage());
    TableException down = assertThrows(TableException.class, () -> {
      try (TableClient c = RedisTables.connect("redis://127.0.0.1:1")) {
        c.createTable(cfg);
      }
    });
    assertEquals(ErrorCode.UNAVAILABLE, down.code());
    assertTrue(down.getMessage().contains("redis://127.0.0.1:1"), down.getMessage());
  }

  @Test
  void sampling_drawsByFrequency_withTheInProcessProbabilities_andFreshRows() {
    TableConfig cfg = TableConfigs.builder(fresh("smp"), 4).build();
    try (TableClient local = TableClients.inProcess();
        TableClient remote = RedisTables.connect(redis.uri() + "?sampler-refresh-ms=0")) {
      EmbeddingTable a = local.createTable(cfg);
      EmbeddingTable b = remote.createTable(cfg);
      List<String> stream = new ArrayList<>();
      for (int i = 0; i < 50; i++) {
        for (int n = 0; n <= i; n++) {
          stream.add("w" + i); // w_i occurs i + 1 times
        }
      }
      String[] s = stream.toArray(new String[0]);
      a.findOrInsert(s);
      b.findOrInsert(s);
      String[] pos = {"w0", "w49", "absent"};
      SampledRows sa = a.sampleDistinct(pos, 20000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 5);
      SampledRows sb = b.sampleDistinct(pos, 20000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 5);
      for (int i = 0; i < pos.length; i++) {
        assertEquals(sa.positiveProbability()[i], sb.positiveProbability()[i], 1e-12, pos[i]);
      }
      double p49 = Math.pow(50, 0.75);
      double sum = 0;
      for (int i = 1; i <= 50; i++) {
        sum += Math.pow(i, 0.75);
      }
      assertEquals(p49 / sum, sb.positiveProbability()[1], 1e-9);
      int[] drawn = new int[sb.keys().length];
      for (int d : sb.drawIndex()) {
        drawn[d]++;
      }
      for (int i = 0; i < sb.keys().length; i++) {
        if (sb.keys()[i].equals("w49")) {
          assertEquals(20000 * p49 / sum, drawn[i], 5 * Math.sqrt(20000 * p49 / sum));
        }
      }
      // the drawn rows are the rows as they are now
      b.applyGradients(sb.keys(), gradients(sb.keys().length, 4, 1), 0f, 1);
      SampledRows again = b.sampleDistinct(new String[0], 100, SamplerKind.UNIGRAM_SAMPLER, 0f, 9);
      assertArrayEquals(b.find(again.keys()).rows(), again.rows());
    }
  }

  @Test
  void topK_equalsTheInProcessHits() {
    TableConfig cfg = TableConfigs.builder(fresh("topk"), 6)
        .setInitializer(TableConfigs.normal(0f, 1f, 4)).build();
    try (TableClient local = TableClients.inProcess();
        TableClient remote = RedisTables.connect(redis.uri())) {
      EmbeddingTable a = local.createTable(cfg);
      EmbeddingTable b = remote.createTable(cfg);
      String[] k = keys(500, "n");
      a.findOrInsert(k);
      b.findOrInsert(k);
      float[] q = a.find("n1", "n2").rows();
      for (TopKOptions o : List.of(TopKOptions.DOT, TopKOptions.COSINE.excluding(List.of("n1")))) {
        TopKResult ha = a.topK(q, 2, 10, o);
        TopKResult hb = b.topK(q, 2, 10, o);
        for (int i = 0; i < 2; i++) {
          assertArrayEquals(ha.keys()[i], hb.keys()[i]);
          assertArrayEquals(ha.scores()[i], hb.scores()[i]);
        }
      }
    }
  }

  @Test
  void checkpoints_moveBetweenRedisAndShards_withPendingCounts(@TempDir Path dir) {
    TableConfig cfg = TableConfigs.builder(fresh("ckpt"), 4).setMinCount(3)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-7f)).build();
    String[] k = keys(200, "c");
    try (TableClient c = RedisTables.connect(redis.uri())) {
      EmbeddingTable t = c.createTable(cfg);
      t.count(k, true);
      t.count(k, true);
      t.findOrInsert(k); // admitted now
      t.applyGradients(k, gradients(k.length, 4, 3), 0f, 7);
      t.count(new String[] {"pending", "pending"}, true); // 2 of 3
      t.save(dir.resolve("a"), 7);
      // into an in-process table: the same records
      EmbeddingTable back = TableClients.loadCheckpoint(dir.resolve("a"), cfg.getName());
      assertArrayEquals(t.find(k).rows(), back.find(k).rows());
      assertArrayEquals(t.count(k, false).frequencies(), back.count(k, false).frequencies());
      // disturb Redis, restore: rows, counts and the pending count come back
      float[] saved = t.find(k).rows();
      t.applyGradients(k, gradients(k.length, 4, 4), 0f, 8);
      t.findOrInsert("extra", "extra", "extra");
      assertEquals(200, t.restore(dir.resolve("a")));
      assertArrayEquals(saved, t.find(k).rows());
      assertFalse(t.find("extra").found()[0], "a key added after the checkpoint is gone");
      var counters = t.describe().getCounters();
      assertEquals(200, counters.getKeys());
      assertEquals(3 * 200 + 2, counters.getTotalFrequency(), "the counts of the checkpoint");
      assertEquals(1, counters.getPendingKeys());
      assertTrue(t.count(new String[] {"pending"}, true).admitted()[0],
          "the pending count survived: one more count admits it");
      // an in-process checkpoint restores into Redis too
      back.applyGradients(k, gradients(k.length, 4, 5), 0f, 9);
      back.save(dir.resolve("b"), 9);
      t.restore(dir.resolve("b"));
      assertArrayEquals(back.find(k).rows(), t.find(k).rows());
    }
  }

  @Test
  void cluster_spreadsRows_overItsNodes_andBehavesAsOneNode() {
    TableConfig cfg = TableConfigs.builder(fresh("cl"), 8)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-7f)).build();
    try (LocalRedis cluster = LocalRedis.cluster(3);
        TableClient local = TableClients.inProcess();
        TableClient remote = RedisTables.connect(cluster.uri())) {
      EmbeddingTable a = local.createTable(cfg);
      EmbeddingTable b = remote.createTable(cfg);
      String[] k = keys(2000, "x");
      trainBoth(a, b, k);
      assertArrayEquals(a.find(k).rows(), b.find(k).rows());
      assertEquals(2000, b.describe().getCounters().getKeys());
      for (int port : cluster.ports()) {
        try (var node = new redis.clients.jedis.Jedis("127.0.0.1", port)) {
          assertTrue(node.dbSize() > 300, "node " + port + " holds " + node.dbSize() + " keys");
        }
      }
      float[] q = a.find("x1").rows();
      assertArrayEquals(a.topK(q, 1, 5, TopKOptions.DOT).keys()[0],
          b.topK(q, 1, 5, TopKOptions.DOT).keys()[0]);
    }
  }
}
