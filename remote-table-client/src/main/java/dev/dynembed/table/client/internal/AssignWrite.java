package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.client.spi.Shard;

/**
 * One table's rows to assign (an import), split over the shards. Checked whole here first, as a
 * gradient batch is, so that no shard sets a part of a batch another refuses; a single
 * in-process shard gets the batch unchanged and checks it whole itself.
 */
final class AssignWrite extends ShardCalls.WriteItem {
  private final String table;
  private final int dim;
  private final PackedKeys keys;
  private final float[] values;
  private final long[] frequencies;
  private final long step;
  private final Routing route; // null: the batch goes to shard 0 unchanged

  AssignWrite(TableConfig config, PackedKeys keys, float[] values, long[] frequencies, long step,
      SlotMap map, int numShards, boolean direct, ShardedTable.Traffic traffic) {
    super(map.epoch(), numShards);
    this.table = config.getName();
    this.dim = config.getDim();
    this.keys = keys;
    this.values = values;
    this.frequencies = frequencies;
    this.step = step;
    if (!direct) {
      try {
        GradientChecks.checkAssign(table, keys, dim, config.getMaxKeyBytes(), values,
            frequencies);
      } catch (TableException e) {
        throw TableException.of(e.code(), e.getMessage(), table, -1, "assign", null);
      }
    }
    this.route = direct ? null : new Routing(keys, map, numShards);
    traffic.written(keys.size(), dim);
  }

  @Override
  Shard.Write request(int shard) {
    if (route == null) {
      return shard == 0 ? Shard.Write.assign(table, keys, values, frequencies, step) : null;
    }
    if (route.shardKeys[shard].size() == 0) {
      return null;
    }
    return Shard.Write.assign(table, route.shardKeys[shard], route.gradients(shard, values, dim),
        route.perKey(shard, frequencies), step);
  }
}
