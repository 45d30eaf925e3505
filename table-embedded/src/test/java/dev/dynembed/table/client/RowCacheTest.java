package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.tools.ExactOracle;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer-side row cache (docs/design/0022-row-cache.md) against real shards on loopback:
 * S = 0 is no cache, bit for bit; the exact oracle (SGD rate 1, gradients in quarters) with
 * two caching clients ends exact on the shards once both flushed; a checkpoint flushes first; a
 * cached row is served at most S steps; gradients and counts of the cached rows cross once per
 * key per flush, not once per step.
 */
class RowCacheTest {
  @TempDir Path dir;

  private static ClientOptions cached(int maxStaleness) {
    return ClientOptions.builder().rowCache(new ClientOptions.RowCaching(16L << 20,
        maxStaleness)).build();
  }

  /** Every row and count of the oracle's keys on {@code t}, bit for bit. */
  private static void assertExact(EmbeddingTable t, ExactOracle oracle) {
    assertArrayEquals(oracle.rows, t.find(oracle.keys()).rows(), 0f);
    assertArrayEquals(oracle.counts, t.count(oracle.keys(), false).frequencies());
  }

  private static TableConfig adagrad(String name, int dim) {
    return TableConfigs.builder(name, dim).setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f))
        .build();
  }

  /** A Zipf-ish batch of 64 keys out of {@code vocab}, and gradients in quarters. */
  private static String[] batch(Random r, int vocab) {
    String[] keys = new String[64];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "w" + (int) Math.floor(Math.exp(r.nextDouble() * Math.log(vocab)));
    }
    return keys;
  }

  private static float[] quarters(Random r, int n) {
    float[] g = new float[n];
    for (int i = 0; i < n; i++) {
      g[i] = (r.nextInt(9) - 4) / 4f;
    }
    return g;
  }

  /** Steps of reads, draws and gradients, one thread: the rows and draws it saw. */
  private static List<float[]> train(EmbeddingTable t, int steps) {
    Random r = new Random(5);
    List<float[]> seen = new ArrayList<>();
    for (int s = 0; s < steps; s++) {
      String[] keys = batch(r, 300);
      seen.add(t.findOrInsert(keys, true));
      if (s > 2) {
        seen.add(t.sampleDistinct(new String[0], 16, SamplerKind.UNIGRAM_SAMPLER, 0.75f, s)
            .rows());
      }
      t.applyGradients(keys, quarters(r, keys.length * t.dim()), 0f, s);
    }
    return seen;
  }

  @Test
  void stalenessZero_isNoCache_bitForBit() throws Exception {
    try (LoopbackCluster a = new LoopbackCluster(2, dir.resolve("a"));
        LoopbackCluster b = new LoopbackCluster(2, dir.resolve("b"));
        TableClient plain = TableClients.connect(a.endpoints);
        TableClient zero = TableClients.connect(b.endpoints, ClientOptions.builder()
            .rowCache(new ClientOptions.RowCaching(16L << 20, 0)).build())) {
      EmbeddingTable tp = plain.createTable(adagrad("t", 8));
      EmbeddingTable tz = zero.createTable(adagrad("t", 8));
      List<float[]> sp = train(tp, 40);
      List<float[]> sz = train(tz, 40);
      for (int i = 0; i < sp.size(); i++) {
        assertArrayEquals(sp.get(i), sz.get(i), 0f, "read " + i);
      }
      RowTraffic traffic = TableClients.traffic(tz);
      assertEquals(0, traffic.cacheHits() + traffic.cacheMisses(), "no cache: " + traffic);
      assertEquals(TableClients.traffic(tp).rowsRead(), traffic.rowsRead());
    }
  }

  @Test
  void twoCachingTrainers_theExactOracle_everyRowAndCountExactOnTheShards() throws Exception {
    int keys = 50;
    int dim = 4;
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"))) {
      try (TableClient admin = cluster.client()) {
        admin.createTable(ExactOracle.config("oracle", dim).build());
      }
      ExactOracle first = new ExactOracle(keys, dim);
      ExactOracle second = new ExactOracle(keys, dim);
      TableClient c1 = TableClients.connect(cluster.endpoints, cached(4));
      TableClient c2 = TableClients.connect(cluster.endpoints, cached(16));
      EmbeddingTable t1 = c1.openTable("oracle");
      EmbeddingTable t2 = c2.openTable("oracle");
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
      ExecutorService pool = Executors.newFixedThreadPool(2);
      Future<?> a = pool.submit(() -> {
        first.run(t1, 2, end); // two threads share c1's cache (Hogwild in one process)
        return null;
      });
      Future<?> b = pool.submit(() -> {
        second.run(t2, 1, end);
        return null;
      });
      a.get();
      b.get();
      pool.shutdown();
      RowTraffic r1 = TableClients.traffic(t1);
      assertTrue(r1.cacheHits() > r1.cacheMisses(), "most reads are served here: " + r1);
      assertTrue(r1.maxAge() <= 4, "a row is served at most S = 4 steps: " + r1);
      assertTrue(r1.flushes() >= first.steps / 4 - 1, r1.toString());
      c1.close(); // flushes what the caches hold
      c2.close();
      try (TableClient check = cluster.client()) {
        EmbeddingTable t = check.openTable("oracle");
        String[] k = first.keys();
        float[] want = first.rows.clone();
        for (int i = 0; i < want.length; i++) {
          want[i] += second.rows[i];
        }
        assertArrayEquals(want, t.find(k).rows(), 0f);
        long[] counts = first.counts.clone();
        for (int i = 0; i < counts.length; i++) {
          counts[i] += second.counts[i];
        }
        assertArrayEquals(counts, t.count(k, false).frequencies());
        // rows crossed once per key per flush, not once per step and occurrence
        long perStep = (first.steps + second.steps) * 32;
        assertTrue(r1.rowsWritten() * 2 < first.steps * 32, "gradient rows sent: " + r1);
        System.out.printf("row cache, 2 trainers: %d steps, %d + %d rows crossed (%d without"
            + " a cache at most), hit rate %.3f; every row and count exact%n",
            first.steps + second.steps, r1.rowsRead(), r1.rowsWritten(), 2 * perStep,
            r1.hitRate());
      }
    }
  }

  /**
   * A cache of 10 entries under 50 hot keys: entries are evicted all the time, many with a
   * pending sum and counted reads, and keys come back while their orphaned sums wait for the
   * next flush. Two threads share the cache; after the flush every row and count is exact.
   */
  @Test
  void aCacheSmallerThanItsKeys_evictsWithoutLosingOrRepeatingAnUpdate() throws Exception {
    int keys = 50;
    int dim = 4;
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"))) {
      try (TableClient admin = cluster.client()) {
        admin.createTable(ExactOracle.config("oracle", dim).build());
      }
      ExactOracle oracle = new ExactOracle(keys, dim);
      long entryBytes = 4L * dim + 120; // the cache's estimate of an SGD entry: row, overhead
      TableClient c = TableClients.connect(cluster.endpoints, ClientOptions.builder()
          .rowCache(new ClientOptions.RowCaching(10 * entryBytes, 8)).build());
      EmbeddingTable t = c.openTable("oracle");
      oracle.run(t, 2, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
      RowTraffic r = TableClients.traffic(t);
      assertTrue(r.cacheEvictions() > 100, "entries must be evicted: " + r);
      assertTrue(r.cachedRows() <= 12, "the cache keeps to its size: " + r);
      c.close();
      try (TableClient check = cluster.client()) {
        assertExact(check.openTable("oracle"), oracle);
      }
    }
  }

  /**
   * Under the shards' tiers the cache changes nothing: a table capped at 30 rows a shard with a
   * disk tier (most rows cold, promoted and demoted all the time) ends exact after a caching
   * trainer's flush.
   */
  @Test
  void overADiskTier_theExactOracleEndsExact() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"))) {
      ExactOracle oracle = new ExactOracle(200, 4);
      try (TableClient c = TableClients.connect(cluster.endpoints, cached(6))) {
        EmbeddingTable t = c.createTable(ExactOracle.config("tiered", 4).setMaxKeys(30)
            .setDiskTier(true).build());
        oracle.run(t, 2, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500));
      }
      try (TableClient plain = cluster.client()) {
        EmbeddingTable p = plain.openTable("tiered");
        assertTrue(p.describe().getCounters().getColdKeys() > 100,
            p.describe().getCounters().toString());
        assertExact(p, oracle);
      }
    }
  }

  @Test
  void aCheckpoint_holdsEveryUpdateTheCacheHad() throws Exception {
    int dim = 4;
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient c = TableClients.connect(cluster.endpoints, cached(1 << 30))) {
      EmbeddingTable t = c.createTable(ExactOracle.config("ck", dim).build());
      ExactOracle oracle = new ExactOracle(50, dim);
      oracle.run(t, 1, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500));
      assertEquals(0, TableClients.traffic(t).flushes(), "S = 2^30: nothing flushed yet");
      java.nio.file.Files.createDirectories(dir.resolve("s").resolve("ck1"));
      t.save(dir.resolve("s").resolve("ck1"), 1); // sends what the cache holds first
      try (TableClient other = cluster.client()) { // no cache: reads the shards
        EmbeddingTable o = other.openTable("ck");
        assertArrayEquals(oracle.rows, o.find(oracle.keys()).rows(), 0f);
        o.restore(dir.resolve("s").resolve("ck1"));
        assertExact(o, oracle);
      }
    }
  }

  /**
   * What a trainer killed with SIGKILL loses: the gradients since its last flush, fewer than S
   * steps' worth, and nothing else. After 13 steps with S = 5 the shards hold steps 1..10 exactly
   * (the flushes at steps 5 and 10), as a process that died now would leave them; closing the
   * client sends steps 11..13.
   */
  @Test
  void aTrainerThatDies_losesOnlyItsUnflushedSteps() throws Exception {
    int dim = 2;
    String[] keys = {"a", "b", "c", "a"};
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient plain = cluster.client()) {
      plain.createTable(ExactOracle.config("t", dim).build());
      TableClient trainer = TableClients.connect(cluster.endpoints, cached(5));
      EmbeddingTable t = trainer.openTable("t");
      Random r = new Random(9);
      float[][] sums = new float[14][3 * dim]; // after step s: minus the sum of steps 1..s
      for (int step = 1; step <= 13; step++) {
        t.findOrInsert(keys, true);
        float[] g = quarters(r, keys.length * dim);
        t.applyGradients(keys, g, 0f, step);
        sums[step] = sums[step - 1].clone();
        for (int i = 0; i < keys.length; i++) {
          int k = "abc".indexOf(keys[i]);
          for (int d = 0; d < dim; d++) {
            sums[step][k * dim + d] -= g[i * dim + d];
          }
        }
      }
      EmbeddingTable p = plain.openTable("t");
      String[] abc = {"a", "b", "c"};
      assertArrayEquals(sums[10], p.find(abc).rows(), 0f, "the shards hold steps 1..10");
      assertArrayEquals(sums[13], t.find(abc).rows(), 0f, "the trainer reads its own 13 steps");
      trainer.close(); // a trainer that ends normally sends the rest
      assertArrayEquals(sums[13], p.find(abc).rows(), 0f);
      assertArrayEquals(new long[] {26, 13, 13}, p.count(abc, false).frequencies());
    }
  }

  /**
   * The doorkeeper: a key enters the cache at its second miss, so keys read once (a long tail)
   * build no entry; their gradients go to the shards as without a cache, and the rows are the
   * same. A find admits nothing.
   */
  @Test
  void keysEnterTheCacheAtTheirSecondMiss() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient trainer = TableClients.connect(cluster.endpoints, cached(8));
        TableClient plain = cluster.client()) {
      EmbeddingTable t = trainer.createTable(ExactOracle.config("t", 2).build());
      String[] tail = new String[200];
      for (int i = 0; i < tail.length; i++) {
        tail[i] = "once" + i;
      }
      t.find("never");
      t.find("never");
      t.findOrInsert(tail, true);
      t.applyGradients(tail, new float[tail.length * 2], 0f, 1);
      assertEquals(0, TableClients.traffic(t).cachedRows(), "keys read once are not cached");
      assertEquals(0, TableClients.traffic(t).localUpdates());
      t.findOrInsert(new String[] {"hot", "hot"}, true);
      t.findOrInsert(new String[] {"hot"}, true);
      assertEquals(1, TableClients.traffic(t).cachedRows(), "cached at its second miss");
      t.applyGradients(new String[] {"hot"}, new float[] {1, 1}, 0f, 2);
      assertEquals(1, TableClients.traffic(t).localUpdates(), "its gradient applied here");
      t.flush();
      EmbeddingTable p = plain.openTable("t");
      assertArrayEquals(new float[] {-1, -1}, p.find("hot").rows(), 0f);
      assertArrayEquals(new long[] {3}, p.count(new String[] {"hot"}, false).frequencies());
      assertFalse(p.find("never").found()[0], "a find creates nothing");
      // an Adagrad table: keys kept out are read without their slots (as without a cache), a
      // key that enters with them
      EmbeddingTable a = trainer.createTable(adagrad("a", 4));
      long before = TableClients.traffic(a).valuesRead();
      a.findOrInsert(tail, true);
      assertEquals(before + tail.length * 4, TableClients.traffic(a).valuesRead(),
          "first-seen keys come without slots");
      a.findOrInsert(new String[] {"once0"}, true);
      assertEquals(before + tail.length * 4 + 4 + 4, TableClients.traffic(a).valuesRead(),
          "a key that enters the cache comes with its Adagrad slots");
    }
  }

  /**
   * An assign through a caching trainer: what the cache held for the keys is sent first, then
   * dropped, so the trainer and the shards both see the assigned rows; the next gradient starts
   * from them (SGD rate 1: exact).
   */
  @Test
  void anAssign_dropsTheCachedRows_afterSendingWhatTheyHeld() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient trainer = TableClients.connect(cluster.endpoints, cached(64));
        TableClient plain = cluster.client()) {
      EmbeddingTable t = trainer.createTable(ExactOracle.config("t", 2).build());
      String[] keys = {"hot", "warm"};
      for (int s = 0; s < 3; s++) { // cached from the second read on
        t.findOrInsert(keys, true);
        t.applyGradients(keys, new float[] {1, 1, 1, 1}, 0f, s);
      }
      assertTrue(TableClients.traffic(t).cachedRows() > 0);
      assertEquals(2, t.assign(keys, new float[] {5, 6, 7, 8}, null, 3));
      assertArrayEquals(new float[] {5, 6, 7, 8}, t.findOrInsert(keys, true), 0f);
      t.applyGradients(keys, new float[] {1, 1, 1, 1}, 0f, 4);
      t.flush();
      assertArrayEquals(new float[] {4, 5, 6, 7}, plain.openTable("t").find(keys).rows(), 0f);
      assertArrayEquals(new long[] {4, 4},
          plain.openTable("t").count(keys, false).frequencies(), "counts kept, none lost");
    }
  }

  @Test
  void anotherTrainersUpdates_areSeenWithinTheStalenessBound() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient reader = TableClients.connect(cluster.endpoints, cached(3));
        TableClient writer = cluster.client()) {
      EmbeddingTable r = reader.createTable(ExactOracle.config("t", 2).build());
      EmbeddingTable w = writer.openTable("t");
      r.findOrInsert("k");
      r.findOrInsert("k"); // the doorkeeper admits a key at its second miss
      w.applyGradients(new String[] {"k"}, new float[] {1, 1}, 0f, 1);
      int steps = 0;
      while (r.findOrInsert(new String[] {"k"}, false)[0] != -1f) {
        r.applyGradients(new String[] {"other"}, new float[2], 0f, ++steps); // a step
        assertTrue(steps <= 4, "still stale after " + steps + " steps");
      }
      assertTrue(steps >= 3, "served from the cache for S steps first: " + steps);
    }
  }

  /**
   * Pooled lookups and their gradients through a cache (pooled in the client, spread over the
   * keys and applied through the cache) give what a cache-less client gets from the shards'
   * pooling, exactly (SGD rate 1, gradients in quarters); bags over another key count are
   * refused by name.
   */
  @Test
  void pooledLookups_throughACache_equalTheShardsPooling() throws Exception {
    dev.dynembed.table.common.KeyBags bags = dev.dynembed.table.common.KeyBags.of(
        new int[] {2, 3}, new int[] {0, 1, 1, 2, 0}, new float[] {1, 0.5f, 0.25f, 1, 2}, null, 3);
    String[] keys = {"p", "q", "r"};
    try (LoopbackCluster a = new LoopbackCluster(2, dir.resolve("a"));
        LoopbackCluster b = new LoopbackCluster(2, dir.resolve("b"));
        TableClient plain = TableClients.connect(a.endpoints);
        TableClient c = TableClients.connect(b.endpoints, cached(3))) {
      EmbeddingTable tp = plain.createTable(ExactOracle.config("pool", 4).build());
      EmbeddingTable tc = c.createTable(ExactOracle.config("pool", 4).build());
      Random r = new Random(3);
      for (int step = 1; step <= 7; step++) {
        assertArrayEquals(tp.pooled(keys, bags, true, true), tc.pooled(keys, bags, true, true),
            0f, "step " + step);
        float[] g = quarters(r, 2 * 4);
        tp.applyPooledGradients(keys, bags, g, 0f, step);
        tc.applyPooledGradients(keys, bags, g, 0f, step);
      }
      tc.flush();
      assertArrayEquals(tp.find(keys).rows(), plain.openTable("pool").find(keys).rows(), 0f);
      try (TableClient check = TableClients.connect(b.endpoints)) {
        EmbeddingTable t = check.openTable("pool");
        assertArrayEquals(tp.find(keys).rows(), t.find(keys).rows(), 0f);
        assertArrayEquals(tp.count(keys, false).frequencies(), t.count(keys, false).frequencies());
      }
      TableException e = assertThrows(TableException.class,
          () -> tc.pooled(new String[] {"p", "q"}, bags, true, true));
      assertTrue(e.getMessage().contains("bags built over 3 keys"), e.getMessage());
    }
  }

  @Test
  void badGradients_areRefusedWhole_andChangeNoCachedRow() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient c = TableClients.connect(cluster.endpoints, cached(8))) {
      EmbeddingTable t = c.createTable(ExactOracle.config("t", 2).build());
      float[] before = t.findOrInsert("a", "b");
      TableException e = assertThrows(TableException.class, () -> t.applyGradients(
          new String[] {"a", "b"}, new float[] {1, 1, Float.NaN, 0}, 0f, 1));
      assertTrue(e.getMessage().contains("NaN"), e.getMessage());
      assertArrayEquals(before, t.findOrInsert(new String[] {"a", "b"}, false), 0f);
      assertThrows(IllegalArgumentException.class, () -> new ClientOptions.RowCaching(-1, 8));
    }
  }
}
