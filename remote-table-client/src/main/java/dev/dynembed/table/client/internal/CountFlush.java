package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;

/**
 * The reads a row cache served, counted on the shards: each distinct key once with its
 * occurrences (a findOrInsert without rows), as the shards would have counted those reads.
 */
final class CountFlush extends ShardCalls.ReadItem<Void> {
  private static final Shard.InsertMode COUNT = new Shard.InsertMode(true, false, false);
  private final String table;
  private final Routing route;
  private final long[] occurrences;

  /** @param occurrences per key of {@code keys} (keys may repeat: their counts add up) */
  CountFlush(String table, PackedKeys keys, long[] occurrences, SlotMap map, int numShards) {
    super(map.epoch(), numShards);
    this.table = table;
    this.route = new Routing(keys, map, numShards);
    this.occurrences = occurrences;
  }

  @Override
  Shard.Read request(int shard) {
    PackedKeys k = route.shardKeys[shard];
    if (k.size() == 0) {
      return null;
    }
    long[] perUnique = new long[route.dedup.uniqueCount()];
    for (int i = 0; i < occurrences.length; i++) {
      perUnique[route.dedup.uniqueOf(i)] += occurrences[i];
    }
    int[] occ = new int[k.size()];
    for (int j = 0; j < occ.length; j++) {
      occ[j] = (int) Math.min(Integer.MAX_VALUE, perUnique[route.shardUniques[shard][j]]);
    }
    return new Shard.FindOrInsert(table, k, occ, COUNT);
  }

  @Override
  Void merge(Object[] replies) {
    return null;
  }
}
