package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.SampleResult;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.SamplerKind;
import java.util.SplittableRandom;

/**
 * Candidate draws over the whole table: each shard draws its share. Draw j picks its shard with
 * the shards' sampler masses (a multinomial over the last known masses) and is then taken from
 * that shard's draws in order, so draws stay exchangeable: a caller slicing them (S per example)
 * gets every slice from every shard, not the first slices from shard 0. Positives go to their
 * owners, which report each one's probability. Probabilities are scaled by the shard's share.
 */
final class SampleRead<T> extends ShardCalls.ReadItem<T> {
  private final String table;
  private final int dim;
  private final PackedKeys positives;
  private final int numSampled;
  private final SamplerKind sampler;
  private final float alpha;
  private final long seed;
  private final boolean distinct;
  private final double[] share;
  private final int[] choice; // draw j -> shard
  private final int[] draws; // per shard
  private final int[] posShard;
  private final int[] posIndex;
  private final PackedKeys[] shardPositives;
  private final java.util.function.Consumer<double[]> masses;

  /**
   * @param mass the last known sampler mass of each shard
   * @param masses told the masses the shards reported with this call
   */
  SampleRead(String table, int dim, PackedKeys positives, int numSampled, SamplerKind sampler,
      float alpha, long seed, boolean distinct, double[] mass,
      java.util.function.Consumer<double[]> masses) {
    this.table = table;
    this.dim = dim;
    this.positives = positives;
    this.numSampled = numSampled;
    this.sampler = sampler;
    this.alpha = alpha;
    this.seed = seed;
    this.distinct = distinct;
    this.masses = masses;
    int n = mass.length;
    double total = 0;
    for (double m : mass) {
      total += m;
    }
    share = new double[n];
    for (int s = 0; s < n; s++) {
      share[s] = total > 0 ? mass[s] / total : (n == 1 ? 1 : 0);
    }
    draws = new int[n];
    choice = new int[numSampled];
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int j = 0; j < numSampled; j++) {
      double u = rnd.nextDouble();
      int s = 0;
      while (s < n - 1 && (u -= share[s]) >= 0) {
        s++;
      }
      choice[j] = s;
      draws[s]++;
    }
    posShard = new int[positives.size()];
    posIndex = new int[positives.size()];
    PackedKeys.Builder[] pb = new PackedKeys.Builder[n];
    for (int s = 0; s < n; s++) {
      pb[s] = new PackedKeys.Builder(positives.size() / n + 1);
    }
    for (int i = 0; i < positives.size(); i++) {
      int s = n == 1 ? 0 : KeyHashing.shardOf(positives.hash(i), n);
      posShard[i] = s;
      posIndex[i] = pb[s].size();
      pb[s].add(positives, i);
    }
    shardPositives = new PackedKeys[n];
    for (int s = 0; s < n; s++) {
      shardPositives[s] = pb[s].build();
    }
  }

  /** Shard s's own seed: the shards' draws are independent streams. */
  static long shardSeed(long seed, int shard) {
    return seed + 0x632BE59BD9B4E019L * (shard + 1);
  }

  @Override
  Shard.Read request(int shard) {
    if (draws[shard] == 0 && shardPositives[shard].size() == 0) {
      return null;
    }
    return new Shard.Sample(table, shardPositives[shard], draws[shard], sampler, alpha,
        shardSeed(seed, shard), distinct);
  }

  @Override
  @SuppressWarnings("unchecked")
  T merge(Object[] replies) {
    double[] fresh = new double[replies.length];
    for (int s = 0; s < replies.length; s++) {
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      fresh[s] = r == null ? Double.NaN : r.mass();
    }
    masses.accept(fresh);
    return (T) (distinct ? distinctRows(replies) : candidates(replies));
  }

  private double positiveProbability(Object[] replies, int i) {
    Shard.SampleReply r = (Shard.SampleReply) replies[posShard[i]];
    return share[posShard[i]] * r.probability()[posIndex[i]];
  }

  private SampleResult candidates(Object[] replies) {
    int np = positives.size();
    String[] keys = new String[np + numSampled];
    boolean[] positive = new boolean[keys.length];
    double[] prob = new double[keys.length];
    for (int i = 0; i < np; i++) {
      keys[i] = positives.key(i);
      positive[i] = true;
      prob[i] = positiveProbability(replies, i);
    }
    int[] next = new int[replies.length]; // a shard's draws follow its positives
    for (int s = 0; s < next.length; s++) {
      next[s] = shardPositives[s].size();
    }
    for (int j = 0; j < numSampled; j++) {
      int s = choice[j];
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      keys[np + j] = r.keys().key(next[s]);
      prob[np + j] = share[s] * r.probability()[next[s]];
      next[s]++;
    }
    return new SampleResult(keys, positive, prob, np);
  }

  private SampledRows distinctRows(Object[] replies) {
    int np = positives.size();
    int n = replies.length;
    double[] posProb = new double[np];
    for (int i = 0; i < np; i++) {
      posProb[i] = positiveProbability(replies, i);
    }
    // the shards' distinct keys are disjoint (each key lives on one shard): concatenate them
    int[] offset = new int[n];
    int u = 0;
    for (int s = 0; s < n; s++) {
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      offset[s] = u;
      u += r == null ? 0 : r.keys().size() - shardPositives[s].size();
    }
    String[] keys = new String[u];
    double[] prob = new double[u];
    float[] rows = new float[u * dim];
    for (int s = 0; s < n; s++) {
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      if (r == null) {
        continue;
      }
      int p = shardPositives[s].size();
      for (int i = p; i < r.keys().size(); i++) {
        keys[offset[s] + i - p] = r.keys().key(i);
        prob[offset[s] + i - p] = share[s] * r.probability()[i];
      }
      if (r.rows() != null) {
        r.rows().getAll(rows, offset[s] * dim);
      }
    }
    int[] drawIndex = new int[numSampled];
    int[] next = new int[n];
    for (int j = 0; j < numSampled; j++) {
      int s = choice[j];
      drawIndex[j] = offset[s] + ((Shard.SampleReply) replies[s]).drawIndex()[next[s]++];
    }
    return new SampledRows(posProb, keys, rows, prob, drawIndex);
  }
}
