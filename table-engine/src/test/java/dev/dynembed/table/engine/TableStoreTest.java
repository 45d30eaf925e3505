package dev.dynembed.table.engine;

import static dev.dynembed.table.engine.Fixtures.rows;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.TableConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class TableStoreTest {
  private final TableConfig cfg = Fixtures.config("t", 16, TableConfigs.adagrad(0.1f, 0.1f, 1e-7f));

  @Test
  void findOrInsert_newKey_rowIsDeterministicInKeyAndSeed() {
    TableStore a = new TableStore(cfg, 0, 1);
    TableStore b = new TableStore(cfg, 0, 1);
    rows(b, "other", "keys", "first"); // a different insertion order must not matter
    assertArrayEquals(rows(a, "apple"), rows(b, "apple"));
    float[] r = rows(a, "apple");
    for (float v : r) {
      assertTrue(v >= -0.5f && v < 0.5f);
    }
    TableStore otherSeed = new TableStore(TableConfigs.normalize(cfg.toBuilder()
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 12)).build()), 0, 1);
    assertFalse(java.util.Arrays.equals(r, rows(otherSeed, "apple")));
  }

  @Test
  void findOrInsert_sameKeyTwiceInBatch_oneRowFrequencyTwo() {
    TableStore t = new TableStore(cfg, 0, 1);
    float[] r = rows(t, "x", "y", "x");
    assertEquals(2, t.size());
    assertArrayEquals(java.util.Arrays.copyOfRange(r, 0, 16), java.util.Arrays.copyOfRange(r, 32, 48));
    assertEquals(2, t.record("x").frequency());
    assertEquals(1, t.record("y").frequency());
    assertEquals(3, t.counters().getTotalFrequency());
  }

  @Test
  void findOrInsert_occurrenceCounts_addToFrequency() {
    TableStore t = new TableStore(cfg, 0, 1);
    t.findOrInsert(PackedKeys.of("x", "y"), new int[] {5, 2}, new float[32]);
    assertEquals(5, t.record("x").frequency());
    assertEquals(7, t.counters().getTotalFrequency());
  }

  @Test
  void find_missingKey_notFoundAndNoRowCreated() {
    TableStore t = new TableStore(cfg, 0, 1);
    float[] expected = rows(t, "present");
    float[] out = new float[32];
    java.util.Arrays.fill(out, 9f);
    byte[] found = new byte[1];
    t.find(PackedKeys.of("present", "absent"), out, found);
    assertEquals(1, found[0]);
    assertArrayEquals(expected, java.util.Arrays.copyOfRange(out, 0, 16));
    assertArrayEquals(new float[16], java.util.Arrays.copyOfRange(out, 16, 32));
    assertNull(t.record("absent"));
    assertEquals(1, t.size());
    assertEquals(1, t.record("present").frequency()); // find counts nothing
  }

  @Test
  void applyGradients_unknownKey_isCreatedThenUpdated() {
    TableStore t = new TableStore(Fixtures.config("t", 4, TableConfigs.sgd(1f)), 0, 1);
    TableStore fresh = new TableStore(Fixtures.config("t", 4, TableConfigs.sgd(1f)), 0, 1);
    float[] init = rows(fresh, "k");
    t.applyGradients(PackedKeys.of("k"), new float[] {1, 2, 3, 4}, 0f, 17);
    float[] r = t.record("k").weights();
    for (int j = 0; j < 4; j++) {
      assertEquals(init[j] - (j + 1), r[j], 1e-6);
    }
    assertEquals(17, t.record("k").lastStep());
    assertEquals(0, t.record("k").frequency());
  }

  @Test
  void manyKeys_unicodeAndGrowth_allRetrievable() {
    TableStore t = new TableStore(Fixtures.config("t", 3, TableConfigs.sgd(1f)), 0, 1);
    int n = 50_000;
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = (i % 3 == 0 ? "東京-" : "key-") + i;
    }
    float[] all = rows(t, keys);
    assertEquals(n, t.size());
    float[] again = new float[n * 3];
    byte[] found = new byte[(n + 7) / 8];
    t.find(PackedKeys.of(keys), again, found);
    assertArrayEquals(all, again);
    for (byte b : found) {
      assertEquals((byte) 0xff, b);
    }
    assertEquals(n, t.keys().size());
  }

  @Test
  void keysOfEveryLength_areDistinctAndRoundTrip(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) {
    // 1..40 bytes crosses the 8-byte words of the key comparison; multi-byte characters put
    // character boundaries at odd offsets
    List<String> keys = new ArrayList<>();
    for (int len = 1; len <= 40; len++) {
      keys.add("a".repeat(len));
      keys.add("a".repeat(len - 1) + "b");
      keys.add("é".repeat(len / 2) + (len % 2 == 1 ? "x" : ""));
    }
    keys = new ArrayList<>(new java.util.LinkedHashSet<>(keys));
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableStore t = engine.create(Fixtures.config("t", 4, TableConfigs.sgd(1f)));
    String[] arr = keys.toArray(new String[0]);
    float[] first = rows(t, arr);
    assertEquals(keys.size(), t.size());
    assertEquals(new java.util.HashSet<>(keys), new java.util.HashSet<>(t.keys()));
    for (String k : keys) {
      assertEquals(1, t.record(k).frequency(), k);
    }
    dev.dynembed.table.v1.CheckpointFile f = engine.save("t", "ck", 1);
    ShardEngine other = new ShardEngine(0, 1, dir);
    other.restore("t", "ck", List.of(f));
    float[] again = new float[first.length];
    byte[] found = new byte[(arr.length + 7) / 8];
    other.get("t").find(PackedKeys.of(arr), again, found);
    assertArrayEquals(first, again);
    assertEquals(new java.util.HashSet<>(keys), new java.util.HashSet<>(other.get("t").keys()));
  }

  @Test
  void concurrentFindOrInsert_sameKeys_exactlyOneRowEach() throws Exception {
    TableStore t = new TableStore(cfg, 0, 1);
    int threads = 4;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<float[]>> results = new ArrayList<>();
    String[] keys = new String[2000];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "k" + i;
    }
    for (int th = 0; th < threads; th++) {
      results.add(pool.submit(() -> rows(t, keys)));
    }
    float[] first = results.get(0).get();
    for (Future<float[]> f : results) {
      assertArrayEquals(first, f.get());
    }
    pool.shutdown();
    assertEquals(keys.length, t.size());
    assertEquals((long) threads * keys.length, t.counters().getTotalFrequency());
    for (String k : keys) {
      assertEquals(threads, t.record(k).frequency());
    }
  }

  @Test
  void concurrentApplyGradients_sameRow_noLostUpdates() throws Exception {
    // zero rows and a gradient of 2^-10: every partial sum is exact in float, so the result
    // must be exact too; one lost update (2^-10) would show
    TableStore t = new TableStore(TableConfigs.normalize(TableConfigs.builder("t", 8)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build()), 0, 1);
    rows(t, "hot");
    int threads = 4;
    int perThread = 2000;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<?>> fs = new ArrayList<>();
    float[] g = new float[8];
    java.util.Arrays.fill(g, 1f / 1024);
    for (int th = 0; th < threads; th++) {
      fs.add(pool.submit(() -> {
        for (int i = 0; i < perThread; i++) {
          t.applyGradients(PackedKeys.of("hot"), g, 0f, i);
        }
      }));
    }
    for (Future<?> f : fs) {
      f.get();
    }
    pool.shutdown();
    assertEquals(threads * perThread, t.record("hot").updates());
    for (float w : t.record("hot").weights()) {
      assertEquals(-threads * perThread / 1024f, w, 0f);
    }
  }

  @Test
  void wrongShardKey_isRejected() {
    TableStore shard0 = new TableStore(cfg, 0, 2);
    String foreign = null;
    for (int i = 0; foreign == null; i++) {
      if (KeyHashing.shardOf("k" + i, 2) == 1) {
        foreign = "k" + i;
      }
    }
    String key = foreign;
    Fixtures.assertError(dev.dynembed.table.common.ErrorCode.INVALID_ARGUMENT,
        "belongs to shard 1 of 2", () -> rows(shard0, key));
    assertEquals(0, shard0.size());
  }

  @Test
  void bytesPerKey_dim64Sgd_isWithin1_3xOfRawFloats() {
    // Memory accounting sanity: figures are published by the benchmark; this guards the layout.
    TableStore t = new TableStore(Fixtures.config("t", 64, TableConfigs.sgd(1f)), 0, 1);
    String[] keys = new String[100_000];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "w" + i;
    }
    rows(t, keys);
    double perKey = t.bytesPerKeyLive();
    assertTrue(perKey <= 1.3 * 64 * 4, "bytes per key " + perKey);
    assertTrue(t.bytesUsed() >= keys.length * 256L);
  }
}
