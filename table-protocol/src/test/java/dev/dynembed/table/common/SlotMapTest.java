package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.SlotRange;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SlotMapTest {
  /** The implicit map routes every key as xxh3 mod n does: nothing written before maps moves. */
  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 5, 7, 16, 1000})
  void theImplicitMapRoutesAsModN(int n) {
    SlotMap m = SlotMap.implicit(n);
    assertEquals(0, m.epoch());
    assertEquals(4096 * n, m.slots());
    SplittableRandom r = new SplittableRandom(n);
    for (int i = 0; i < 200_000; i++) {
      long h = r.nextLong(); // hashes of both signs: the slot is unsigned
      assertEquals(KeyHashing.shardOf(h, n), m.ownerOf(h));
    }
    for (int i = 0; i < 10_000; i++) {
      String key = "key-" + i;
      assertEquals(KeyHashing.shardOf(key, n), m.ownerOf(KeyHashing.hash(key)));
    }
  }

  @Test
  void runLengthFormRoundTrips() {
    SlotMap m = SlotMap.implicit(3).withOwner(100, 4000, 3, 1).withOwner(9000, 9001, 0, 2);
    SlotMap back = SlotMap.fromProto(m.toProto());
    assertEquals(m, back);
    assertEquals(4, back.numShards());
    assertEquals(3, back.ownerOfSlot(100));
    assertEquals(3, back.ownerOfSlot(3999));
    assertEquals(4000 % 3, back.ownerOfSlot(4000));
    assertEquals(2, back.epoch());
    // the implicit map interleaves (a run per slot); moves to a new shard merge runs
    SlotMap even = SlotMap.implicit(2).rebalanced(3, 1);
    assertEquals(8192, SlotMap.implicit(2).toProto().getRangesCount());
    assertTrue(even.toProto().getRangesCount() < 8192, "" + even.toProto().getRangesCount());
  }

  @Test
  void rebalancingMovesOnlyWhatItMustAndEvensTheShares() {
    SlotMap two = SlotMap.implicit(2);
    SlotMap three = two.rebalanced(3, 1);
    int moved = 0;
    for (int s = 0; s < three.slots(); s++) {
      if (three.ownerOfSlot(s) != two.ownerOfSlot(s)) {
        moved++;
        assertEquals(2, three.ownerOfSlot(s), "only the new shard receives slots");
      }
    }
    assertEquals(8192 / 3, moved); // a third of the slots, the least a third shard can take
    for (int shard = 0; shard < 3; shard++) {
      assertTrue(Math.abs(three.slotsOf(shard) - 8192 / 3) <= 1, "shard " + shard);
    }
    SlotMap back = three.rebalanced(2, 2);
    assertEquals(4096, back.slotsOf(0));
    assertEquals(4096, back.slotsOf(1));
    assertEquals(0, back.slotsOf(2));
    for (int s = 0; s < back.slots(); s++) {
      if (three.ownerOfSlot(s) < 2) {
        assertEquals(three.ownerOfSlot(s), back.ownerOfSlot(s), "kept slots stay");
      }
    }
  }

  @Test
  void aClusterExtendedToNewShardsMovesTowardsItsTargetOnePairAtATime() {
    SlotMap two = SlotMap.implicit(2);
    SlotMap joined = two.extended(3, 1);
    assertEquals(3, joined.numShards());
    assertEquals(0, joined.slotsOf(2));
    assertTrue(joined.sameOwners(two.extended(3, 5)), "owners unchanged");
    SlotMap target = joined.rebalanced(3, 2);
    SlotMap first = joined.movedTowards(target, 0, 2, 2);
    for (int s = 0; s < first.slots(); s++) {
      int want = joined.ownerOfSlot(s) == 0 && target.ownerOfSlot(s) == 2 ? 2
          : joined.ownerOfSlot(s);
      assertEquals(want, first.ownerOfSlot(s), "slot " + s);
    }
    assertTrue(first.movedTowards(target, 1, 2, 3).sameOwners(target));
    TableException e = assertThrows(TableException.class, () -> joined.extended(2, 2));
    assertTrue(e.getMessage().contains("can name 3.."), e.getMessage());
    e = assertThrows(TableException.class, () -> joined.movedTowards(target, 0, 2, 1));
    assertTrue(e.getMessage().contains("epoch above 1"), e.getMessage());
  }

  @Test
  void badMapsAreRefusedWithTheProblemNamed() {
    dev.dynembed.table.v1.SlotMap good = SlotMap.implicit(2).rebalanced(2, 1).toProto();
    TableException e = assertThrows(TableException.class, () -> SlotMap.fromProto(
        good.toBuilder().setSlots(5000).build()));
    assertTrue(e.getMessage().contains("slots must be a positive multiple of 4096"),
        e.getMessage());
    e = assertThrows(TableException.class, () -> SlotMap.fromProto(good.toBuilder()
        .setRanges(0, SlotRange.newBuilder().setStart(0).setEnd(10).setOwner(7)).build()));
    assertTrue(e.getMessage().contains("names shard 7 of 2"), e.getMessage());
    e = assertThrows(TableException.class, () -> SlotMap.fromProto(good.toBuilder()
        .removeRanges(good.getRangesCount() - 1).build()));
    assertTrue(e.getMessage().contains("its ranges end at slot"), e.getMessage());
    e = assertThrows(TableException.class, () -> SlotMap.fromProto(good.toBuilder()
        .setRanges(1, good.getRanges(1).toBuilder().setStart(5)).build()));
    assertTrue(e.getMessage().contains("does not continue"), e.getMessage());
    e = assertThrows(TableException.class, () -> SlotMap.implicit(2).withOwner(0, 10, 1, 0));
    assertTrue(e.getMessage().contains("epoch above 0"), e.getMessage());
  }

  @Test
  void aMovedRefusalCarriesItsEpoch() {
    TableException e = TableException.moved(7, 5, 1);
    assertTrue(e.isMoved());
    assertEquals(7, TableException.movedEpoch("Read shard 1: " + e.getMessage()));
    assertEquals(-1, TableException.movedEpoch("some other failure"));
  }
}
