package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The sharded gRPC table on real loopback servers behaves exactly like the in-process table. */
class ShardedTableTest {
  @TempDir Path dir;

  static TableConfig config(OptimizerConfig opt) {
    return TableConfigs.builder("emb", 16).setOptimizer(opt)
        .setInitializer(TableConfigs.normal(0f, 0.3f, 5)).build();
  }

  /** Zipf-ish batches: many duplicates within a batch, as word streams have. */
  static String[] batch(Random rnd, int n) {
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      int r = (int) Math.floor(Math.exp(rnd.nextDouble() * Math.log(5000)));
      keys[i] = (r % 7 == 0 ? "ключ-" : "key-") + r;
    }
    return keys;
  }

  static void train(EmbeddingTable t, long seed, int steps) {
    Random rnd = new Random(seed);
    for (int step = 1; step <= steps; step++) {
      String[] keys = batch(rnd, 300);
      float[] rows = t.findOrInsert(keys);
      float[] g = new float[rows.length];
      for (int i = 0; i < g.length; i++) {
        g[i] = 0.1f * rows[i] + (float) rnd.nextGaussian() * 0.01f;
      }
      t.applyGradients(keys, g, step % 2 == 0 ? 0.05f : 0f, step);
    }
  }

  static Stream<Arguments> shardsAndOptimizers() {
    return Stream.of(1, 2, 3).flatMap(n -> Stream.of(
        TableConfigs.sgd(0.1f), TableConfigs.adagrad(0.2f, 0f, 0f), TableConfigs.adam(0.01f, 0f, 0f, 0f))
        .map(o -> Arguments.of(n, o)));
  }

  @ParameterizedTest(name = "{0} shards, {1}")
  @MethodSource("shardsAndOptimizers")
  void training_onLoopbackShards_matchesInProcessExactly(int shards, OptimizerConfig opt)
      throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(shards, dir);
        TableClient remote = cluster.client();
        TableClient local = TableClients.inProcess(dir)) {
      EmbeddingTable r = remote.createTable(config(opt));
      EmbeddingTable l = local.createTable(config(opt));
      train(r, 7, 30);
      train(l, 7, 30);
      String[] probe = IntStream.range(0, 6000).mapToObj(i -> (i % 7 == 0 ? "ключ-" : "key-") + i)
          .toArray(String[]::new);
      FindResult fr = r.find(probe);
      FindResult fl = l.find(probe);
      assertArrayEquals(fl.found(), fr.found());
      assertArrayEquals(fl.rows(), fr.rows());
      assertEquals(l.describe().getCounters().getKeys(), r.describe().getCounters().getKeys());
      assertEquals(l.describe().getCounters().getTotalFrequency(),
          r.describe().getCounters().getTotalFrequency());
      // every key lives on the shard its hash names
      for (int s = 0; s < shards; s++) {
        for (String k : cluster.engine(s).get("emb").keys()) {
          assertEquals(s, KeyHashing.shardOf(k, shards));
        }
      }
    }
  }

  @Test
  void topK_acrossShards_matchesInProcess() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(3, dir);
        TableClient remote = cluster.client();
        TableClient local = TableClients.inProcess(dir)) {
      EmbeddingTable r = remote.createTable(config(TableConfigs.sgd(0.1f)));
      EmbeddingTable l = local.createTable(config(TableConfigs.sgd(0.1f)));
      train(r, 3, 10);
      train(l, 3, 10);
      float[] q = new float[2 * 16];
      Random rnd = new Random(2);
      for (int i = 0; i < q.length; i++) {
        q[i] = (float) rnd.nextGaussian();
      }
      for (TopKOptions opt : List.of(TopKOptions.DOT, TopKOptions.COSINE.excluding(List.of("key-1")),
          new TopKOptions(true, Metric.DOT, List.of()))) {
        float[] queries = opt.biasLastDim() ? java.util.Arrays.copyOf(q, 2 * 15) : q;
        TopKResult a = r.topK(queries, 2, 10, opt);
        TopKResult b = l.topK(queries, 2, 10, opt);
        for (int i = 0; i < 2; i++) {
          assertArrayEquals(b.keys()[i], a.keys()[i]);
          assertArrayEquals(b.scores()[i], a.scores()[i]);
          assertFalse(List.of(a.keys()[i]).contains("key-1") && !opt.exclude().isEmpty());
        }
      }
    }
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @org.junit.jupiter.params.provider.ValueSource(ints = {0, 2})
  void sampleDistinct_drawsWhatSampleDraws_onceEach_withRows(int shards) throws Exception {
    LoopbackCluster cluster = shards == 0 ? null : new LoopbackCluster(shards, dir);
    try (TableClient client = cluster == null ? TableClients.inProcess(dir) : cluster.client()) {
      EmbeddingTable t = client.createTable(config(TableConfigs.sgd(0.1f)));
      train(t, 5, 3);
      String[] positives = {"key-1", "key-2", "never-seen"};
      SampleResult plain = t.sample(positives, 3000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 42);
      SampledRows d = t.sampleDistinct(positives, 3000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 42);
      assertEquals(3000, d.drawIndex().length);
      assertEquals(d.keys().length, new java.util.HashSet<>(List.of(d.keys())).size(),
          "each drawn key once");
      assertTrue(d.keys().length < 3000, "unigram draws repeat frequent keys");
      for (int j = 0; j < 3000; j++) {
        assertEquals(plain.keys()[3 + j], d.keys()[d.drawIndex()[j]], "draw " + j);
        assertEquals(plain.probability()[3 + j], d.probability()[d.drawIndex()[j]]);
      }
      for (int i = 0; i < 3; i++) {
        assertEquals(plain.probability()[i], d.positiveProbability()[i]);
      }
      assertArrayEquals(t.find(d.keys()).rows(), d.rows());
    } finally {
      if (cluster != null) {
        cluster.close();
      }
    }
  }

  @Test
  void sample_overTwoShards_drawsAreInterleaved_notBlockedByShard() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient client = cluster.client()) {
      EmbeddingTable t = client.createTable(config(TableConfigs.sgd(0.1f)));
      String[] keys = IntStream.range(0, 200).mapToObj(i -> "k" + i).toArray(String[]::new);
      t.findOrInsert(keys);
      SampleResult r = t.sample(new String[0], 2000, SamplerKind.UNIFORM_SAMPLER, 0f, 9);
      // callers slice the draws (S per example): each half must hold both shards' keys
      for (int half = 0; half < 2; half++) {
        int fromShard0 = 0;
        for (int j = half * 1000; j < (half + 1) * 1000; j++) {
          fromShard0 += KeyHashing.shardOf(r.keys()[j], 2) == 0 ? 1 : 0;
        }
        int expected = (int) java.util.Arrays.stream(keys)
            .filter(k -> KeyHashing.shardOf(k, 2) == 0).count() * 1000 / 200;
        assertTrue(Math.abs(fromShard0 - expected) < 100,
            "half " + half + ": " + fromShard0 + " draws from shard 0, expected about " + expected);
      }
    }
  }

  @Test
  void sample_unigramOverTwoShards_followsGlobalDistribution() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient client = cluster.client()) {
      EmbeddingTable t = client.createTable(config(TableConfigs.sgd(0.1f)));
      Map<String, Integer> freq = new HashMap<>();
      for (int i = 0; i < 40; i++) {
        int f = 1 + i * i;
        String[] keys = new String[f];
        java.util.Arrays.fill(keys, "w" + i);
        t.findOrInsert(keys);
        freq.put("w" + i, f);
      }
      double total = freq.values().stream().mapToDouble(f -> Math.pow(f, 0.75)).sum();
      Map<String, Integer> counts = new HashMap<>();
      int draws = 0;
      for (int call = 0; call < 20; call++) {
        SampleResult s = t.sample(new String[] {"w39"}, 10_000, SamplerKind.UNIGRAM_SAMPLER, 0.75f,
            call);
        assertTrue(s.positive()[0]);
        assertEquals(Math.pow(freq.get("w39"), 0.75) / total, s.probability()[0], 1e-9);
        for (int i = 1; i < s.keys().length; i++) {
          counts.merge(s.keys()[i], 1, Integer::sum);
          double p = Math.pow(freq.get(s.keys()[i]), 0.75) / total;
          assertEquals(p, s.probability()[i], 1e-9, "probability of " + s.keys()[i]);
          draws++;
        }
      }
      for (Map.Entry<String, Integer> e : freq.entrySet()) {
        double p = Math.pow(e.getValue(), 0.75) / total;
        double sd = Math.sqrt(draws * p * (1 - p));
        int c = counts.getOrDefault(e.getKey(), 0);
        assertTrue(Math.abs(c - draws * p) < 5 * sd + 1, e.getKey() + ": " + c + " vs " + draws * p);
      }
    }
  }

  static Map<String, TableStore.Record> records(List<TableStore> shards) {
    Map<String, TableStore.Record> m = new HashMap<>();
    for (TableStore t : shards) {
      for (String k : t.keys()) {
        m.put(k, t.record(k));
      }
    }
    return m;
  }

  @ParameterizedTest(name = "2 shards -> {0} shards")
  @MethodSource("restoreCounts")
  void saveOnTwoShards_restoreIntoOtherShardCount_identicalRowsAndSlots(int target)
      throws Exception {
    Path ckpt = dir.resolve("ckpt");
    Map<String, TableStore.Record> saved;
    try (LoopbackCluster two = new LoopbackCluster(2, dir); TableClient c = two.client()) {
      EmbeddingTable t = c.createTable(config(TableConfigs.adam(0.01f, 0f, 0f, 0f)));
      train(t, 11, 20);
      CheckpointManifest m = t.save(ckpt, 20);
      assertEquals(2, m.getFilesCount());
      assertEquals(t.describe().getCounters().getKeys(),
          m.getFilesList().stream().mapToLong(f -> f.getKeys()).sum());
      saved = records(List.of(two.engine(0).get("emb"), two.engine(1).get("emb")));
      train(t, 12, 5); // the live table moves on; the checkpoint must not
    }
    if (target == 0) { // in-process
      try (TableClient local = TableClients.inProcess(dir)) {
        EmbeddingTable t = local.createTable(config(TableConfigs.sgd(1f)).toBuilder()
            .setName("emb").build());
        assertEquals(saved.size(), t.restore(ckpt));
        // the restored config is the checkpoint's (Adam), not the one the table had
        assertEquals(dev.dynembed.table.v1.OptimizerKind.ADAM,
            local.openTable("emb").describe().getConfig().getOptimizer().getKind());
      }
      return;
    }
    try (LoopbackCluster other = new LoopbackCluster(target, dir); TableClient c = other.client()) {
      EmbeddingTable t = c.createTable(config(TableConfigs.adam(0.01f, 0f, 0f, 0f)));
      assertEquals(saved.size(), t.restore(ckpt));
      List<TableStore> stores = IntStream.range(0, target).mapToObj(i -> other.engine(i).get("emb"))
          .toList();
      assertEquals(saved, records(stores)); // bit-identical weights, slots and metadata
    }
  }

  static Stream<Integer> restoreCounts() {
    return Stream.of(0, 1, 2, 3);
  }
}
