package dev.dynembed.table.engine;

import static dev.dynembed.table.engine.Fixtures.assertError;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResult;
import dev.dynembed.table.v1.WriteRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A shard's slot map (docs/design/0021-slot-moves-proposal.md): calls routed by another epoch are
 * refused whole before anything is applied, keys are checked against the map, and the map is
 * kept in the state directory.
 */
class SlotMapEngineTest {
  static final int DIM = 4;

  @TempDir Path dir;

  /** Shard 0 of 2 with table t (SGD, rate 1). */
  private ShardEngine shard0() {
    return createTable(new ShardEngine(0, 2, dir));
  }

  /** Creates table t (SGD, rate 1) on {@code e}. */
  private static ShardEngine createTable(ShardEngine e) {
    e.create(TableConfigs.normalize(TableConfigs.builder("t", DIM)
        .setOptimizer(TableConfigs.sgd(1f)).build()));
    return e;
  }

  /** Keys of shard {@code shard} of 2 under the implicit map, with distinct slots. */
  private static List<String> keysOf(int shard, int count) {
    List<String> out = new ArrayList<>();
    for (int i = 0; out.size() < count; i++) {
      if (KeyHashing.shardOf("k" + i, 2) == shard) {
        out.add("k" + i);
      }
    }
    return out;
  }

  /** A write of gradient 0.5 (every column) to each key, call {@code seq} of client 7. */
  static WriteRequest write(long epoch, long seq, List<String> keys) {
    float[] g = new float[keys.size() * DIM];
    java.util.Arrays.fill(g, 0.5f);
    ApplyGradientsRequest item = ApplyGradientsRequest.newBuilder().setTable("t")
        .setKeys(PackedKeys.of(keys.toArray(String[]::new)).toProto())
        .setGradients(Rows.encode(g)).build();
    return WriteRequest.newBuilder().addItems(item).setMapEpoch(epoch)
        .setCallId(CallId.newBuilder().setClient(7).setSeq(seq)).build();
  }

  /** A read call of counting find_or_insert items, one per key list. */
  private static List<ReadResult> count(ShardEngine e, long epoch, List<List<String>> items) {
    return count(e, epoch, 0, items);
  }

  /** As {@link #count(ShardEngine, long, List)}, as call {@code seq} of client 7 (0: none). */
  private static List<ReadResult> count(ShardEngine e, long epoch, long seq,
      List<List<String>> items) {
    ReadRequest.Builder b = ReadRequest.newBuilder().setMapEpoch(epoch);
    if (seq > 0) {
      b.setCallId(CallId.newBuilder().setClient(7).setSeq(seq));
    }
    for (List<String> keys : items) {
      b.addItems(ReadItem.newBuilder().setFindOrInsert(FindOrInsertRequest.newBuilder()
          .setTable("t").setKeys(PackedKeys.of(keys.toArray(String[]::new)).toProto())
          .setOmitRows(true)));
    }
    return e.read(b.build(), (item, resent) -> {
      FindOrInsertRequest f = item.getFindOrInsert();
      e.get("t").findOrInsert(PackedKeys.fromProto(f.getKeys(), 256, "keys"), null, !resent,
          (float[]) null, null, null);
      return ReadResult.getDefaultInstance();
    }).getResultsList();
  }

  /** Slot of key {@code k} given to shard {@code to} at {@code epoch}. */
  private static SlotMap moveSlotOf(SlotMap m, String k, int to, long epoch) {
    int slot = m.slotOf(KeyHashing.hash(k));
    return m.withOwner(slot, slot + 1, to, epoch);
  }

  @Test
  void aCallRoutedByAnOlderMapIsRefusedWholeBeforeAnythingIsApplied() {
    ShardEngine e = shard0();
    List<String> mine = keysOf(0, 3);
    List<String> theirs = keysOf(1, 1);
    assertEquals(0, e.slotMap().epoch());
    assertEquals(SlotMap.implicit(2), e.slotMap());
    e.write(write(0, 1, mine), ShardState::checkWrite);

    // shard 1's slot of one key comes to shard 0: its keys route here from epoch 1 on
    SlotMap m1 = moveSlotOf(e.slotMap(), theirs.get(0), 0, 1);
    assertEquals(m1, e.installSlotMap(m1));
    assertEquals(m1, e.installSlotMap(SlotMap.fromProto(m1.toProto())), "idempotent");

    float[] before = Fixtures.rows(e.get("t"), mine.get(0));
    long countBefore = e.get("t").record(mine.get(0)).frequency();
    // a write at epoch 0 naming only keys still here is refused whole: MOVED with the new epoch
    TableException moved = assertError(ErrorCode.FAILED_PRECONDITION, "MOVED(epoch 1)",
        () -> e.write(write(0, 2, mine), ShardState::checkWrite));
    assertTrue(moved.isMoved());
    // so is a read whose first item alone would have been fine
    assertError(ErrorCode.FAILED_PRECONDITION, "MOVED(epoch 1)",
        () -> count(e, 0, List.of(mine, theirs)));
    assertArrayEquals(before, Fixtures.rows(e.get("t"), mine.get(0)), "nothing applied");
    assertEquals(countBefore + 1, e.get("t").record(mine.get(0)).frequency(),
        "nothing counted (the +1 is this check's own findOrInsert)");
    assertNull(e.get("t").record(theirs.get(0)));

    // resent at the new epoch with the same call id: applied, once
    List<String> now = new ArrayList<>(mine);
    now.add(theirs.get(0));
    e.write(write(1, 2, now), ShardState::checkWrite);
    e.write(write(1, 2, now), ShardState::checkWrite);
    assertEquals(before[0] - 0.5f, Fixtures.rows(e.get("t"), mine.get(0))[0], 1e-6);
    assertEquals(1, e.get("t").record(theirs.get(0)).updates());

    // a call routed by a map newer than the shard's: the shard is behind, the client resends
    assertError(ErrorCode.UNAVAILABLE, "older than the call's 2",
        () -> e.write(write(2, 3, mine), ShardState::checkWrite));
  }

  @Test
  void aCountingReadAppliedBeforeTheMapChangedIsRefusedAsMovedAfterApplied() {
    ShardEngine e = shard0();
    List<String> mine = keysOf(0, 2);
    count(e, 0, 1, List.of(mine));
    count(e, 0, 1, List.of(mine)); // its reply lost, resent at the same epoch: counted once
    assertEquals(1, e.get("t").record(mine.get(0)).frequency());

    // the slot of mine[1] leaves; the same call resent by the old epoch is refused (the keys
    // route elsewhere now) and says it was applied here: the client resends without counting
    e.installSlotMap(moveSlotOf(e.slotMap(), mine.get(1), 1, 1));
    TableException again = assertError(ErrorCode.FAILED_PRECONDITION, "MOVED(epoch 1)",
        () -> count(e, 0, 1, List.of(mine)));
    assertTrue(again.isMoved());
    assertTrue(again.isMovedAfterApplied(), again.getMessage());
    assertEquals(1, TableException.movedEpoch(again.getMessage()));
    // a call never applied here gets the plain refusal
    TableException fresh = assertError(ErrorCode.FAILED_PRECONDITION, "MOVED(epoch 1)",
        () -> count(e, 0, 2, List.of(mine)));
    assertFalse(fresh.isMovedAfterApplied(), fresh.getMessage());
    assertEquals(1, e.get("t").record(mine.get(0)).frequency(), "nothing counted");
  }

  @Test
  void keysAreCheckedAgainstTheMap() {
    ShardEngine e = shard0();
    String given = keysOf(0, 1).get(0);
    String taken = keysOf(1, 1).get(0);
    // one of shard 0's slots goes to shard 1, one of shard 1's comes here
    SlotMap m = moveSlotOf(moveSlotOf(e.slotMap(), given, 1, 1), taken, 0, 2);
    e.installSlotMap(m);
    assertError(ErrorCode.INVALID_ARGUMENT, "key '" + given + "' belongs to shard 1 of 2",
        () -> e.write(write(2, 1, List.of(given)), ShardState::checkWrite));
    assertEquals(1, e.write(write(2, 2, List.of(taken)), ShardState::checkWrite)[0]);
  }

  @Test
  void theMapIsKeptInTheStateDirectoryAndOnlyNewerMapsReplaceIt() throws Exception {
    Path file = dir.resolve("slot-map");
    ShardEngine e = shard0();
    e.keepSlotMapIn(file);
    SlotMap m2 = SlotMap.implicit(2).rebalanced(3, 2);
    e.installSlotMap(m2);
    assertTrue(Files.exists(file));

    ShardEngine again = new ShardEngine(0, 2, dir);
    again.keepSlotMapIn(file);
    assertEquals(m2, again.slotMap());

    assertError(ErrorCode.FAILED_PRECONDITION, "newer than the 1 offered",
        () -> again.installSlotMap(SlotMap.implicit(2).rebalanced(3, 1)));
    assertError(ErrorCode.FAILED_PRECONDITION, "another slot map at epoch 2",
        () -> again.installSlotMap(SlotMap.implicit(2).withOwner(0, 1, 1, 2)));
    assertError(ErrorCode.INVALID_ARGUMENT, "slot count is fixed",
        () -> again.installSlotMap(SlotMap.implicit(3).rebalanced(3, 3)));
    assertError(ErrorCode.INVALID_ARGUMENT, "cannot be installed on shard 2",
        () -> new ShardEngine(2, 3, dir).installSlotMap(SlotMap.implicit(3).rebalanced(2, 1)));
    assertEquals(m2, again.slotMap(), "a refused map changes nothing");

    Files.write(file, new byte[] {1, 2, 3});
    java.io.IOException bad = org.junit.jupiter.api.Assertions.assertThrows(
        java.io.IOException.class, () -> new ShardEngine(0, 2, dir).keepSlotMapIn(file));
    assertTrue(bad.getMessage().contains("cannot be read"), bad.getMessage());
  }

  /** A shard with a log and snapshots under {@code dir/state}, its map kept there too. */
  private ShardState durable(ShardEngine e) throws Exception {
    Path states = dir.resolve("state");
    Path root = ShardState.root(states, e.shardIndex());
    Files.createDirectories(root);
    e.keepSlotMapIn(root.resolve("slot-map"));
    return ShardState.recover(e, states, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { });
  }

  /**
   * A source restarted after its flip, before the destination committed (and before
   * DropUnowned), still holds the rows it gave away, from its snapshot and from its log: running
   * the resharding again copies them from there. Recovery used to drop them by the map.
   */
  @Test
  void aSourceRestartedBetweenItsFlipAndTheCommitStillHoldsTheRowsItGaveAway() throws Exception {
    ShardEngine a = new ShardEngine(0, 2, dir.resolve("a"));
    ShardState sa = durable(a);
    createTable(a);
    List<String> mine = keysOf(0, 40);
    String inSnapshot = mine.get(0);
    String inLog = mine.get(1);
    a.write(write(0, 1, mine), ShardState::checkWrite);
    int s0 = a.slotMap().slotOf(KeyHashing.hash(inSnapshot));
    int s1 = a.slotMap().slotOf(KeyHashing.hash(inLog));
    SlotMap flipped = a.slotMap().withOwner(s0, s0 + 1, 1, 1);
    a.installSlotMap(flipped); // the flip: the slot of inSnapshot is shard 1's
    sa.snapshot(); // a snapshot cut after the flip holds the row and the new map
    TableStore.Record before = a.get("t").record(inSnapshot);
    SlotMap flipped2 = flipped.withOwner(s1, s1 + 1, 1, 2);
    a.write(write(1, 2, List.of(inLog)), ShardState::checkWrite); // logged after the snapshot
    a.installSlotMap(flipped2);
    TableStore.Record logged = a.get("t").record(inLog);
    sa.close(false);

    ShardEngine a2 = new ShardEngine(0, 2, dir.resolve("a"));
    ShardState sa2 = durable(a2);
    assertEquals(flipped2, a2.slotMap());
    assertEquals(before, a2.get("t").record(inSnapshot));
    assertEquals(logged, a2.get("t").record(inLog));
    assertEquals(40, a2.get("t").size());
    // a rerun's copy finds them; DropUnowned (once the destination committed) removes them
    SlotMoves.Page page = a2.moves().export("t", new int[] {s0, s0 + 1}, 0, 1000, false, false);
    assertEquals(List.of(inSnapshot), List.of(page.keys().toStrings()));
    assertEquals(2, a2.moves().dropUnowned());
    assertNull(a2.get("t").record(inSnapshot));
    assertEquals(38, a2.get("t").size());
    sa2.close(false);
  }

  @Test
  void movedRowsSurviveRestartsOnBothSides() throws Exception {
    // shard 0 holds keys of a slot that moves to shard 1 (rows written, so logged)
    ShardEngine a = new ShardEngine(0, 2, dir.resolve("a"));
    ShardState sa = durable(a);
    createTable(a);
    List<String> mine = keysOf(0, 40);
    a.write(write(0, 1, mine), ShardState::checkWrite);
    String moving = mine.get(0);
    int slot = a.slotMap().slotOf(KeyHashing.hash(moving));
    SlotMap next = a.slotMap().withOwner(slot, slot + 1, 1, 1);
    SlotMoves.Page page = a.moves().export("t", new int[] {slot, slot + 1}, 0, 1000, false,
        false);
    assertEquals(List.of(moving), List.of(page.keys().toStrings()));
    a.write(write(0, 2, List.of(moving)), ShardState::checkWrite); // after the copy: dirty

    // shard 1 (its own directory) stages the rows, writes them before the flip (prepare), takes
    // the dirty record, commits, and is stopped without a snapshot
    Path other = dir.resolve("b");
    ShardEngine b = new ShardEngine(1, 2, other);
    Path statesB = other.resolve("state");
    Files.createDirectories(ShardState.root(statesB, 1));
    b.keepSlotMapIn(ShardState.root(statesB, 1).resolve("slot-map"));
    ShardState sb = ShardState.recover(b, statesB, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { });
    b.create(a.get("t").config());
    b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(page), 0));
    assertNull(b.get("t").record(moving), "staged rows are invisible");
    assertEquals(1, b.moves().prepare(), "the staged row is written before the flip");
    Path walB = ShardState.root(statesB, 1).resolve("wal");
    assertTrue(Files.isDirectory(walB.resolve("import-pending")));
    SlotMoves.Page dirty = a.moves().export("t", new int[] {slot, slot + 1}, 0, 1000, true,
        false);
    assertEquals(List.of(moving), List.of(dirty.keys().toStrings()));
    b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(dirty), 0));
    a.installSlotMap(next);
    SlotMoves.Page last = a.moves().export("t", new int[] {slot, slot + 1}, 0, 1000, true, true);
    assertEquals(0, last.keys().size(), "no write touched the slot since the dirty export");
    assertNull(b.get("t").record(moving), "staged rows are invisible");
    assertEquals(2, b.moves().commit(next), "both layers merged, the later one last");
    assertFalse(Files.exists(walB.resolve("import-pending")));
    try (var listed = Files.list(walB)) {
      assertEquals(1, listed.filter(f -> f.getFileName().toString().startsWith("import-"))
          .count(), "the commit's record names one directory of imported rows");
    }
    TableStore.Record moved = b.get("t").record(moving);
    assertEquals(a.get("t").record(moving), moved);
    // a checkpoint cut before the source drops the row holds it once: on its new shard
    Files.createDirectories(dir.resolve("a"));
    CheckpointFile fa = a.save("t", "ckpt", 5);
    CheckpointFile fb = b.save("t", "ckpt", 5);
    TableStore whole = CheckpointIo.read(dir.resolve("a").resolve("ckpt"), List.of(fa), "t", 0, 1);
    assertNull(whole.record(moving));
    assertEquals(39, whole.size());
    assertEquals(moved, CheckpointIo.read(other.resolve("ckpt"), List.of(fb), "t", 0, 1)
        .record(moving));
    assertEquals(1, a.moves().dropUnowned());
    assertNull(a.get("t").record(moving));
    sa.close(false);
    sb.close(false);

    // both restart from their logs and snapshots: the row lives on shard 1 only
    ShardEngine a2 = new ShardEngine(0, 2, dir.resolve("a"));
    ShardState sa2 = durable(a2);
    assertEquals(next, a2.slotMap());
    assertNull(a2.get("t").record(moving));
    assertEquals(39, a2.get("t").size());
    ShardEngine b2 = new ShardEngine(1, 2, other);
    b2.keepSlotMapIn(ShardState.root(statesB, 1).resolve("slot-map"));
    ShardState sb2 = ShardState.recover(b2, statesB, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { });
    assertEquals(next, b2.slotMap());
    assertEquals(moved, b2.get("t").record(moving));
    // and the moved key takes writes on its new shard, at the new epoch
    assertEquals(1, b2.write(write(1, 9, List.of(moving)), ShardState::checkWrite)[0]);
    // a snapshot covers the import: its files go
    sb2.snapshot();
    try (var listed = Files.list(walB)) {
      assertEquals(0, listed.filter(f -> f.getFileName().toString().startsWith("import-"))
          .count());
    }
    sa2.close(false);
    sb2.close(false);
    ShardEngine b3 = new ShardEngine(1, 2, other);
    b3.keepSlotMapIn(ShardState.root(statesB, 1).resolve("slot-map"));
    ShardState sb3 = ShardState.recover(b3, statesB, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { });
    assertEquals(b2.get("t").record(moving), b3.get("t").record(moving));
    sb3.close(false);
  }
  @Test
  void aKeyEvictedAtTheSourceAfterItWasCopiedIsDroppedAtTheDestination() {
    ShardEngine a = new ShardEngine(0, 2, dir.resolve("ea"));
    ShardEngine b = new ShardEngine(1, 2, dir.resolve("eb"));
    dev.dynembed.table.v1.TableConfig cfg = TableConfigs.normalize(TableConfigs.builder("t", DIM)
        .setOptimizer(TableConfigs.sgd(1f)).build());
    a.create(cfg);
    b.create(cfg);
    List<String> mine = keysOf(0, 40);
    a.write(write(0, 1, mine), ShardState::checkWrite);
    String gone = mine.get(0);
    int slot = a.slotMap().slotOf(KeyHashing.hash(gone));
    int[] range = {slot, slot + 1};
    SlotMap next = a.slotMap().withOwner(slot, slot + 1, 1, 1);
    SlotMoves.Page page = a.moves().export("t", range, 0, 1000, false, false);
    assertEquals(List.of(gone), List.of(page.keys().toStrings()));
    b.moves().importRows("t", page);
    // evicted at the source after the copy: the destination must not keep its copy
    a.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable("t")
        .setKeys(PackedKeys.of(gone).toProto()).build());
    SlotMoves.Page dirty = a.moves().export("t", range, 0, 1000, true, false);
    assertEquals(0, dirty.keys().size());
    assertEquals(0, dirty.removed().size(), "removals are sent once the slots are given away");
    a.installSlotMap(next);
    SlotMoves.Page last = a.moves().export("t", range, 0, 1000, true, true);
    assertEquals(List.of(gone), List.of(last.removed().toStrings()));
    b.moves().importRows("t", SlotMoves.fromProto(SlotMoves.toProto(last), 0));
    // a driver that sent more records than the shard holds (it restarted meanwhile): refused
    assertError(ErrorCode.FAILED_PRECONDITION, "received 1 records of this slot import, but 3",
        () -> b.moves().commit(next, 3));
    assertEquals(0, b.slotMap().epoch(), "nothing installed");
    assertEquals(0, b.get("t").size(), "nothing merged");
    assertEquals(1, b.moves().commit(next, 1));
    assertNull(b.get("t").record(gone), "the evicted key came back at the destination");
    assertEquals(0, b.get("t").size());
  }
}
