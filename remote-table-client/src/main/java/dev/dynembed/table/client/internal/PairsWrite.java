package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;

/** One table's report of co-occurring pairs, split over the shards that own the anchors. */
final class PairsWrite extends ShardCalls.WriteItem {
  private final String table;
  private final PackedKeys partners;
  private final int[] counts;
  private final long step;
  private final PairSplit split;

  PairsWrite(String table, PackedKeys anchors, PackedKeys partners, int[] counts, long step,
      SlotMap map, int numShards) {
    super(map.epoch(), numShards);
    this.table = table;
    this.partners = partners;
    this.counts = counts;
    this.step = step;
    this.split = PairSplit.of(anchors, map, numShards);
  }

  @Override
  Shard.Write request(int shard) {
    return split.pairs(table, partners, counts, step, shard);
  }
}
