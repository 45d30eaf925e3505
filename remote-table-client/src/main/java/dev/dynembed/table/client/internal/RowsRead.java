package dev.dynembed.table.client.internal;


import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.client.spi.Shard;

/**
 * A find, findOrInsert or count of one table, split over the shards: remote shards get each
 * distinct key once (with its occurrence count), and the replies are stitched back in request
 * order. A single in-process shard gets the batch unchanged (the engine de-duplicates and counts
 * itself; there are no bytes to save) and its rows are taken as they are.
 */
final class RowsRead extends ShardCalls.ReadItem<RowsRead.Result> {
  /**
   * @param rows FLOAT [n, dim] in request order, or null when not asked for
   * @param found per key: has a row (find) or is admitted (findOrInsert, count)
   * @param frequencies per key, or null when not asked for
   * @param slots FLOAT [n, slotFloats], or null when not asked for (or no slots)
   * @param updateCounts per key, or null when not asked for
   */
  record Result(float[] rows, boolean[] found, long[] frequencies, float[] slots,
      long[] updateCounts) {}

  private final String table;
  private final int dim;
  private final int slotFloats;
  private final PackedKeys keys;
  private final Shard.InsertMode mode; // null: find
  private final Routing route; // null: the batch goes to shard 0 unchanged
  private final ShardedTable.Traffic traffic;

  /**
   * @param mode null for a find
   * @param direct the batch goes unchanged to a single in-process shard
   */
  RowsRead(String table, int dim, int slotFloats, PackedKeys keys, Shard.InsertMode mode,
      SlotMap map, int numShards, boolean direct, ShardedTable.Traffic traffic) {
    super(map.epoch(), numShards);
    this.traffic = traffic;
    this.table = table;
    this.dim = dim;
    this.slotFloats = slotFloats;
    this.keys = keys;
    this.mode = mode;
    this.route = direct || keys.size() == 0 ? null : new Routing(keys, map, numShards);
  }

  @Override
  Shard.Read request(int shard) {
    if (route == null) {
      return shard != 0 ? null : mode == null ? new Shard.Find(table, keys)
          : new Shard.FindOrInsert(table, keys, null, mode);
    }
    PackedKeys k = route.shardKeys[shard];
    if (k.size() == 0) {
      return null;
    }
    return mode == null ? new Shard.Find(table, k)
        : new Shard.FindOrInsert(table, k, route.occurrences(shard), mode);
  }

  @Override
  Result merge(Object[] replies) {
    for (int s = 0; s < replies.length; s++) { // a table grown since this client opened it
      replies[s] = ShardCalls.narrowed(table, replies[s], dim, slotFloats / dim);
    }
    int n = keys.size();
    boolean wantRows = mode == null || mode.rows();
    boolean wantFreqs = mode != null && mode.frequencies();
    boolean wantSlots = mode != null && mode.slots();
    boolean[] found = new boolean[n];
    if (wantRows || wantSlots) { // a count moves keys, not rows
      traffic.read(route == null ? n : route.dedup.uniqueCount(), (wantRows ? dim : 0)
          + (wantSlots ? slotFloats : 0));
    }
    long[] freqs = wantFreqs ? new long[n] : null;
    long[] counts = wantSlots ? new long[n] : null;
    float[] slots = wantSlots && slotFloats > 0 ? new float[n * slotFloats] : null;
    if (route == null) {
      Shard.RowsReply r = (Shard.RowsReply) replies[0];
      for (int i = 0; i < n; i++) {
        found[i] = r.found(i);
      }
      if (wantFreqs) {
        System.arraycopy(r.frequencies(), 0, freqs, 0, n);
      }
      if (wantSlots) {
        System.arraycopy(r.updateCounts(), 0, counts, 0, n);
        if (slots != null) {
          r.slots().getAll(slots, 0);
        }
      }
      return new Result(wantRows ? r.rows().toArray() : null, found, freqs, slots, counts);
    }
    float[] rows = wantRows ? new float[n * dim] : null;
    for (int i = 0; i < n; i++) {
      int u = route.dedup.uniqueOf(i);
      int p = route.posInShard[u];
      Shard.RowsReply r = (Shard.RowsReply) replies[route.shardOfUnique[u]];
      if (rows != null) {
        r.rows().get(p, rows, i * dim);
      }
      found[i] = r.found(p);
      if (freqs != null) {
        freqs[i] = r.frequencies()[p];
      }
      if (wantSlots) {
        counts[i] = r.updateCounts()[p];
        if (slots != null) {
          r.slots().get(p, slots, i * slotFloats);
        }
      }
    }
    return new Result(rows, found, freqs, slots, counts);
  }
}
