package dev.dynembed.table.engine;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.TableConfig;
import java.util.concurrent.locks.StampedLock;

/**
 * The key index of a {@link TableStore}: 64 segments of linear-probing {@code long[]} (32-bit
 * hash tag | row id + 1 per entry, one word), each guarded by its own {@link StampedLock};
 * segment, slot and tag come from {@code mix(xxh3(key))}, so the bits used by {@code shard = hash
 * mod n} do not skew them. Also the lock-free lookup, the cache warming of a batch's keys and the
 * store's memory accounting. The middle layer of the store (see {@link StorePages}).
 */
abstract class StoreIndex extends StorePages {
  static final int SEGMENT_BITS = 6;
  final Segment[] segments = new Segment[1 << SEGMENT_BITS];

  StoreIndex(TableConfig config, int shardIndex, int numShards) {
    super(config, shardIndex, numShards);
    for (int i = 0; i < segments.length; i++) {
      segments[i] = new Segment();
    }
  }


  // ---------------------------------------------------------------- index

  static final class Segment {
    final StampedLock lock = new StampedLock();
    /** Replaced whole on growth; entries are written once (empty to full) and never moved. */
    volatile long[] slots = new long[16];
    int size;
  }

  /**
   * An index entry: the high 32 bits of {@code mix(hash)} as a tag (they also choose the slot,
   * and the top 6 of them the segment), the row id + 1 in the low 32 bits; 0 is empty. Tag and
   * row share one word, so a probe costs one cache miss, and growth needs no rehash.
   */
  static long entry(int tag, int row) {
    return ((long) tag << 32) | (row + 1L);
  }

  static int tagOf(long m) {
    return (int) (m >>> 32);
  }

  /**
   * Row id of key i in memory, or -1 (the disk tier is not consulted). Lock-free in the common
   * case: an optimistic read of the segment (plain loads, then {@code validate}), so the cache
   * misses of consecutive keys overlap instead of being serialized by a lock's fence; it falls
   * back to the read lock if an insert raced.
   */
  int lookupHot(PackedKeys keys, int i) {
    long m = KeyHashing.mix(keys.hash(i));
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    long stamp = s.lock.tryOptimisticRead();
    if (stamp != 0) {
      int row = probe(s.slots, tagOf(m), keys, i);
      if (s.lock.validate(stamp)) {
        return row;
      }
    }
    stamp = s.lock.readLock();
    try {
      return probe(s.slots, tagOf(m), keys, i);
    } finally {
      s.lock.unlockRead(stamp);
    }
  }

  /** Keys per {@link #warm} pass: their cache lines (~7 per key) fit in L2 together. */
  static final int WARM_CHUNK = 128;

  /**
   * Brings the cache lines that looking up keys [from, to) will touch (index slot, key record,
   * key bytes, row) into the cache, one kind at a time over the whole chunk: each pass's loads
   * are independent of each other, so the core overlaps their misses, where a key-by-key lookup
   * walks a chain of four dependent misses per key (slot, then record, then key bytes, then
   * row) that out-of-order execution can hardly overlap across keys. Plain, racy reads: the
   * result is only a cache state; {@link #lookup} still decides, validated, what a key's row is.
   */
  void warm(PackedKeys keys, int from, int to) {
    int len = to - from;
    long[] refs = warmRefs.get();
    long sink = 0;
    for (int j = 0; j < len; j++) { // 1: the index slot of each key (its first probe)
      long m = KeyHashing.mix(keys.hash(from + j));
      long[] slots = segments[(int) (m >>> (64 - SEGMENT_BITS))].slots;
      long e = slots[tagOf(m) & (slots.length - 1)];
      refs[j] = tagOf(e) == tagOf(m) ? (int) e - 1 : -1; // candidate row (0 entry: -1)
    }
    long[][] mp = metaPages;
    float[][] rp = rowPages;
    for (int j = 0; j < len; j++) { // 2: the candidate row's key record, and the row itself
      int row = (int) refs[j];
      if (row >= 0 && (row >>> pageShift) < mp.length && (row >>> pageShift) < rp.length) {
        refs[j] = mp[row >>> pageShift][(row & pageMask) * META + M_KEYREF];
        float[] page = rp[row >>> pageShift];
        int base = (row & pageMask) * rowFloats;
        sink += Float.floatToRawIntBits(page[base]) + Float.floatToRawIntBits(page[base + dim - 1]);
      } else {
        refs[j] = 0;
      }
    }
    byte[][] kp = keyPages;
    for (int j = 0; j < len; j++) { // 3: the key bytes the lookup compares
      long ref = refs[j];
      if (ref > 0) {
        long off = ref >>> 16;
        int kpage = (int) (off / KEY_PAGE_BYTES);
        if (kpage < kp.length) {
          sink += kp[kpage][(int) (off % KEY_PAGE_BYTES)];
        }
      }
    }
    warmSink = sink; // keeps the loads from being removed as dead code
  }

  final ThreadLocal<long[]> warmRefs = ThreadLocal.withInitial(() -> new long[WARM_CHUNK]);
  @SuppressWarnings("unused")
  long warmSink;

  /**
   * Linear probe. May run without the lock (see {@link #lookup}): it gives up after one lap and
   * treats anything half-written as a miss; the caller's {@code validate} discards such results.
   */
  int probe(long[] slots, int tag, PackedKeys keys, int i) {
    int mask = slots.length - 1;
    int slot = tag & mask;
    for (int n = 0; n <= mask; n++) {
      long e = slots[slot];
      if (e == 0) {
        return -1;
      }
      if ((int) (e >>> 32) == tag && keyEquals((int) e - 1, keys, i)) {
        return (int) e - 1;
      }
      slot = (slot + 1) & mask;
    }
    return -1;
  }

  /**
   * Grows the segment's index now if one more entry would need it, so that the {@link #insert}
   * that follows a row's publication never allocates: a row published but missing from the index
   * (an OutOfMemoryError in between) would be seen by scans and checkpoints but never by lookups.
   */
  static void reserveSlot(Segment s) {
    if ((s.size + 1) * 4 > s.slots.length * 3) {
      grow(s);
    }
  }

  /** Adds an entry; the caller has {@link #reserveSlot reserved} room for it. */
  void insert(Segment s, int tag, int row) {
    long[] slots = s.slots;
    int mask = slots.length - 1;
    int slot = tag & mask;
    while (slots[slot] != 0) {
      slot = (slot + 1) & mask;
    }
    slots[slot] = entry(tag, row);
    s.size++;
  }

  static void grow(Segment s) {
    long[] old = s.slots;
    long[] t = new long[old.length * 2];
    int mask = t.length - 1;
    for (long e : old) {
      if (e != 0) {
        int slot = (int) (e >>> 32) & mask;
        while (t[slot] != 0) {
          slot = (slot + 1) & mask;
        }
        t[slot] = e;
      }
    }
    s.slots = t;
  }

  // ---------------------------------------------------------------- stats

  /**
   * Heap bytes held by the store: pages, key arena, index arrays, and the counts of keys awaiting
   * admission (the exact map's entries, estimated, or the sketch's counters).
   */
  public long bytesUsed() {
    long b = admissionBytes() + bookkeepingBytes();
    for (float[] p : rowPages) {
      b += 16 + 4L * p.length;
    }
    for (long[] p : metaPages) {
      b += 16 + 8L * p.length;
    }
    for (byte[] p : keyPages) {
      b += 16 + p.length;
    }
    for (Segment s : segments) {
      long stamp = s.lock.readLock();
      try {
        b += 32 + 16 + 8L * s.slots.length;
      } finally {
        s.lock.unlockRead(stamp);
      }
    }
    return b;
  }

  /** Bytes of an admission count waiting in the store's exact map (a boxed map entry). */
  static final int PENDING_BYTES = 96;
  /** Index bytes per key (a {@code long} slot at load <= 3/4, with doubling slack). */
  static final int INDEX_BYTES = 21;

  /**
   * What the store holds, estimated in O(1) for admission control: rows, slots, metadata, key
   * bytes, index and pending counts (within a page of {@link #bytesUsed}).
   */
  public long bytesEstimate() {
    long n = numRows;
    return n * (4L * rowFloats + 8L * META + INDEX_BYTES) + keyBytes
        + admissionBytes();
  }

  /** The most {@code keys} new keys of {@code keyBytes} bytes in all can add. */
  public long bytesForNewKeys(long keys, long keyBytes) {
    long perKey = admitsOnFirstSight() ? 4L * rowFloats + 8L * META + INDEX_BYTES : PENDING_BYTES
        + 4L * rowFloats + 8L * META + INDEX_BYTES;
    return keys * perKey + keyBytes;
  }

  /** Live bytes, without the unused tail of the last pages: the figure that scales with keys. */
  public long bytesPerKeyLive() {
    int n = numRows;
    if (n == 0) {
      return 0;
    }
    long index = 0;
    for (Segment s : segments) {
      long stamp = s.lock.readLock();
      try {
        index += 8L * s.slots.length;
      } finally {
        s.lock.unlockRead(stamp);
      }
    }
    return (4L * rowFloats * n + 8L * META * n + keyBytes + index) / n;
  }

  /** Bytes of the counts of keys awaiting admission (exact map entries or the sketch). */
  abstract long admissionBytes();

  /** Heap of the store's other per-row bookkeeping (the Redis tier's write-behind marks). */
  abstract long bookkeepingBytes();

  /** Whether a new key gets a row on first sight (min_count <= 1), not an admission count. */
  abstract boolean admitsOnFirstSight();

  /**
   * Inserts key i, absent from segment {@code s}, with a whole record (row and slots) and its
   * metadata: a restored or promoted row. The caller holds the segment's write lock or is the
   * store's only user; the caller adds the frequency to the table's total.
   *
   * @return the row
   */
  int place(Segment s, long m, PackedKeys keys, int i, float[] record, int recOff,
      long freq, long step, long upd) {
    reserveSlot(s);
    int row = allocate(keys.bytes(), keys.offset(i), keys.length(i));
    System.arraycopy(record, recOff, rowPages[row >>> pageShift], rowBase(row), rowFloats);
    long[] meta = metaPages[row >>> pageShift];
    int mo = (row & pageMask) * META;
    meta[mo + M_FREQ] = freq;
    meta[mo + M_STEP] = step;
    meta[mo + M_UPDATES] = upd;
    publish(row);
    insert(s, tagOf(m), row);
    return row;
  }
}
