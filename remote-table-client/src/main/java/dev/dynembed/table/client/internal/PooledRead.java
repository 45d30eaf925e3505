package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.client.spi.Shard;

/**
 * A pooled lookup of one table, split over the shards (docs/design/0011-pooled-lookups.md): each
 * shard gets its distinct keys and every bag with only the entries of those keys, pools its rows
 * into one partial vector per bag, and the client adds the partials. What crosses the wire back is
 * bags x dim values per shard instead of a row per distinct key.
 */
final class PooledRead extends ShardCalls.ReadItem<float[]> {
  private final String table;
  private final int dim;
  private final int bags;
  private final boolean insert;
  private final boolean count;
  private final PackedKeys[] shardKeys;
  private final KeyBags[] shardBags;

  PooledRead(String table, int dim, PackedKeys keys, KeyBags bags, boolean insert, boolean count,
      SlotMap map, int numShards) {
    super(map.epoch(), numShards);
    this.table = table;
    this.dim = dim;
    this.bags = bags.bags();
    this.insert = insert;
    this.count = count;
    Routing route = new Routing(keys, map, numShards);
    this.shardKeys = route.shardKeys;
    this.shardBags = route.split(bags);
  }

  @Override
  Shard.Read request(int shard) {
    if (shardKeys[shard].size() == 0) {
      return null;
    }
    return new Shard.Pooled(table, shardKeys[shard], shardBags[shard], insert, count);
  }

  @Override
  float[] merge(Object[] replies) {
    return sum(table, replies, bags, dim);
  }

  /** The shards' partial pooled vectors ({@link Shard.PooledReply}; nulls skipped) added up. */
  static float[] sum(String table, Object[] replies, int bags, int dim) {
    float[] out = new float[bags * dim];
    float[] part = new float[bags * dim];
    for (Object o : replies) {
      if (o == null) {
        continue;
      }
      // a table grown since this client opened it: the old columns of the pooled vectors
      Shard.PooledReply r = (Shard.PooledReply) ShardCalls.narrowed(table, o, dim, 0);
      if (r.pooled().size() != bags) {
        throw new IllegalStateException("a shard answered " + r.pooled().size()
            + " pooled rows for " + bags + " bags");
      }
      r.pooled().getAll(part, 0);
      for (int i = 0; i < out.length; i++) {
        out[i] += part[i];
      }
    }
    return out;
  }
}
