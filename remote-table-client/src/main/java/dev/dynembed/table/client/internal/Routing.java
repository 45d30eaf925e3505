package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;

/**
 * Partition of a batch over shards: keys de-duplicated, each distinct key routed by a slot map
 * ({@link SlotMap#ownerOf}; the implicit map is {@link KeyHashing#shardOf}), with the positions
 * needed to stitch replies back in request order.
 */
final class Routing {
  final PackedKeys keys;
  final BatchDedup dedup;
  final int numShards;
  final int[] shardOfUnique;
  final int[] posInShard;
  final PackedKeys[] shardKeys;
  final int[][] shardUniques; // shard -> distinct key ids in shard order

  /** @param numShards the client's shards (the map names at most as many) */
  Routing(PackedKeys keys, SlotMap map, int numShards) {
    this.keys = keys;
    this.numShards = numShards;
    this.dedup = BatchDedup.of(keys);
    int u = dedup.uniqueCount();
    shardOfUnique = new int[u];
    posInShard = new int[u];
    int[] counts = new int[numShards];
    for (int i = 0; i < u; i++) {
      int s = map.ownerOf(keys.hash(dedup.firstPosition(i)));
      shardOfUnique[i] = s;
      posInShard[i] = counts[s]++;
    }
    shardKeys = new PackedKeys[numShards];
    shardUniques = new int[numShards][];
    PackedKeys.Builder[] b = new PackedKeys.Builder[numShards];
    for (int s = 0; s < numShards; s++) {
      b[s] = new PackedKeys.Builder(counts[s]);
      shardUniques[s] = new int[counts[s]];
    }
    for (int i = 0; i < u; i++) {
      int s = shardOfUnique[i];
      b[s].add(keys, dedup.firstPosition(i));
      shardUniques[s][posInShard[i]] = i;
    }
    for (int s = 0; s < numShards; s++) {
      shardKeys[s] = b[s].build();
    }
  }

  /**
   * Bags over this batch's keys split over the shards (as {@link
   * dev.dynembed.table.common.KeyBags#split}): each shard's part indexes its shard keys.
   */
  dev.dynembed.table.common.KeyBags[] split(dev.dynembed.table.common.KeyBags bags) {
    int[] shardOf = new int[keys.size()];
    int[] pos = new int[shardOf.length];
    for (int i = 0; i < shardOf.length; i++) {
      int u = dedup.uniqueOf(i);
      shardOf[i] = shardOfUnique[u];
      pos[i] = posInShard[u];
    }
    return bags.split(shardOf, pos, numShards);
  }

  private int[] perUnique; // occurrences of each distinct key, counted once per batch

  /** Occurrences of each shard key in the batch. */
  int[] occurrences(int shard) {
    if (perUnique == null) {
      perUnique = new int[dedup.uniqueCount()];
      for (int i = 0; i < keys.size(); i++) {
        perUnique[dedup.uniqueOf(i)]++;
      }
    }
    int[] occ = new int[shardUniques[shard].length];
    for (int j = 0; j < occ.length; j++) {
      occ[j] = perUnique[shardUniques[shard][j]];
    }
    return occ;
  }

  /** Per-key values of distinct keys (an assign's frequencies) in this shard's key order. */
  long[] perKey(int shard, long[] values) {
    if (values == null) {
      return null;
    }
    int[] us = shardUniques[shard];
    long[] out = new long[us.length];
    for (int j = 0; j < us.length; j++) {
      out[j] = values[dedup.firstPosition(us[j])];
    }
    return out;
  }

  /** Gradients summed per distinct key, laid out in this shard's key order. */
  float[] gradients(int shard, float[] gradients, int dim) {
    float[] out = new float[shardUniques[shard].length * dim];
    for (int i = 0; i < keys.size(); i++) {
      int u = dedup.uniqueOf(i);
      if (shardOfUnique[u] != shard) {
        continue;
      }
      if (dedup.firstPosition(u) == i) {
        System.arraycopy(gradients, i * dim, out, posInShard[u] * dim, dim);
      } else {
        FloatKernels.axpy(1f, gradients, i * dim, out, posInShard[u] * dim, dim);
      }
    }
    return out;
  }
}
