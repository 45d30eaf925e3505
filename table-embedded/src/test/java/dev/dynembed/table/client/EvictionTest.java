package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.EvictionPolicy;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Eviction evicts exactly the documented victims (TTL by last-update step, then LFU or LRU past
 * the cap, ties by key bytes), keeps everything of the kept rows, and evicted keys come back
 * through admission; in process and on 2 loopback shards.
 */
class EvictionTest {
  @TempDir Path dir;

  private static final int DIM = 4;

  static TableConfig config(int minCount) {
    return TableConfigs.builder("ev", DIM).setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f))
        .setMinCount(minCount).build();
  }

  private static TableClient client(int shards, Path dir, List<AutoCloseable> keep)
      throws Exception {
    return LoopbackCluster.client(shards, dir, keep);
  }

  /** Key "kI" is read I+1 times and last updated at step 10 * I: frequency and age both rise. */
  private static String[] fill(EmbeddingTable t, int n) {
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = "k" + (char) ('a' + i);
      for (int r = 0; r <= i; r++) {
        t.findOrInsert(keys[i]);
      }
      t.applyGradients(new String[] {keys[i]}, new float[] {1, 1, 1, 1}, 0f, 10L * i);
    }
    return keys;
  }

  private static boolean[] present(EmbeddingTable t, String[] keys) {
    return t.find(keys).found();
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void ttl_thenLfuCap_evictExactlyTheDocumentedVictims(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, dir, keep)) {
      EmbeddingTable t = c.createTable(config(0));
      String[] k = fill(t, 8); // steps 0, 10, ..., 70
      float[] before = t.find(k).rows();
      // TTL 25 at step 70: rows last updated before step 45 (ka..ke at 0..40) go
      assertEquals(5, t.evict(25, 70, 0, EvictionPolicy.LFU));
      assertArrayEquals(new boolean[] {false, false, false, false, false, true, true, true},
          present(t, k));
      // kept rows keep their values, slots (the next update) and frequency
      assertArrayEquals(java.util.Arrays.copyOfRange(before, 5 * DIM, 8 * DIM),
          java.util.Arrays.copyOfRange(t.find(k).rows(), 5 * DIM, 8 * DIM));
      assertEquals(6 + 7 + 8, t.describe().getCounters().getTotalFrequency());
      // an evicted key comes back as new: initializer row, frequency from 1
      float[] again = t.findOrInsert("ka"); // the initializer's row, not the trained one
      assertFalse(java.util.Arrays.equals(java.util.Arrays.copyOfRange(before, 0, DIM), again));
      assertTrue(t.find("ka").found()[0]);
      assertEquals(1, t.count(new String[] {"ka"}, false).frequencies()[0]);
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  /** max_keys in the config: each shard evicts to its share on its own, keeping the hot keys. */
  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void configuredCap_isKeptByTheShards_keepingTheMostFrequent(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, dir, keep)) {
      EmbeddingTable t = c.createTable(config(0).toBuilder().setMaxKeys(200).build());
      String[] hot = insertHot(t);
      for (int b = 0; b < 10; b++) {
        t.findOrInsert(cold(b, 100));
        awaitEvictions(c, keep);
      }
      long keys = t.describe().getCounters().getKeys();
      long share = shards == 0 ? 200 : 100;
      assertTrue(keys <= (shards == 0 ? 1 : shards) * (share + share / 10),
          keys + " rows for a cap of 200");
      assertTrue(keys >= 100, keys + " rows: evicted far below the cap");
      for (boolean f : present(t, hot)) {
        assertTrue(f, "a hot key was evicted");
      }
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  /**
   * Rows that arrive while a cap's eviction runs (their calls find it running and schedule
   * nothing) are evicted after it: a table whose last inserts land during an eviction does not
   * stay past its cap (bin/table-demo's capped table once ended at 2,538 rows of 2,000).
   */
  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void insertsDuringAnEviction_areEvictedAfterIt_noWaitBetweenCalls(int shards)
      throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, dir, keep)) {
      // evictions of ~20,000 rows take about as long as a call of 3,000 new keys: the calls
      // keep landing while one runs
      EmbeddingTable t = c.createTable(config(0).toBuilder().setMaxKeys(20_000).build());
      for (int b = 0; b < 60; b++) {
        t.findOrInsert(cold(b, 3_000)); // no wait between calls
      }
      awaitEvictions(c, keep);
      long keys = t.describe().getCounters().getKeys();
      assertTrue(keys <= 22_000, keys + " rows for a cap of 20,000 once the evictions are done");
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  /**
   * max_bytes in the config: each shard keeps its part under its share of the bytes (soft: within
   * the 10% slack and the page a rebuilt store starts with), keeping the hot keys.
   */
  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void configuredByteCap_boundsTheTablesMemory_keepingTheMostFrequent(int shards)
      throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    long maxBytes = 4 << 20;
    try (TableClient c = client(shards, dir, keep)) {
      EmbeddingTable t = c.createTable(config(0).toBuilder().setName("evb")
          .setMaxBytes(maxBytes).setEvictionPolicy(dev.dynembed.table.v1.EvictionPolicy.LFU)
          .build());
      String[] hot = insertHot(t);
      long peak = 0;
      for (int b = 0; b < 40; b++) {
        t.findOrInsert(cold(b, 2000));
        awaitEvictions(c, keep);
        peak = Math.max(peak, t.describe().getCounters().getKeys());
      }
      var counters = t.describe().getCounters();
      // 80,020 keys arrived; about half fit (rows of dim DIM with Adagrad slots, metadata, index)
      assertTrue(counters.getKeys() < 60_000 && peak < 60_000, counters.getKeys()
          + " rows (peak " + peak + ") under a cap of " + maxBytes + " bytes");
      // soft: the 10% slack, and bytes_used also counts each shard's last pages' unused tail
      long pages = (shards == 0 ? 1 : shards) * (1L << 20);
      assertTrue(counters.getBytesUsed() <= maxBytes * 1.1 + pages, counters.getBytesUsed()
          + " bytes used for a cap of " + maxBytes);
      assertTrue(counters.getBytesUsed() >= maxBytes / 2, counters.getBytesUsed()
          + " bytes used: evicted far below the cap of " + maxBytes);
      for (boolean f : present(t, hot)) {
        assertTrue(f, "a hot key was evicted");
      }
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  /** 20 keys counted 10 times each: the ones a frequency policy keeps. */
  private static String[] insertHot(EmbeddingTable t) {
    String[] hot = new String[20];
    for (int i = 0; i < hot.length; i++) {
      hot[i] = "hot" + i;
    }
    for (int r = 0; r < 10; r++) {
      t.findOrInsert(hot);
    }
    return hot;
  }

  /** Batch {@code b} of {@code n} keys seen once. */
  private static String[] cold(int b, int n) {
    String[] cold = new String[n];
    for (int i = 0; i < n; i++) {
      cold[i] = "cold" + b + "-" + i;
    }
    return cold;
  }

  private static void awaitEvictions(TableClient c, List<AutoCloseable> keep) {
    for (dev.dynembed.table.engine.ShardEngine e : LoopbackCluster.engines(c, keep)) {
      e.awaitEvictions();
    }
  }

  @Test
  void cap_keepsTheMostFrequent_orTheMostRecent() throws Exception {
    try (TableClient c = TableClients.inProcess(dir)) {
      EmbeddingTable lfu = c.createTable(config(0).toBuilder().setName("lfu").build());
      String[] k = fill(lfu, 6);
      // kb is now read many times: the most frequent but not the most recent
      for (int r = 0; r < 20; r++) {
        lfu.findOrInsert("kb");
      }
      assertEquals(3, lfu.evict(0, 0, 3, EvictionPolicy.LFU));
      assertArrayEquals(new boolean[] {false, true, false, false, true, true}, present(lfu, k));
      EmbeddingTable lru = c.createTable(config(0).toBuilder().setName("lru").build());
      fill(lru, 6);
      for (int r = 0; r < 20; r++) {
        lru.findOrInsert("kb");
      }
      assertEquals(3, lru.evict(0, 0, 3, EvictionPolicy.LRU));
      assertArrayEquals(new boolean[] {false, false, false, true, true, true}, present(lru, k));
      // ties (same frequency, same step) go by key bytes: "t0" before "t1"
      EmbeddingTable ties = c.createTable(config(0).toBuilder().setName("ties").build());
      ties.findOrInsert("t1", "t0", "t2");
      assertEquals(2, ties.evict(0, 0, 1, EvictionPolicy.LFU));
      assertArrayEquals(new boolean[] {false, false, true},
          ties.find("t0", "t1", "t2").found());
      // explicit removal
      assertEquals(1, ties.remove("t2", "absent"));
      assertEquals(0, ties.describe().getCounters().getKeys());
      assertEquals(0, lfu.evict(0, 0, 3, EvictionPolicy.LFU), "nothing more to evict");
    }
  }

  @Test
  void evictedKeys_reEnterThroughAdmission_andPendingCountsStay() throws Exception {
    try (TableClient c = TableClients.inProcess(dir)) {
      EmbeddingTable t = c.createTable(config(3));
      t.count(new String[] {"a", "a", "a", "b", "b", "p"}, true); // a admitted, b and p pending
      assertEquals(1, t.remove("a"));
      KeyCounts k = t.count(new String[] {"a", "b", "p"}, false);
      assertArrayEquals(new boolean[] {false, false, false}, k.admitted());
      assertArrayEquals(new long[] {0, 2, 1}, k.frequencies(), "pending counts survive");
      t.count(new String[] {"a", "a", "a", "b"}, true);
      assertArrayEquals(new boolean[] {true, true},
          t.count(new String[] {"a", "b"}, false).admitted());
    }
  }

  @Test
  void badEvictions_areRefused() throws Exception {
    try (TableClient c = TableClients.inProcess(dir)) {
      EmbeddingTable t = c.createTable(config(0));
      TableException e = assertThrows(TableException.class,
          () -> t.evict(0, 0, 0, EvictionPolicy.LFU));
      assertTrue(e.getMessage().contains("one of them > 0"), e.getMessage());
      assertThrows(TableException.class, () -> t.evict(-1, 0, 5, EvictionPolicy.LRU));
    }
  }
}
