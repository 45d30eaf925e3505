package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.PackedKeys;

/**
 * A find or findOrInsert through a {@link RowCache}: keys whose cached row is fresh enough are
 * answered from the cache when the read is made (a copy, so that a read planned ahead of a step
 * sees the rows as they were then); the others are read from their shards as {@link RowsRead}s
 * of those keys only, sent in its place ({@link #parts}): the keys that enter the cache (or
 * refresh their entry) with their optimizer state, the keys the doorkeeper keeps out without it
 * (as without a cache); the replies are stitched back in request order.
 */
final class CachedRowsRead extends ShardCalls.ReadItem<RowsRead.Result> {
  private final RowCache cache;
  private final String[] keys;
  private final Shard.InsertMode mode; // null: find (nothing is admitted)
  private final float[] rows;
  private final boolean[] found;
  private final float[] slots;
  private final long[] counts;
  private final int[] missAt; // request position of each key read from a shard
  private final RowsRead misses; // with state (or a find); null: none
  private final RowsRead plain; // findOrInsert without state, nothing admitted; null: none
  private final int[] partAt; // per miss j: its index in misses (>= 0) or in plain (-1 - index)
  private final long readAt;
  private final long readSeq;
  private final dev.dynembed.table.common.BatchDedup dedup;
  /** Per distinct key, reads with state: a stale cached copy answers, the read only refreshes. */
  private final boolean[] copied;
  /** Per distinct key read from a shard: whether it may enter the cache (the doorkeeper's say). */
  private final boolean[] admit;
  /** A find whose misses are all stale cached keys: read with state, entries refreshed. */
  private final boolean refresh;

  CachedRowsRead(ShardedTable table, RowCache cache, String[] keys, PackedKeys packed,
      Shard.InsertMode mode) {
    super(table.router().map().epoch(), table.router().shards().size());
    this.cache = cache;
    this.keys = keys;
    this.mode = mode;
    int n = keys.length;
    int dim = cache.dim();
    int sf = cache.slotFloats();
    boolean wantState = mode != null && mode.slots();
    this.rows = new float[n * dim];
    this.found = new boolean[n];
    this.slots = wantState && sf > 0 ? new float[n * sf] : null;
    this.counts = wantState ? new long[n] : null;
    this.readSeq = cache.flushSeq();
    this.readAt = cache.now();
    boolean count = mode != null && mode.count();
    // each distinct key looked up once; its duplicates copy its row
    dev.dynembed.table.common.BatchDedup dedup = dev.dynembed.table.common.BatchDedup.of(packed);
    this.dedup = dedup;
    int u = dedup.uniqueCount();
    int[] occ = new int[u];
    for (int i = 0; i < n; i++) {
      occ[dedup.uniqueOf(i)]++;
    }
    boolean[] hit = new boolean[u];
    boolean[] held = new boolean[u]; // a miss of a cached (stale) key: refreshed, not admitted
    this.copied = counts == null ? null : new boolean[u];
    RowCache.ReadStats stats = new RowCache.ReadStats();
    for (int d = 0; d < u; d++) {
      int i = dedup.firstPosition(d);
      long before = stats.staleCopies;
      long staleBefore = stats.staleMisses;
      hit[d] = cache.serve(keys[i], readAt, count ? occ[d] : 0, rows, i * dim, slots, i * sf,
          counts, i, stats);
      held[d] = stats.staleMisses > staleBefore;
      if (copied != null) {
        copied[d] = stats.staleCopies > before; // answered from the cache, refreshed below
      }
    }
    cache.count(stats);
    int[] miss = new int[n];
    int m = 0;
    for (int i = 0; i < n; i++) {
      int d = dedup.uniqueOf(i);
      if (!hit[d]) {
        miss[m++] = i; // every occurrence: the shard counts each
        continue;
      }
      found[i] = true;
      copyFirst(d, i);
    }
    this.missAt = java.util.Arrays.copyOf(miss, m);
    if (m == 0) {
      this.misses = null;
      this.plain = null;
      this.partAt = null;
      this.admit = null;
      this.refresh = false;
      return;
    }
    this.admit = new boolean[u];
    boolean allHeld = true;
    for (int j = 0; j < m; j++) { // a stale entry is cached already; a new key must pass
      int d = dedup.uniqueOf(missAt[j]);
      if (dedup.firstPosition(d) == missAt[j]) {
        allHeld &= held[d];
        // a read with state (made ahead of a pipelined step) admits at the first miss: the
        // step's own write may go out before its reply comes, and only a cached key's write is
        // applied to the entry, so an entry admitted from that reply would lack it (PipelineTest,
        // read-my-writes bit for bit, failed 3 runs in 5 with the doorkeeper on these reads)
        admit[d] = held[d] || mode != null
            && (counts != null || cache.secondSighting(packed.hash(missAt[j])));
      }
    }
    // a findOrInsert without state reads the keys the doorkeeper keeps out without their slots
    // (half the bytes), as it would without a cache; the rest come with their state
    PackedKeys.Builder b = new PackedKeys.Builder(m);
    PackedKeys.Builder bp = new PackedKeys.Builder(0);
    this.partAt = new int[m];
    int inMisses = 0;
    int inPlain = 0;
    for (int j = 0; j < m; j++) { // duplicates kept: the shard counts each occurrence
      if (mode != null && counts == null && !admit[dedup.uniqueOf(missAt[j])]) {
        bp.add(packed, missAt[j]);
        partAt[j] = -1 - inPlain++;
      } else {
        b.add(packed, missAt[j]);
        partAt[j] = inMisses++;
      }
    }
    this.plain = inPlain == 0 ? null
        : table.rowsRead(bp.build(), new Shard.InsertMode(mode.count(), true, false, false));
    // a find whose misses are all keys this process caches (stale) reads them with state and
    // refreshes their entries, so that it returns the rows with this process's unsent updates on
    // them (a trainer reads its own writes); they exist on the shards, so nothing is created. A
    // find that also misses uncached keys stays a find (it must not create them): its stale
    // cached keys get the shards' rows (docs/design/0022-row-cache.md, "Not done")
    this.refresh = mode == null && allHeld;
    Shard.InsertMode fetch = mode != null ? new Shard.InsertMode(mode.count(), true, false, true)
        : refresh ? new Shard.InsertMode(false, true, false, true) : null;
    this.misses = inMisses == 0 ? null : table.rowsRead(b.build(), fetch);
  }

  /** Gives position i (a duplicate of distinct key d) what d's first position holds. */
  private void copyFirst(int d, int i) {
    int first = dedup.firstPosition(d);
    if (first == i) {
      return;
    }
    int dim = cache.dim();
    int sf = cache.slotFloats();
    System.arraycopy(rows, first * dim, rows, i * dim, dim);
    if (counts != null) {
      counts[i] = counts[first];
      if (slots != null) {
        System.arraycopy(slots, first * sf, slots, i * sf, sf);
      }
    }
  }

  @Override
  Shard.Read request(int shard) {
    return null; // its parts are sent instead
  }

  @Override
  java.util.List<RowsRead> parts() {
    return misses == null ? plain == null ? java.util.List.of() : java.util.List.of(plain)
        : plain == null ? java.util.List.of(misses) : java.util.List.of(misses, plain);
  }

  /** Called once the parts completed ({@code replies} is null). */
  @Override
  RowsRead.Result merge(Object[] replies) {
    if (missAt.length > 0) {
      RowsRead.Result stated = misses == null ? null : misses.result.join();
      RowsRead.Result unstated = plain == null ? null : plain.result.join();
      int dim = cache.dim();
      int sf = cache.slotFloats();
      boolean[] admitted = new boolean[dedup.uniqueCount()];
      for (int jj = 0; jj < missAt.length; jj++) {
        int i = missAt[jj];
        int d = dedup.uniqueOf(i);
        if (partAt[jj] < 0) { // kept out by the doorkeeper: the shard's row, as without a cache
          int j = -1 - partAt[jj];
          System.arraycopy(unstated.rows(), j * dim, rows, i * dim, dim);
          found[i] = unstated.found()[j];
          continue;
        }
        int j = partAt[jj];
        RowsRead.Result r = stated;
        if (copied != null && copied[d]) { // answered by the stale copy: only refresh the entry
          found[i] = true;
          if (dedup.firstPosition(d) == i) {
            cache.admit(keys[i], r.rows(), j * dim, r.slots(), j * sf, r.updateCounts()[j],
                readAt, readSeq, null, 0);
          } else {
            copyFirst(d, i);
          }
          continue;
        }
        System.arraycopy(r.rows(), j * dim, rows, i * dim, dim);
        found[i] = r.found()[j];
        if (counts != null) {
          counts[i] = r.updateCounts()[j];
          if (slots != null) {
            System.arraycopy(r.slots(), j * sf, slots, i * sf, sf);
          }
        }
        if (admitted[d]) { // a duplicate: the row its first occurrence took
          copyFirst(d, i);
          continue;
        }
        admitted[d] = true;
        if (found[i] && admit[d] && (mode != null || refresh)) { // replayed by its op (0007)
          cache.admit(keys[i], r.rows(), j * dim, r.slots(), j * sf, r.updateCounts()[j],
              readAt, readSeq, counts == null ? rows : null, i * dim);
        }
      }
    }
    return new RowsRead.Result(rows, found, null, slots, counts);
  }
}
