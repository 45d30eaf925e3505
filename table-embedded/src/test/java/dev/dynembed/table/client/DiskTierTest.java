package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The disk tier (docs/design/0014-storage-tiers.md): a table capped at 100 rows in memory holds
 * 1,000; the cap's victims move to RocksDB with their slots and metadata and come back on
 * access, so every call answers as for a table without a cap; checkpoints, scans and top-k see
 * both tiers. In process and on 2 loopback shards.
 */
class DiskTierTest {
  @TempDir Path dir;

  private static final int DIM = 4;
  private static final int KEYS = 1000;

  private static TableConfig config(String name, boolean tiered) {
    TableConfig.Builder b = TableConfigs.builder(name, DIM)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f))
        .setInitializer(TableConfigs.uniform(-1f, 1f, 5));
    if (tiered) {
      b.setMaxKeys(100).setDiskTier(true);
    }
    return b.build();
  }

  private TableClient client(int shards, List<AutoCloseable> keep) throws Exception {
    return LoopbackCluster.client(shards, dir, keep);
  }

  private static List<ShardEngine> engines(TableClient c, List<AutoCloseable> keep) {
    return LoopbackCluster.engines(c, keep);
  }

  private static void settle(List<ShardEngine> engines) {
    for (ShardEngine e : engines) {
      e.awaitEvictions();
    }
  }

  /** Key kI is read I % 50 + 1 times and updated twice; both tables get the same calls. */
  private static String[] train(EmbeddingTable t, List<ShardEngine> engines) {
    String[] keys = new String[KEYS];
    for (int i = 0; i < KEYS; i++) {
      keys[i] = "k" + i;
    }
    Random r = new Random(3);
    for (int round = 0; round < 50; round++) {
      List<String> batch = new ArrayList<>();
      for (int i = 0; i < KEYS; i++) {
        if (i % 50 >= round) {
          batch.add(keys[i]);
        }
      }
      t.findOrInsert(batch.toArray(new String[0]));
      if (engines != null) {
        settle(engines); // evictions run between calls, so that rows move both ways
      }
    }
    for (int step = 1; step <= 2; step++) {
      float[] g = new float[KEYS * DIM];
      for (int i = 0; i < g.length; i++) {
        g[i] = (float) r.nextGaussian();
      }
      t.applyGradients(keys, g, 0f, step);
      if (engines != null) {
        settle(engines);
      }
    }
    return keys;
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 2})
  void aTableTenTimesItsCap_answersAsAnUncappedTable(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep); TableClient plain = TableClients.inProcess(dir)) {
      List<ShardEngine> engines = engines(c, keep);
      EmbeddingTable t = c.createTable(config("tiered", true));
      EmbeddingTable u = plain.createTable(config("tiered", false).toBuilder().build());
      String[] keys = train(t, engines);
      train(u, null);
      settle(engines);
      TableCounters before = t.describe().getCounters();
      assertEquals(KEYS, before.getKeys(), "no row lost");
      long hot = before.getKeys() - before.getColdKeys();
      assertTrue(hot <= 110 + 10 * shards, "memory holds the cap (+10% slack): " + hot);
      assertTrue(before.getDemotions() > before.getColdKeys(), "rows went down and came back");
      assertTrue(before.getPromotions() > 0);
      // every row, slot and count as in the uncapped table
      assertArrayEquals(u.find(keys).rows(), t.find(keys).rows());
      assertArrayEquals(u.count(keys, false).frequencies(), t.count(keys, false).frequencies());
      settle(engines);
      // the most frequent keys stay in memory: reading them promotes nothing
      long promotions = t.describe().getCounters().getPromotions();
      List<String> top = new ArrayList<>();
      for (int i = 0; i < KEYS; i++) {
        if (i % 50 == 49) {
          top.add(keys[i]); // read 50 times, the most
        }
      }
      t.find(top.toArray(new String[0]));
      assertEquals(promotions, t.describe().getCounters().getPromotions(), "LFU keeps the top");
      // sampling draws from both tiers with the uncapped table's probabilities; a cold positive
      // (k0, read once: among LFU's first victims) has its cold entry's probability
      settle(engines);
      assertTrue(t.describe().getCounters().getColdKeys() > 700);
      String[] pos = {"k0", "k49"};
      SampledRows su = u.sampleDistinct(pos, 20000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 5);
      SampledRows st = t.sampleDistinct(pos, 20000, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 5);
      for (int i = 0; i < pos.length; i++) {
        assertTrue(st.positiveProbability()[i] > 0, pos[i]);
        assertEquals(su.positiveProbability()[i], st.positiveProbability()[i], 1e-12, pos[i]);
      }
      assertTrue(st.keys().length > 0.9 * su.keys().length, "cold keys are drawn too: "
          + st.keys().length + " distinct vs " + su.keys().length);
      assertArrayEquals(u.find(st.keys()).rows(), st.rows(), "drawn rows are the table's");
      // top-k over both tiers equals the uncapped table's
      float[] q = u.find("k7", "k123").rows();
      TopKResult a = u.topK(q, 2, 10, TopKOptions.DOT);
      TopKResult b = t.topK(q, 2, 10, TopKOptions.DOT);
      for (int i = 0; i < 2; i++) {
        assertArrayEquals(a.keys()[i], b.keys()[i]);
        assertArrayEquals(a.scores()[i], b.scores()[i]);
      }
    } finally {
      for (AutoCloseable k : keep) {
        k.close();
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 2})
  void checkpointsAndScans_holdBothTiers_andRemoveDeletesFromBoth(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      List<ShardEngine> engines = engines(c, keep);
      EmbeddingTable t = c.createTable(config("ck", true));
      String[] keys = train(t, engines);
      settle(engines);
      assertTrue(t.describe().getCounters().getColdKeys() > 700);
      Map<String, float[]> rows = new HashMap<>();
      float[] all = t.find(keys).rows();
      for (int i = 0; i < KEYS; i++) {
        rows.put(keys[i], java.util.Arrays.copyOfRange(all, i * DIM, (i + 1) * DIM));
      }
      settle(engines);
      // a scan gives every row once (nothing moves during it here)
      Map<String, Integer> seen = new HashMap<>();
      t.scan(64, p -> {
        for (int i = 0; i < p.keys().length; i++) {
          seen.merge(p.keys()[i], 1, Integer::sum);
          assertArrayEquals(rows.get(p.keys()[i]),
              java.util.Arrays.copyOfRange(p.rows(), i * DIM, (i + 1) * DIM), p.keys()[i]);
        }
      });
      assertEquals(KEYS, seen.size());
      assertTrue(seen.values().stream().allMatch(v -> v == 1));
      // a checkpoint holds both tiers: an uncapped reader sees every row
      settle(engines);
      t.save(dir.resolve("ckpt"), 9);
      EmbeddingTable back = TableClients.loadCheckpoint(dir.resolve("ckpt"), "ck");
      assertEquals(KEYS, back.describe().getCounters().getKeys());
      assertArrayEquals(all, back.find(keys).rows());
      // restore replaces both tiers and demotes down to the cap again
      t.applyGradients(keys, new float[KEYS * DIM], 0f, 3);
      t.findOrInsert("extra");
      assertEquals(KEYS, t.restore(dir.resolve("ckpt")));
      settle(engines);
      assertFalse(t.find("extra").found()[0]);
      assertArrayEquals(all, t.find(keys).rows());
      settle(engines);
      TableCounters after = t.describe().getCounters();
      assertEquals(KEYS, after.getKeys());
      assertTrue(after.getColdKeys() > 700, "demoted again after the restore: " + after);
      // remove deletes a cold key and a hot key
      String cold = null;
      for (String k : keys) {
        if (Integer.parseInt(k.substring(1)) % 50 == 0) {
          cold = k; // read once: LFU's first victims
          break;
        }
      }
      assertEquals(2, t.remove(cold, "k49"));
      assertFalse(t.find(cold).found()[0]);
      assertFalse(t.find("k49").found()[0]);
      assertEquals(KEYS - 2, t.describe().getCounters().getKeys());
    } finally {
      for (AutoCloseable k : keep) {
        k.close();
      }
    }
  }

  @Test
  void aDiskTierWithoutACap_isRefused() {
    try (TableClient c = TableClients.inProcess(dir)) {
      TableException e = assertThrows(TableException.class, () -> c.createTable(
          TableConfigs.builder("nocap", DIM).setDiskTier(true).build()));
      assertTrue(e.getMessage().contains("max_keys or max_bytes"), e.getMessage());
    }
  }

  /**
   * Finds promote rows from disk while inserts of new keys keep the cap's evictions running back
   * to back (each rebuilds the store in memory and demotes its victims): a row promoted into a
   * store that an eviction was rebuilding from a copy taken before was in neither tier after it.
   * Every row of the first 1,000 keys (only ever read) must survive bit for bit.
   */
  @ParameterizedTest
  @ValueSource(ints = {0, 2})
  void findsThatPromote_duringBackToBackEvictions_loseNoRow(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      EmbeddingTable t = c.createTable(config("race", true));
      String[] keys = new String[KEYS];
      for (int i = 0; i < KEYS; i++) {
        keys[i] = "k" + i;
      }
      float[] before = t.findOrInsert(keys);
      settle(engines(c, keep));
      java.util.concurrent.atomic.AtomicReference<Throwable> failed =
          new java.util.concurrent.atomic.AtomicReference<>();
      java.util.concurrent.atomic.AtomicBoolean done =
          new java.util.concurrent.atomic.AtomicBoolean();
      Thread writer = new Thread(() -> {
        try {
          for (int b = 0; b < Integer.getInteger("diskTier.raceBatches", 400); b++) {
            String[] fresh = new String[50];
            for (int i = 0; i < fresh.length; i++) {
              fresh[i] = "n" + b + "_" + i;
            }
            t.findOrInsert(fresh);
          }
        } catch (Throwable e) {
          failed.compareAndSet(null, e);
        } finally {
          done.set(true);
        }
      });
      writer.start();
      Random r = new Random(5);
      int reads = 0;
      while (!done.get() || reads < 20) {
        String[] batch = new String[100];
        for (int i = 0; i < batch.length; i++) {
          batch[i] = keys[r.nextInt(KEYS)];
        }
        t.find(batch);
        reads++;
      }
      writer.join();
      if (failed.get() != null) {
        throw new AssertionError("an insert failed", failed.get());
      }
      settle(engines(c, keep));
      FindResult after = t.find(keys);
      for (int i = 0; i < KEYS; i++) {
        assertTrue(after.found()[i], keys[i] + " was lost (" + reads + " find calls)");
      }
      assertArrayEquals(before, after.rows());
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }
}
