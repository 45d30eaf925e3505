package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;

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
      long step, int numShards, boolean direct) {
    this.table = config.getName();
    this.dim = config.getDim();
    this.keys = keys;
    this.gradients = gradients;
    this.learningRate = learningRate;
    this.step = step;
    if (direct || keys.size() == 0) {
      this.route = null;
      return;
    }
    check(config);
    this.route = new Routing(keys, numShards);
  }

  private void check(TableConfig config) {
    if ((long) keys.size() * dim != gradients.length) {
      throw invalid("table '%s' expects gradients of %d keys x dim %d = %d floats but the"
          + " request had %d floats", table, keys.size(), dim, (long) keys.size() * dim,
          gradients.length);
    }
    int k = FloatKernels.firstNonFinite(gradients, 0, gradients.length);
    if (k >= 0) {
      throw invalid("gradient of key %d ('%s') column %d is %s; nothing was applied", k / dim,
          keys.key(k / dim), k % dim, gradients[k]);
    }
    for (int i = 0; i < keys.size(); i++) {
      if (keys.length(i) == 0 || keys.length(i) > config.getMaxKeyBytes()) {
        throw invalid("key %d is %d bytes long; keys must be 1..%d bytes (the table's"
            + " max_key_bytes); nothing was applied", i, keys.length(i),
            config.getMaxKeyBytes());
      }
    }
    if (!(learningRate >= 0f && Float.isFinite(learningRate))) {
      throw invalid("learning_rate must be >= 0 (0 = the table's) but was %s", learningRate);
    }
  }

  private TableException invalid(String format, Object... args) {
    return TableException.of(ErrorCode.INVALID_ARGUMENT, String.format(format, args), table, -1,
        "applyGradients", null);
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
