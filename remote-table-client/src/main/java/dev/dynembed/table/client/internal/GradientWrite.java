package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.client.spi.Shard;

/**
 * One table's gradients, split over the shards: summed per distinct key, routed, and sent in the
 * shards' key order. Routed batches are checked whole here first (everything a shard could
 * refuse), so that no shard applies a part of a batch another refuses; a single in-process shard
 * gets the batch unchanged and checks it whole itself.
 */
final class GradientWrite extends ShardCalls.WriteItem {
  private final String table;
  private final int dim;
  private final PackedKeys keys;
  private final float[] gradients;
  private final float learningRate;
  private final long step;
  private final Routing route; // null: the batch goes to shard 0 unchanged

  /** @param direct the batch goes unchanged to a single in-process shard */
  GradientWrite(TableConfig config, PackedKeys keys, float[] gradients, float learningRate,
      long step, SlotMap map, int numShards, boolean direct, ShardedTable.Traffic traffic) {
    super(map.epoch(), numShards);
    this.table = config.getName();
    this.dim = config.getDim();
    this.keys = keys;
    this.gradients = gradients;
    this.learningRate = learningRate;
    this.step = step;
    if (direct || keys.size() == 0) {
      this.route = null;
      traffic.written(keys.size(), dim);
      return;
    }
    check(config);
    this.route = new Routing(keys, map, numShards);
    traffic.written(route.dedup.uniqueCount(), dim);
  }

  private void check(TableConfig config) {
    try {
      GradientChecks.check(table, keys, dim, config.getMaxKeyBytes(), gradients, learningRate);
    } catch (TableException e) {
      throw TableException.of(e.code(), e.getMessage(), table, -1, "applyGradients", null);
    }
  }

  @Override
  Shard.Write request(int shard) {
    if (route == null) {
      return shard == 0 ? new Shard.Write(table, keys, gradients, learningRate, step) : null;
    }
    if (route.shardKeys[shard].size() == 0) {
      return null;
    }
    return new Shard.Write(table, route.shardKeys[shard], route.gradients(shard, gradients, dim),
        learningRate, step);
  }
}
