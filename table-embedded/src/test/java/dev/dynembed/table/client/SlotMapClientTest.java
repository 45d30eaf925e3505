package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.internal.Futures;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Clients that route by an old slot map (docs/design/0021-slot-moves-proposal.md): the shards
 * refuse their calls as MOVED before applying anything, the client reads the new map and sends
 * each refused item's keys to their new owners, and every answer is the one an unsharded table
 * gives: rows, counts, pooled vectors, sampling probabilities, updates applied once. The slots
 * that move here hold no rows yet when the map changes (a map change alone moves nothing; moving
 * rows with their slots is the next step of the design), so every key lives where the new map
 * says from its first write on.
 */
class SlotMapClientTest {
  @TempDir Path dir;

  private static TableConfig config() {
    // SGD at rate 1 and power-of-two gradients: updates are exact, whatever their order
    return TableConfigs.builder("t", 8).setOptimizer(TableConfigs.sgd(1f))
        .setInitializer(TableConfigs.uniform(-1f, 1f, 3)).build();
  }

  /** Shard 0's first 4,096 slots go to shard 1 and shard 1's to shard 0, at epoch 1. */
  private static SlotMap swapped() {
    dev.dynembed.table.v1.SlotMap.Builder b = dev.dynembed.table.v1.SlotMap.newBuilder()
        .setEpoch(1).setSlots(8192).setNumShards(2);
    for (int s = 0; s < 8192; s++) {
      b.addRanges(dev.dynembed.table.v1.SlotRange.newBuilder().setStart(s).setEnd(s + 1)
          .setOwner(s < MOVED_SLOTS ? 1 - s % 2 : s % 2));
    }
    return SlotMap.fromProto(b.build());
  }

  /** Slots below this change owner. */
  private static final int MOVED_SLOTS = 4096;

  private static boolean inMovedSlots(String key) {
    return SlotMap.implicit(2).slotOf(KeyHashing.hash(key)) < MOVED_SLOTS;
  }

  /** Zipf-ish keys; with {@code settled}, only keys whose slots do not move. */
  private static String[] batch(Random rnd, int n, boolean settled) {
    String[] keys = new String[n];
    for (int i = 0; i < n; ) {
      String k = "w" + (int) Math.floor(Math.exp(rnd.nextDouble() * Math.log(3000)));
      if (!settled || !inMovedSlots(k)) {
        keys[i++] = k;
      }
    }
    return keys;
  }

  /** The same calls on both tables; rows, counts and probabilities must agree. */
  private static void sameCalls(EmbeddingTable sharded, EmbeddingTable oracle, long seed,
      int steps, boolean settled) {
    Random rnd = new Random(seed);
    for (int step = 1; step <= steps; step++) {
      String[] keys = batch(rnd, 400, settled);
      float[] a = sharded.findOrInsert(keys);
      assertArrayEquals(oracle.findOrInsert(keys), a, "step " + step);
      float[] g = new float[a.length];
      for (int i = 0; i < g.length; i++) {
        g[i] = (rnd.nextBoolean() ? 0.5f : -0.25f);
      }
      assertEquals(oracle.applyGradients(keys, g, 0f, step),
          sharded.applyGradients(keys, g, 0f, step));
      // pooled: 4 bags over the batch's first 40 keys
      int[] sizes = {10, 10, 10, 10};
      int[] idx = new int[40];
      for (int i = 0; i < 40; i++) {
        idx[i] = i;
      }
      String[] pk = java.util.Arrays.copyOf(keys, 40);
      KeyBags bags = KeyBags.of(sizes, idx, null, null, 40);
      assertArrayEquals(oracle.pooled(pk, bags, true, true), sharded.pooled(pk, bags, true, true),
          1e-5f);
      float[] pg = new float[4 * 8];
      java.util.Arrays.fill(pg, 0.125f);
      sharded.applyPooledGradients(pk, bags, pg, 0f, step);
      oracle.applyPooledGradients(pk, bags, pg, 0f, step);
    }
    String[] probe = batch(new Random(seed + 1), 200, settled);
    FindResult fa = sharded.find(probe);
    FindResult fo = oracle.find(probe);
    assertArrayEquals(fo.rows(), fa.rows());
    // a sharded client splits draws by the masses the shards reported with its previous sample
    // (one call behind while counts change): the second of two calls sees the current ones
    sharded.sample(probe, 0, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 1);
    SampleResult sa = sharded.sample(probe, 0, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 1);
    SampleResult so = oracle.sample(probe, 0, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 1);
    KeyCounts ca = sharded.count(probe, false);
    KeyCounts co = oracle.count(probe, false);
    assertArrayEquals(co.frequencies(), ca.frequencies(), "frequencies");
    for (int i = 0; i < probe.length; i++) {
      assertEquals(so.probability()[i], sa.probability()[i], 1e-9 * so.probability()[i],
          probe[i]);
    }
  }

  @Test
  void aClientOnAnOldMapIsRedirectedAndEveryCallIsAppliedOnce() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("shards"));
        TableClient client = cluster.client();
        TableClient oracleClient = TableClients.inProcess(dir.resolve("oracle"))) {
      EmbeddingTable t = client.createTable(config());
      EmbeddingTable oracle = oracleClient.createTable(config());
      sameCalls(t, oracle, 1, 3, true);

      // the map changes under the client: the slots that move hold no rows yet
      SlotMap m = swapped();
      for (int s = 0; s < 2; s++) {
        for (String k : cluster.engine(s).get("t").keys()) {
          assertTrue(!inMovedSlots(k), k);
        }
      }
      for (int s = 0; s < 2; s++) {
        cluster.engine(s).installSlotMap(m);
      }
      sameCalls(t, oracle, 1, 3, false); // the same keys again, and new ones in moved slots
      // every key lives where the new map says, and only there
      int inMoved = 0;
      for (int s = 0; s < 2; s++) {
        for (String k : cluster.engine(s).get("t").keys()) {
          assertEquals(s, m.ownerOf(KeyHashing.hash(k)), k);
          inMoved += m.slotOf(KeyHashing.hash(k)) < 4096 ? 1 : 0;
        }
      }
      assertTrue(inMoved > 100, "keys written into moved slots: " + inMoved);
      assertEquals(m, ((ShardedTableClient) client).router().map(), "the client follows");

      // a batch of several reads routed by the old map, from a second client
      try (TableClient stale = cluster.client()) {
        EmbeddingTable t2 = stale.openTable("t");
        String[] keys = batch(new Random(9), 300, false);
        TableReads reads = new TableReads();
        var rows = reads.findOrInsert(t2, keys, false);
        var found = reads.find(t2, keys);
        var drawn = reads.sampleDistinct(t2, keys, 50, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 5);
        reads.submit().join();
        assertArrayEquals(oracle.findOrInsert(keys, false), rows.join());
        assertArrayEquals(oracle.find(keys).rows(), found.join().rows());
        SampleResult want = oracle.sample(keys, 0, SamplerKind.UNIGRAM_SAMPLER, 0.75f, 1);
        for (int i = 0; i < keys.length; i++) {
          assertEquals(want.probability()[i], drawn.join().positiveProbability()[i],
              1e-9 * want.probability()[i], keys[i]);
        }
        assertEquals(50, drawn.join().drawIndex().length);
      }
    }
  }

  @Test
  void theShardsAnswerTheirMapAndRefuseStaleOnes() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("shards"));
        TableClient client = cluster.client()) {
      Shard s0 = ((ShardedTableClient) client).shards().get(0);
      assertEquals(SlotMap.implicit(2), SlotMap.fromProto(Futures.await(s0.slotMap())));
      SlotMap m = SlotMap.implicit(2).rebalanced(2, 3).withOwner(0, 8, 1, 4);
      assertEquals(m, SlotMap.fromProto(Futures.await(s0.installSlotMap(m.toProto()))));
      TableException e = org.junit.jupiter.api.Assertions.assertThrows(TableException.class,
          () -> Futures.await(s0.installSlotMap(SlotMap.implicit(2).rebalanced(2, 2)
              .toProto())));
      assertTrue(e.getMessage().contains("newer than the 2 offered"), e.getMessage());
      e = org.junit.jupiter.api.Assertions.assertThrows(TableException.class,
          () -> Futures.await(s0.installSlotMap(m.toProto().toBuilder().setSlots(4096)
              .build())));
      assertTrue(e.getMessage().contains("its ranges end at slot")
          || e.getMessage().contains("range"), e.getMessage());
      // the client refreshes to the newest map any shard has
      assertEquals(m, ((ShardedTableClient) client).router().refresh(4));
    }
  }
}
