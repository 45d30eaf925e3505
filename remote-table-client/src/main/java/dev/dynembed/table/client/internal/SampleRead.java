package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.SampleResult;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.SamplerKind;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.function.Consumer;
import dev.dynembed.table.client.spi.Shard;

/**
 * Candidate draws over the whole table: each shard draws its share. Draw j picks its shard with
 * the shards' sampler masses (a multinomial, from the call's seed) and is then taken from that
 * shard's draws in order, so draws stay exchangeable: a caller slicing them (S per example) gets
 * every slice from every shard, not the first slices from shard 0. Positives go to their owners,
 * which report each one's probability. Probabilities are scaled by the shard's share.
 *
 * <p>The masses are the ones the shards last reported (every reply carries them). Before any
 * report (a new sampler, or after a restore) every shard is asked for all the draws and reports
 * its mass with them; the split is then made from those masses and each shard's first draws are
 * kept. So a read never waits for a separate probe, and draws of one batch see the counting that
 * earlier reads of the same call did (a shard runs a call's items in order).
 */
final class SampleRead<T> extends ShardCalls.ReadItem<T> {
  private final String table;
  private final int dim;
  private final int slotFloats;
  private final boolean withSlots;
  /** Distinct draws without rows: SampledRows.rows is null (a row cache fills it). */
  private final boolean omitRows;
  private final PackedKeys positives;
  private final int numSampled;
  private final SamplerKind sampler;
  private final float alpha;
  private final long seed;
  private final boolean distinct;
  private final int n;
  /** Known masses (the split is made now), or null (every shard draws all; split on reply). */
  private final double[] knownMass;
  private final int[] asked; // per shard: draws requested
  private final int[] posShard;
  private final int[] posIndex;
  private final PackedKeys[] shardPositives;
  private final Consumer<double[]> reportMasses;
  private final ShardedTable.Traffic traffic;

  /**
   * @param mass the shards' last reported sampler masses, or null when none were reported
   * @param reportMasses told the masses the shards reported with this call
   */
  SampleRead(String table, int dim, int slotFloats, PackedKeys positives, int numSampled,
      SamplerKind sampler, float alpha, long seed, boolean distinct, boolean withSlots,
      boolean omitRows, SlotMap map, int numShards, double[] mass,
      Consumer<double[]> reportMasses, ShardedTable.Traffic traffic) {
    super(map.epoch(), numShards);
    this.traffic = traffic;
    this.table = table;
    this.dim = dim;
    this.slotFloats = slotFloats;
    this.omitRows = distinct && omitRows;
    this.withSlots = distinct && withSlots && !this.omitRows;
    this.positives = positives;
    this.numSampled = numSampled;
    this.sampler = sampler;
    this.alpha = alpha;
    this.seed = seed;
    this.distinct = distinct;
    this.n = numShards;
    this.reportMasses = reportMasses;
    boolean known = n == 1 || (mass != null && Arrays.stream(mass).sum() > 0);
    this.knownMass = !known ? null : n == 1 ? new double[] {1} : mass;
    this.asked = new int[n];
    if (knownMass != null) {
      for (int s : choices(knownMass)) {
        asked[s]++;
      }
    } else {
      Arrays.fill(asked, numSampled);
    }
    posShard = new int[positives.size()];
    posIndex = new int[positives.size()];
    PackedKeys.Builder[] pb = new PackedKeys.Builder[n];
    for (int s = 0; s < n; s++) {
      pb[s] = new PackedKeys.Builder(positives.size() / n + 1);
    }
    for (int i = 0; i < positives.size(); i++) {
      int s = n == 1 ? 0 : map.ownerOf(positives.hash(i));
      posShard[i] = s;
      posIndex[i] = pb[s].size();
      pb[s].add(positives, i);
    }
    shardPositives = new PackedKeys[n];
    for (int s = 0; s < n; s++) {
      shardPositives[s] = pb[s].build();
    }
  }

  /** Each draw's shard, by the masses' shares (a multinomial from the call's seed). */
  private int[] choices(double[] mass) {
    double[] share = shares(mass);
    int[] choice = new int[numSampled];
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int j = 0; j < numSampled; j++) {
      double u = rnd.nextDouble();
      int s = 0;
      while (s < n - 1 && (u -= share[s]) >= 0) {
        s++;
      }
      choice[j] = s;
    }
    return choice;
  }

  private double[] shares(double[] mass) {
    double total = Arrays.stream(mass).sum();
    double[] share = new double[n];
    for (int s = 0; s < n; s++) {
      share[s] = total > 0 ? mass[s] / total : 0;
    }
    return share;
  }

  /** Shard s's own seed: the shards' draws are independent streams. */
  static long shardSeed(long seed, int shard) {
    return seed + 0x632BE59BD9B4E019L * (shard + 1);
  }

  @Override
  Shard.Read request(int shard) {
    if (asked[shard] == 0 && shardPositives[shard].size() == 0
        && (knownMass == null || knownMass[shard] > 0)) {
      return null; // a shard last known without weight is asked for its mass (no draws): it
                   // may have gained keys since (counting, a slot move)
    }
    return new Shard.Sample(table, shardPositives[shard], asked[shard], sampler, alpha,
        shardSeed(seed, shard), distinct, knownMass == null, withSlots, omitRows);
  }

  @Override
  @SuppressWarnings("unchecked")
  T merge(Object[] replies) {
    double[] reported = new double[n];
    for (int s = 0; s < n; s++) {
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      reported[s] = r == null ? Double.NaN : r.mass();
    }
    reportMasses.accept(reported);
    double[] mass = knownMass;
    if (mass == null) {
      mass = reported; // every shard was asked, so every shard reported
      if (numSampled > 0 && !(Arrays.stream(mass).sum() > 0)) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION,
            "no key has sampling weight, so nothing can be drawn", table, -1, "sample", null);
      }
    }
    double[] share = shares(mass);
    int[] choice = choices(mass);
    return (T) (distinct ? distinctRows(replies, share, choice) : candidates(replies, share,
        choice));
  }

  private double positiveProbability(Object[] replies, double[] share, int i) {
    Shard.SampleReply r = (Shard.SampleReply) replies[posShard[i]];
    return share[posShard[i]] * r.probability()[posIndex[i]];
  }

  private SampleResult candidates(Object[] replies, double[] share, int[] choice) {
    int np = positives.size();
    String[] keys = new String[np + numSampled];
    boolean[] positive = new boolean[keys.length];
    double[] prob = new double[keys.length];
    for (int i = 0; i < np; i++) {
      keys[i] = positives.key(i);
      positive[i] = true;
      prob[i] = positiveProbability(replies, share, i);
    }
    int[] next = new int[n]; // a shard's draws follow its positives
    for (int s = 0; s < n; s++) {
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

  /**
   * The distinct keys the kept draws drew (each shard's first draws, as many as its share), in
   * shard order; the shards' keys are disjoint, each key lives on one shard.
   */
  private SampledRows distinctRows(Object[] replies, double[] share, int[] choice) {
    int np = positives.size();
    double[] posProb = new double[np];
    for (int i = 0; i < np; i++) {
      posProb[i] = positiveProbability(replies, share, i);
    }
    int[] kept = new int[n];
    for (int s : choice) {
      kept[s]++;
    }
    // per shard: its distinct keys that a kept draw uses, renumbered in order of first use
    int[][] renumber = new int[n][];
    int[] offset = new int[n];
    int u = 0;
    for (int s = 0; s < n; s++) {
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      offset[s] = u;
      if (r == null || kept[s] == 0) {
        continue;
      }
      if (!omitRows) { // a table grown since this client opened it: its old columns
        r = (Shard.SampleReply) ShardCalls.narrowed(table, r, dim, slotFloats / dim);
        replies[s] = r;
      }
      int distinctCount = r.keys().size() - shardPositives[s].size();
      renumber[s] = new int[distinctCount];
      Arrays.fill(renumber[s], -1);
      int used = 0;
      for (int j = 0; j < kept[s]; j++) {
        int d = r.drawIndex()[j];
        if (renumber[s][d] < 0) {
          renumber[s][d] = used++;
        }
      }
      u += used;
    }
    String[] keys = new String[u];
    double[] prob = new double[u];
    float[] rows = omitRows ? null : new float[u * dim];
    float[] slots = withSlots && slotFloats > 0 ? new float[u * slotFloats] : null;
    long[] counts = withSlots ? new long[u] : null;
    for (int s = 0; s < n; s++) {
      if (renumber[s] == null) {
        continue;
      }
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      int p = shardPositives[s].size();
      for (int d = 0; d < renumber[s].length; d++) {
        int at = renumber[s][d];
        if (at < 0) {
          continue; // drawn by a draw this call does not keep
        }
        keys[offset[s] + at] = r.keys().key(p + d);
        prob[offset[s] + at] = share[s] * r.probability()[p + d];
        if (rows != null) {
          r.rows().get(d, rows, (offset[s] + at) * dim);
        }
        if (withSlots) {
          counts[offset[s] + at] = r.updateCounts()[d];
          if (slots != null) {
            r.slots().get(d, slots, (offset[s] + at) * slotFloats);
          }
        }
      }
    }
    if (!omitRows) {
      traffic.read(u, dim + (withSlots ? slotFloats : 0));
    }
    int[] drawIndex = new int[numSampled];
    int[] next = new int[n];
    for (int j = 0; j < numSampled; j++) {
      int s = choice[j];
      Shard.SampleReply r = (Shard.SampleReply) replies[s];
      drawIndex[j] = offset[s] + renumber[s][r.drawIndex()[next[s]++]];
    }
    return new SampledRows(posProb, keys, rows, prob, drawIndex, slots, counts);
  }
}
