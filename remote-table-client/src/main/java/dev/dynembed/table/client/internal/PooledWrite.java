package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.client.spi.Shard;

/**
 * The gradients of a pooled lookup, split over the shards: one gradient row per bag goes to
 * every shard that holds keys of the bags, with that shard's share of the bags; the shard spreads
 * it over its keys ({@link KeyBags#spread}) before its optimizer step. Checked whole here first
 * (width, finite values, learning rate), so that no shard applies a part another refuses.
 */
final class PooledWrite extends ShardCalls.WriteItem {
  private final String table;
  private final float[] gradients;
  private final float learningRate;
  private final long step;
  private final PackedKeys[] shardKeys;
  private final KeyBags[] shardBags;

  PooledWrite(String table, int dim, PackedKeys keys, KeyBags bags, float[] gradients,
      float learningRate, long step, SlotMap map, int numShards) {
    super(map.epoch(), numShards);
    this.table = table;
    this.gradients = gradients;
    this.learningRate = learningRate;
    this.step = step;
    if ((long) bags.bags() * dim != gradients.length) {
      throw invalid("expects pooled gradients of %d bags x dim %d = %d floats but %d were given;"
          + " nothing was applied", bags.bags(), dim, (long) bags.bags() * dim, gradients.length);
    }
    int k = FloatKernels.firstNonFinite(gradients, 0, gradients.length);
    if (k >= 0) {
      throw invalid("pooled gradient of bag %d column %d is %s; nothing was applied", k / dim,
          k % dim, gradients[k]);
    }
    if (!(learningRate >= 0f && Float.isFinite(learningRate))) {
      throw invalid("learning_rate must be >= 0 (0 = the table's) but was %s; nothing was"
          + " applied", learningRate);
    }
    try {
      bags.requireAllUsed(keys::key);
    } catch (TableException e) {
      throw invalid("%s", e.getMessage());
    }
    Routing route = new Routing(keys, map, numShards);
    this.shardKeys = route.shardKeys;
    this.shardBags = route.split(bags);
  }

  private TableException invalid(String format, Object... args) {
    return TableException.of(dev.dynembed.table.common.ErrorCode.INVALID_ARGUMENT,
        String.format(format, args), table, -1, "applyPooledGradients", null);
  }

  @Override
  Shard.Write request(int shard) {
    if (shardKeys[shard].size() == 0) {
      return null;
    }
    return new Shard.Write(table, shardKeys[shard], gradients, learningRate, step,
        shardBags[shard]);
  }
}
