package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.EvictRequest;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.io.TempDir;

/**
 * A slot move of a disk-tier table with an eviction forced at every step (issue 31): after each
 * page of the copy, each catch-up export, the flip, the final export, the merge and the drop, the
 * source (and the destination once it merged) demote most of their rows to the tier, and writes
 * promote some back, so every step meets rows that changed tiers since the step before, instead
 * of relying on a cap's timing. Every moved key ends on the destination only, with every update
 * the source applied; every other key stays on the source, exact.
 */
class SlotMoveEvictionTest {
  private static final int DIM = SlotMapEngineTest.DIM; // its writes: gradient 0.5 per column
  private static final int KEYS = 240;

  @TempDir Path dir;

  private long seq;

  private static ShardEngine shard(int index, Path d) {
    ShardEngine e = new ShardEngine(index, 2, d);
    e.create(TableConfigs.normalize(TableConfigs.builder("t", DIM)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros())
        .setDiskTier(true).setMaxKeys(100_000).build()));
    return e;
  }

  /** Applies gradient 0.5 (every column) once to each key, as one call at {@code epoch}. */
  private void write(ShardEngine e, long epoch, List<String> keys, Map<String, Integer> writes) {
    if (keys.isEmpty()) {
      return;
    }
    e.write(SlotMapEngineTest.write(epoch, ++seq, keys), ShardState::checkWrite);
    for (String k : keys) {
      writes.merge(k, 1, Integer::sum);
    }
  }

  /** Demotes all but {@code keep} of the table's rows to the disk tier, now. */
  private static void evict(ShardEngine e, int keep) {
    e.evict(EvictRequest.newBuilder().setTable("t").setMaxKeys(keep).build());
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3})
  void aDiskTierTableMovesExactly_withAnEvictionAtEveryStep(int seed) {
    Random r = new Random(seed);
    ShardEngine a = shard(0, dir.resolve("a"));
    ShardEngine b = shard(1, dir.resolve("b"));
    try {
      List<String> keys = new ArrayList<>();
      for (int i = 0; keys.size() < KEYS; i++) {
        if (KeyHashing.shardOf("k" + i, 2) == 0) {
          keys.add("k" + i);
        }
      }
      Map<String, Integer> writes = new HashMap<>();
      write(a, 0, keys, writes);
      // the move: shard 0's slots in the lower half of the slot space go to shard 1
      SlotMap before = a.slotMap();
      int half = before.slots() / 2;
      SlotMap after = before.withOwner(0, half, 1, 1);
      int[] ranges = new int[2 * half];
      int n = 0;
      for (int s = 0; s < half; s++) {
        if (before.ownerOfSlot(s) == 0) {
          ranges[n++] = s;
          ranges[n++] = s + 1;
        }
      }
      int[] moving = java.util.Arrays.copyOf(ranges, n);
      List<String> movingKeys = new ArrayList<>();
      List<String> staying = new ArrayList<>();
      for (String k : keys) {
        (after.ownerOf(KeyHashing.hash(k)) == 1 ? movingKeys : staying).add(k);
      }
      assertTrue(movingKeys.size() > KEYS / 4 && staying.size() > KEYS / 4);
      evict(a, 20);
      assertEquals(KEYS - 20, a.get("t").coldKeys().size(), "most rows in the tier");

      // copy, small pages, with an eviction and writes to random keys (hot and cold) after each
      long cursor = 0;
      int pages = 0;
      do {
        SlotMoves.Page p = a.moves().export("t", moving, cursor, 16, false, false);
        b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(p), 0));
        cursor = p.next();
        pages++;
        evict(a, 10 + r.nextInt(30));
        write(a, 0, sample(keys, r, 12), writes);
      } while (cursor != 0);
      assertTrue(pages > 4, "pages: " + pages);
      // catch-up rounds: the same between exports
      for (int round = 0; round < 3; round++) {
        SlotMoves.Page p = a.moves().export("t", moving, 0, 10_000, true, false);
        b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(p), 0));
        evict(a, 10 + r.nextInt(30));
        write(a, 0, sample(keys, r, 12), writes);
      }
      b.moves().prepare();
      // the flip: the source takes no more writes to the moving slots
      a.installSlotMap(after);
      evict(a, 5);
      write(a, 1, sample(staying, r, 12), writes);
      SlotMoves.Page last;
      do {
        last = a.moves().export("t", moving, 0, 10_000, true, true);
        b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(last), 0));
        evict(a, 5);
      } while (last.next() != 0);
      evict(b, 3); // the destination evicts before its merge too
      b.moves().commit(after);
      evict(b, 7);
      write(b, 1, sample(movingKeys, r, 12), writes);
      evict(b, 4);
      a.moves().dropUnowned();
      evict(a, 6);

      for (String k : movingKeys) {
        assertNull(a.get("t").record(k), k + " left on the source");
        check(b, k, writes.get(k));
      }
      for (String k : staying) {
        assertNull(b.get("t").record(k), k + " on the destination");
        check(a, k, writes.get(k));
      }
      assertEquals(movingKeys.size(), b.get("t").size() + b.get("t").coldKeys().size());
    } finally {
      a.close();
      b.close();
    }
  }

  /**
   * A cap's eviction runs off the callers' threads, so it can replace the destination's store
   * between the commit's lookup of the live table and the commit's lock on it; the merge then
   * went into the retired store and the moved rows were gone. Made certain: the commit waits on
   * the lock this thread holds while it runs the eviction (the lock is reentrant).
   */
  @org.junit.jupiter.api.Test
  void aCommitThatMeetsAnEvictionsRebuild_mergesIntoTheNewStore() throws Exception {
    ShardEngine a = shard(0, dir.resolve("a"));
    ShardEngine b = shard(1, dir.resolve("b"));
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors
        .newSingleThreadExecutor();
    try {
      List<String> keys = new ArrayList<>();
      List<String> own = new ArrayList<>(); // the destination's own keys
      for (int i = 0; keys.size() < 60 || own.size() < 20; i++) {
        (KeyHashing.shardOf("k" + i, 2) == 0 ? keys : own).add("k" + i);
      }
      Map<String, Integer> writes = new HashMap<>();
      write(a, 0, keys, writes);
      write(b, 0, own, writes);
      SlotMap after = a.slotMap().withOwner(0, a.slotMap().slots(), 1, 1); // all to shard 1
      int[] moving = {0, after.slots()};
      a.installSlotMap(after);
      SlotMoves.Page p;
      long cursor = 0;
      do {
        p = a.moves().export("t", moving, cursor, 10_000, false, false);
        b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(p), 0));
        cursor = p.next();
      } while (cursor != 0);
      p = a.moves().export("t", moving, 0, 10_000, true, true);
      b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(p), 0));
      TableStore before = b.get("t");
      java.util.concurrent.Future<Long> commit;
      before.quiesce.writeLock().lock(); // as the eviction below will hold it
      try {
        commit = pool.submit(() -> b.moves().commit(after));
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!before.quiesce.hasQueuedThreads()) { // the commit waits for the table's lock
          assertTrue(System.nanoTime() < deadline, "the commit never waited for the lock");
          Thread.sleep(1);
        }
        evict(b, 5);
        assertTrue(before.retired, "the eviction rebuilt the table");
      } finally {
        before.quiesce.writeLock().unlock();
      }
      assertEquals(keys.size(), commit.get(30, java.util.concurrent.TimeUnit.SECONDS));
      for (String k : keys) {
        check(b, k, writes.get(k));
      }
      for (String k : own) {
        check(b, k, writes.get(k));
      }
    } finally {
      pool.shutdownNow();
      a.close();
      b.close();
    }
  }

  private static void check(ShardEngine e, String k, int writes) {
    TableStore.Record rec = e.get("t").record(k); // promotes a cold key
    assertTrue(rec != null, k + " missing on shard " + e.shardIndex());
    for (float v : rec.weights()) {
      assertEquals(-0.5f * writes, v, 0f, k + " on shard " + e.shardIndex());
    }
    assertEquals(writes, rec.updates(), k + "'s updates");
  }

  private static List<String> sample(List<String> keys, Random r, int n) {
    java.util.LinkedHashSet<String> out = new java.util.LinkedHashSet<>();
    while (out.size() < Math.min(n, keys.size())) {
      out.add(keys.get(r.nextInt(keys.size())));
    }
    return new ArrayList<>(out);
  }
}
