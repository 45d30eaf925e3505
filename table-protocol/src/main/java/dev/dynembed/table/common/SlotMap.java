package dev.dynembed.table.common;

import dev.dynembed.table.v1.SlotRange;
import java.util.Arrays;

/**
 * Which shard owns each key: {@code slot = xxh3(key) mod slots} (unsigned), {@code owner(slot)}
 * from this map (docs/design/0021-slot-moves-proposal.md). Immutable; a change is a new map of a
 * higher epoch.
 *
 * <p>A cluster's slot count is fixed when it is created: {@code 4096 x n0} for its first shard
 * count n0. The implicit map of n0 shards ({@link #implicit}, epoch 0) gives slot s to shard
 * {@code s mod n0}; since n0 divides the slot count, {@code (h mod S) mod n0 = h mod n0}: exactly
 * the routing {@link KeyHashing#shardOf} gives, so nothing written before maps existed moves.
 */
public final class SlotMap {
  /** Slots per shard of the cluster's first shard count. */
  public static final int SLOTS_PER_SHARD = 4096;
  /** Most shards a map can name (owners are stored as shorts). */
  public static final int MAX_SHARDS = Short.MAX_VALUE;
  /** Most shards a cluster starts with (its slot count is 4096 times that: 8 MiB of owners). */
  public static final int MAX_FIRST_SHARDS = 1024;

  private final long epoch;
  private final int numShards;
  private final short[] owner;
  /** One more than the highest shard that owns a slot. */
  private final int inUse;

  private SlotMap(long epoch, int numShards, short[] owner) {
    this.epoch = epoch;
    this.numShards = numShards;
    this.owner = owner;
    int top = -1;
    for (short o : owner) {
      top = Math.max(top, o);
    }
    this.inUse = top + 1;
  }

  /** The map a cluster of {@code n} shards routes by before any map was written (epoch 0). */
  public static SlotMap implicit(int n) {
    if (n < 1 || n > MAX_FIRST_SHARDS) {
      throw TableException.invalid("a cluster starts with 1..%d shards, not %d",
          MAX_FIRST_SHARDS, n);
    }
    short[] o = new short[n * SLOTS_PER_SHARD];
    for (int s = 0; s < o.length; s++) {
      o[s] = (short) (s % n);
    }
    return new SlotMap(0, n, o);
  }

  public long epoch() {
    return epoch;
  }

  /** Shards of the cluster (owners are in [0, numShards); a shard may own no slot). */
  public int numShards() {
    return numShards;
  }

  public int slots() {
    return owner.length;
  }

  /**
   * One more than the highest shard that owns a slot: the shards a client must reach (shards
   * above it were retired or have not been given slots yet).
   */
  public int shardsInUse() {
    return inUse;
  }

  /** The slot of a key's hash ({@link KeyHashing#hash}). */
  public int slotOf(long hash) {
    return (int) Long.remainderUnsigned(hash, owner.length);
  }

  /** The shard that owns a key's hash. */
  public int ownerOf(long hash) {
    return owner[slotOf(hash)];
  }

  /** The shard that owns a slot. */
  public int ownerOfSlot(int slot) {
    return owner[slot];
  }

  /** Slots shard {@code shard} owns. */
  public int slotsOf(int shard) {
    int n = 0;
    for (short o : owner) {
      n += o == shard ? 1 : 0;
    }
    return n;
  }

  /**
   * This map with slots [start, end) given to {@code shard}, at {@code epoch} (higher than this
   * map's); {@code numShards} grows to include the shard.
   */
  public SlotMap withOwner(int start, int end, int shard, long epoch) {
    if (start < 0 || end > owner.length || start > end) {
      throw TableException.invalid("slots [%d, %d) are not within the map's [0, %d)", start, end,
          owner.length);
    }
    if (shard < 0 || shard >= MAX_SHARDS) {
      throw TableException.invalid("shard %d is out of range [0, %d)", shard, MAX_SHARDS);
    }
    checkNewer(epoch);
    short[] o = owner.clone();
    Arrays.fill(o, start, end, (short) shard);
    return new SlotMap(epoch, Math.max(numShards, shard + 1), o);
  }

  /**
   * This map naming {@code numShards} shards (those it did not name own no slot), at {@code
   * epoch}: shards started beside a cluster join its map.
   */
  public SlotMap extended(int numShards, long epoch) {
    if (numShards < this.numShards || numShards > MAX_SHARDS) {
      throw TableException.invalid("a map of %d shards can name %d..%d, not %d", this.numShards,
          this.numShards, MAX_SHARDS, numShards);
    }
    checkNewer(epoch);
    return new SlotMap(epoch, numShards, owner);
  }

  /**
   * This map with every slot {@code from} owns here and {@code to} owns in {@code target} given
   * to {@code to}, at {@code epoch}: one step of a resharding towards {@code target}.
   */
  public SlotMap movedTowards(SlotMap target, int from, int to, long epoch) {
    if (target.slots() != slots()) {
      throw TableException.invalid("maps of %d and %d slots cannot be compared", slots(),
          target.slots());
    }
    checkNewer(epoch);
    short[] o = owner.clone();
    for (int s = 0; s < o.length; s++) {
      if (o[s] == from && target.owner[s] == to) {
        o[s] = (short) to;
      }
    }
    return new SlotMap(epoch, Math.max(numShards, to + 1), o);
  }

  private void checkNewer(long epoch) {
    if (epoch <= this.epoch) {
      throw TableException.invalid("a changed map needs an epoch above %d, not %d", this.epoch,
          epoch);
    }
  }

  /**
   * A map that spreads the slots over {@code n} shards as evenly as the slots allow while moving
   * as few as it can from this map: each shard keeps up to its fair share of the slots it owns
   * (lowest slots first), the rest go to shards below their share. At {@code epoch}.
   */
  public SlotMap rebalanced(int n, long epoch) {
    if (n < 1 || n > MAX_SHARDS) {
      throw TableException.invalid("a slot map needs 1..%d shards, not %d", MAX_SHARDS, n);
    }
    checkNewer(epoch);
    int total = owner.length;
    int[] quota = new int[n];
    for (int i = 0; i < n; i++) {
      quota[i] = total / n + (i < total % n ? 1 : 0);
    }
    short[] o = new short[total];
    Arrays.fill(o, (short) -1);
    for (int s = 0; s < total; s++) {
      int cur = owner[s];
      if (cur < n && quota[cur] > 0) {
        o[s] = (short) cur;
        quota[cur]--;
      }
    }
    int next = 0;
    for (int s = 0; s < total; s++) {
      if (o[s] < 0) {
        while (quota[next] == 0) {
          next++;
        }
        o[s] = (short) next;
        quota[next]--;
      }
    }
    return new SlotMap(epoch, n, o);
  }

  /** The map in run-length form. */
  public dev.dynembed.table.v1.SlotMap toProto() {
    dev.dynembed.table.v1.SlotMap.Builder b = dev.dynembed.table.v1.SlotMap.newBuilder()
        .setEpoch(epoch).setSlots(owner.length).setNumShards(numShards);
    int start = 0;
    for (int s = 1; s <= owner.length; s++) {
      if (s == owner.length || owner[s] != owner[start]) {
        b.addRanges(SlotRange.newBuilder().setStart(start).setEnd(s).setOwner(owner[start]));
        start = s;
      }
    }
    return b.build();
  }

  /** A map from its run-length form, checked whole (a clear error names what is wrong). */
  public static SlotMap fromProto(dev.dynembed.table.v1.SlotMap p) {
    int slots = p.getSlots();
    int n = p.getNumShards();
    if (n < 1 || n > MAX_SHARDS) {
      throw TableException.invalid("slot map: num_shards must be in 1..%d, not %d", MAX_SHARDS,
          Integer.toUnsignedLong(n));
    }
    if (slots < 1 || slots % SLOTS_PER_SHARD != 0 || slots > SLOTS_PER_SHARD * MAX_FIRST_SHARDS) {
      throw TableException.invalid("slot map: slots must be a positive multiple of %d (4096 x"
          + " the cluster's first shard count), not %d", SLOTS_PER_SHARD,
          Integer.toUnsignedLong(slots));
    }
    short[] o = new short[slots];
    int next = 0;
    for (SlotRange r : p.getRangesList()) {
      if (r.getStart() != next || Integer.compareUnsigned(r.getEnd(), r.getStart()) <= 0
          || Integer.compareUnsigned(r.getEnd(), slots) > 0) {
        throw TableException.invalid("slot map: range [%d, %d) does not continue at slot %d"
            + " within [0, %d)", Integer.toUnsignedLong(r.getStart()),
            Integer.toUnsignedLong(r.getEnd()), next, slots);
      }
      if (Integer.compareUnsigned(r.getOwner(), n) >= 0) {
        throw TableException.invalid("slot map: range [%d, %d) names shard %d of %d",
            r.getStart(), r.getEnd(), Integer.toUnsignedLong(r.getOwner()), n);
      }
      Arrays.fill(o, r.getStart(), r.getEnd(), (short) r.getOwner());
      next = r.getEnd();
    }
    if (next != slots) {
      throw TableException.invalid("slot map: its ranges end at slot %d, not at %d", next, slots);
    }
    return new SlotMap(p.getEpoch(), n, o);
  }

  /** Same owners of every slot and same shard count (the epoch aside). */
  public boolean sameOwners(SlotMap other) {
    return numShards == other.numShards && Arrays.equals(owner, other.owner);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof SlotMap m && m.epoch == epoch && sameOwners(m);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(epoch) * 31 + Arrays.hashCode(owner);
  }

  @Override
  public String toString() {
    return "slot map epoch " + epoch + " (" + owner.length + " slots over " + numShards
        + " shards)";
  }
}
