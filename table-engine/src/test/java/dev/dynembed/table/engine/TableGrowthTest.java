package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.KeyPolicy;
import dev.dynembed.table.v1.WriteRequest;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A table grown to a larger dim: old columns, slots and metadata exact; new columns what a fresh
 * row of the key at the new width holds, new slot columns what a new row's slots start at;
 * admission counts kept; the grow is logged, so a restart from the log (and from a snapshot
 * taken after it) holds the grown table; bad grows are refused by name and change nothing.
 */
class TableGrowthTest {
  @TempDir Path dir;

  private static final String[] KEYS = {"a", "b", "c", "мир", "e", "f", "g", "h"};

  private static TableConfig config(int dim) {
    return TableConfigs.builder("g", dim)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.25f, 0f).toBuilder()
            .setKeyPolicy(KeyPolicy.newBuilder().setKeepStats(true)))
        .setInitializer(TableConfigs.normal(0f, 0.1f, 7)).setMinCount(2).build();
  }

  /** Steps through the engine's command path (logged): a counting read, then the gradients. */
  private static void train(ShardEngine e, int steps, long seed) {
    Random r = new Random(seed);
    int dim = e.get("g").dim;
    for (int s = 1; s <= steps; s++) {
      String[] k = new String[4];
      for (int i = 0; i < k.length; i++) {
        k[i] = KEYS[r.nextInt(KEYS.length)];
      }
      Fixtures.countedRead(e, "g", k, null);
      float[] g = new float[k.length * dim];
      for (int i = 0; i < g.length; i++) {
        g[i] = (float) r.nextGaussian();
      }
      e.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
          .setTable("g").setKeys(PackedKeys.of(k).toProto()).setGradients(Rows.encode(g))
          .setStep(s)).build(), ShardState::checkWrite);
    }
  }

  private ShardState durable(ShardEngine e) throws Exception {
    Path states = dir.resolve("state");
    Files.createDirectories(ShardState.root(states, e.shardIndex()));
    return ShardState.recover(e, states, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { });
  }

  @Test
  void grownRows_keepTheirColumns_andTakeAFreshRowsNewColumns_throughALogReplay()
      throws Exception {
    ShardEngine e = new ShardEngine(0, 1, dir);
    ShardState state = durable(e);
    TableStore t = e.create(config(4));
    train(e, 30, 1);
    Fixtures.countedRead(e, "g", new String[] {"rare"}, null); // counted once: not admitted
    java.util.Map<String, TableStore.Record> before = new java.util.HashMap<>();
    for (String k : KEYS) {
      before.put(k, t.record(k));
    }
    dev.dynembed.table.v1.InitializerConfig wider = TableConfigs.normal(0f, 0.2f, 11);
    TableStore grown = e.grow("g", 6, wider); // new columns, new keys: another initializer
    assertEquals(6, grown.dim);
    assertEquals(6, e.get("g").config().getDim());
    assertEquals(wider, e.get("g").config().getInitializer());
    assertSame(grown, e.grow("g", 6, wider), "a resent grow changes nothing");
    assertSame(grown, e.grow("g", 6), "nor does one to the table's own dim");
    assertEquals(ErrorCode.INVALID_ARGUMENT, assertThrows(TableException.class,
        () -> e.grow("g", 6, TableConfigs.zeros())).code());
    TableStore fresh = new ShardEngine(0, 1, dir.resolve("fresh"))
        .create(config(6).toBuilder().setMinCount(0).setInitializer(wider).build());
    float[] freshRows = new float[KEYS.length * 6];
    fresh.findOrInsert(PackedKeys.of(KEYS), null, freshRows);
    float[] initialSlots = new float[6];
    Arrays.fill(initialSlots, 0.25f);
    for (int i = 0; i < KEYS.length; i++) {
      TableStore.Record old = before.get(KEYS[i]);
      TableStore.Record now = grown.record(KEYS[i]);
      float[] w = now.weights();
      assertArrayEquals(old.weights(), Arrays.copyOf(w, 4), KEYS[i]);
      assertArrayEquals(Arrays.copyOfRange(freshRows, i * 6 + 4, i * 6 + 6),
          Arrays.copyOfRange(w, 4, 6), KEYS[i] + ": new columns as a fresh row's");
      float[] acc = now.slots()[0];
      assertArrayEquals(old.slots()[0], Arrays.copyOf(acc, 4));
      assertArrayEquals(new float[] {0.25f, 0.25f}, Arrays.copyOfRange(acc, 4, 6));
      float[] stats = now.slots()[1];
      assertArrayEquals(old.slots()[1], Arrays.copyOf(stats, 4), "statistics kept");
      assertArrayEquals(new float[2], Arrays.copyOfRange(stats, 4, 6));
      assertEquals(old.frequency(), now.frequency());
      assertEquals(old.updates(), now.updates());
      assertEquals(old.lastStep(), now.lastStep());
    }
    assertEquals(java.util.Map.of(PackedKeys.of("rare").hash(0), 1L), grown.pendingCounts());
    train(e, 10, 2); // trains at the new width
    java.util.Map<String, TableStore.Record> after = new java.util.HashMap<>();
    for (String k : KEYS) {
      after.put(k, grown.record(k));
    }
    // a follower applies the primary's records (create, writes, grow, writes) as they come
    Fixtures.Follower follower = Fixtures.follow(dir.resolve("follower"), state.walDirectory());
    for (String k : KEYS) {
      assertEquals(after.get(k), follower.engine().get("g").record(k), k + " on a follower");
    }
    follower.state().close(false);
    state.crash();

    ShardEngine again = new ShardEngine(0, 1, dir);
    ShardState replayed = durable(again); // create, writes, grow, writes: from the log
    for (String k : KEYS) {
      assertEquals(after.get(k), again.get("g").record(k), k + " after a replay");
    }
    assertEquals(grown.pendingCounts(), again.get("g").pendingCounts());
    replayed.close(true); // a snapshot of the grown table
    ShardEngine third = new ShardEngine(0, 1, dir);
    durable(third).close(false);
    assertEquals(6, third.get("g").dim);
    for (String k : KEYS) {
      assertEquals(after.get(k), third.get("g").record(k), k + " from the snapshot");
    }
  }

  /**
   * A grow's new_columns: the held rows' new columns from it (zeros here, and a uniform draw as
   * word2vec's output table takes), new keys still from the table's initializer; the log's record
   * (the request) replays alike; an invalid new_columns is refused by name, nothing changed.
   */
  @Test
  void newColumns_startTheHeldRowsNewColumns_newKeysFromTheInitializer_throughALogReplay()
      throws Exception {
    ShardEngine e = new ShardEngine(0, 1, dir);
    ShardState state = durable(e);
    e.create(config(4));
    train(e, 20, 4);
    TableStore t = e.get("g");
    java.util.Map<String, float[]> before = new java.util.HashMap<>();
    for (String k : KEYS) {
      before.put(k, t.record(k).weights());
    }
    TableException bad = assertThrows(TableException.class, () -> e.grow(
        dev.dynembed.table.v1.GrowTableRequest.newBuilder().setTable("g").setDim(6)
            .setNewColumns(TableConfigs.uniform(1f, -1f, 3)).build()));
    assertEquals(ErrorCode.INVALID_ARGUMENT, bad.code());
    assertTrue(bad.getMessage().contains("new_columns"), bad.getMessage());
    assertSame(t, e.get("g"));
    TableStore grown = e.grow(dev.dynembed.table.v1.GrowTableRequest.newBuilder().setTable("g")
        .setDim(6).setNewColumns(TableConfigs.zeros()).build());
    assertEquals(config(4).getInitializer(), grown.config().getInitializer(),
        "new_columns is not the table's initializer");
    for (String k : KEYS) {
      assertArrayEquals(Arrays.copyOf(before.get(k), 6), grown.record(k).weights(), k);
    }
    float[] newKey = new float[6];
    grown.findOrInsert(PackedKeys.of("later"), null, newKey); // counted once: pending
    grown.findOrInsert(PackedKeys.of("later"), null, newKey);
    TableStore fresh = new ShardEngine(0, 1, dir.resolve("fresh")).create(config(6).toBuilder()
        .setMinCount(0).build());
    float[] freshRow = new float[6];
    fresh.findOrInsert(PackedKeys.of("later"), null, freshRow);
    assertArrayEquals(freshRow, newKey, "a new key: the initializer's row at the new width");
    dev.dynembed.table.v1.InitializerConfig u = TableConfigs.uniform(-0.01f, 0.01f, 9);
    TableStore wider = e.grow(dev.dynembed.table.v1.GrowTableRequest.newBuilder().setTable("g")
        .setDim(8).setNewColumns(u).build());
    TableStore ref = new ShardEngine(0, 1, dir.resolve("ref")).create(config(8).toBuilder()
        .setMinCount(0).setInitializer(u).build());
    for (String k : KEYS) {
      float[] w = wider.record(k).weights();
      float[] r = new float[8];
      ref.findOrInsert(PackedKeys.of(k), null, r);
      assertArrayEquals(Arrays.copyOf(before.get(k), 6), Arrays.copyOf(w, 6), k);
      assertArrayEquals(Arrays.copyOfRange(r, 6, 8), Arrays.copyOfRange(w, 6, 8),
          k + ": new columns as new_columns gives the key");
    }
    java.util.Map<String, TableStore.Record> after = new java.util.HashMap<>();
    for (String k : KEYS) {
      after.put(k, wider.record(k));
    }
    state.crash();
    ShardEngine again = new ShardEngine(0, 1, dir);
    durable(again).close(false);
    for (String k : KEYS) {
      assertEquals(after.get(k), again.get("g").record(k), k + " after a replay");
    }
  }

  /**
   * A disk-tier table with most of its rows on disk grows: the cold rows are rewritten at the new
   * width as the hot ones are (old columns, slots and metadata kept; new columns a fresh row's
   * of the new initializer), and a restart from the log (whose replay demotes and grows again)
   * and a snapshot taken after it hold the same rows.
   */
  @Test
  void aDiskTierTable_growsTheRowsOnDiskToo_throughALogReplayAndASnapshot() throws Exception {
    ShardEngine e = new ShardEngine(0, 1, dir);
    ShardState state = durable(e);
    e.create(config(4).toBuilder().setMinCount(0).setDiskTier(true).setMaxKeys(100_000)
        .build());
    train(e, 30, 4);
    java.util.Map<String, TableStore.Record> before = Fixtures.snapshot(e.get("g"));
    e.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable("g").setMaxKeys(3).build());
    assertEquals(KEYS.length - 3, e.get("g").coldKeys().size(), "rows on disk");
    dev.dynembed.table.v1.InitializerConfig wider = TableConfigs.normal(0f, 0.2f, 11);
    TableStore grown = e.grow("g", 6, wider);
    assertEquals(KEYS.length - 3, grown.coldKeys().size(), "still on disk after the grow");
    java.util.Map<String, TableStore.Record> after = promoted(grown);
    RowInitializer init = new RowInitializer(wider);
    for (String k : KEYS) {
      TableStore.Record old = before.get(k);
      TableStore.Record now = after.get(k);
      float[] fresh = new float[6];
      init.fill(PackedKeys.of(k).hash(0), fresh, 0, 6);
      assertArrayEquals(old.weights(), Arrays.copyOf(now.weights(), 4), k);
      assertArrayEquals(Arrays.copyOfRange(fresh, 4, 6), Arrays.copyOfRange(now.weights(), 4, 6),
          k + ": new columns");
      assertArrayEquals(old.slots()[0], Arrays.copyOf(now.slots()[0], 4), k);
      assertArrayEquals(new float[] {0.25f, 0.25f}, Arrays.copyOfRange(now.slots()[0], 4, 6));
      assertArrayEquals(old.slots()[1], Arrays.copyOf(now.slots()[1], 4), k + ": statistics");
      assertEquals(old.frequency(), now.frequency(), k);
      assertEquals(old.updates(), now.updates(), k);
    }
    state.crash();

    ShardEngine again = new ShardEngine(0, 1, dir);
    ShardState replayed = durable(again); // create, writes, evict, grow: from the log
    assertEquals(KEYS.length - 3, again.get("g").coldKeys().size(), "on disk after the replay");
    assertEquals(after, promoted(again.get("g")), "after a replay");
    replayed.close(true);
    ShardEngine third = new ShardEngine(0, 1, dir);
    durable(third).close(false);
    assertEquals(after, promoted(third.get("g")), "from the snapshot");
  }

  /** Every key's record, the rows on disk promoted back to memory first. */
  private static java.util.Map<String, TableStore.Record> promoted(TableStore t) {
    t.find(PackedKeys.of(KEYS), new float[KEYS.length * t.dim], new byte[1]);
    assertEquals(0, t.coldKeys().size(), "every row back in memory");
    return Fixtures.snapshot(t);
  }

  @Test
  void badGrows_areRefusedByName_andChangeNothing() {
    ShardEngine e = new ShardEngine(0, 1, dir);
    TableStore t = e.create(config(4));
    train(e, 5, 3);
    TableException smaller = assertThrows(TableException.class, () -> e.grow("g", 3));
    assertEquals(ErrorCode.INVALID_ARGUMENT, smaller.code());
    assertEquals("table 'g' has dim 4: it can grow to a dim in [4, 4096], not 3",
        smaller.getMessage());
    assertThrows(TableException.class, () -> e.grow("g", 4097));
    assertEquals(ErrorCode.NOT_FOUND,
        assertThrows(TableException.class, () -> e.grow("nope", 8)).code());
    assertSame(t, e.get("g"));
    e.setMemoryBudget(e.bytesInUse() + 1024);
    TableException budget = assertThrows(TableException.class, () -> e.grow("g", 4096));
    assertEquals(ErrorCode.RESOURCE_EXHAUSTED, budget.code());
    assertSame(t, e.get("g"));
  }
}
