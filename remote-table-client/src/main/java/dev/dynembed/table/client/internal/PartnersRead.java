package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.SlotMap;

/** Draws of anchors' partners, each anchor asked of the shard that owns it. */
final class PartnersRead extends ShardCalls.ReadItem<Shard.PartnersReply> {
  private final Shard.Partners whole;
  private final PairSplit split;

  PartnersRead(Shard.Partners whole, SlotMap map, int numShards) {
    super(map.epoch(), numShards);
    this.whole = whole;
    this.split = PairSplit.of(whole.anchors(), map, numShards);
  }

  @Override
  Shard.Read request(int shard) {
    return split.partners(whole, shard);
  }

  @Override
  Shard.PartnersReply merge(Object[] replies) {
    return split.join(replies);
  }
}
