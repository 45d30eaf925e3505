package dev.dynembed.table.engine;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.SamplerKind;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Candidate samplers over one shard's keys, drawn from snapshots of the per-key frequencies.
 *
 * <p>A snapshot holds each row's probability and a Walker/Vose alias table (O(1) per draw). It is
 * rebuilt when the number of keys or the total frequency has grown by more than {@link
 * #STALENESS} since it was built, so its cost (O(n), or O(n log n) for log-uniform ranks) is
 * amortised over many calls. Rows inserted after a snapshot are not drawn until the next one;
 * probabilities returned are those of the snapshot that drew.
 */
final class Samplers {
  static final double STALENESS = 0.01;
  static final float DEFAULT_ALPHA = 0.75f;

  private final TableStore table;
  private final ConcurrentHashMap<String, Snapshot> cache = new ConcurrentHashMap<>();

  Samplers(TableStore table) {
    this.table = table;
  }

  /**
   * Drops every snapshot. A checkpoint does this: the next draws are built from the saved counts,
   * exactly as they will be after a restore, so a resumed run samples what the original did.
   */
  void invalidate() {
    cache.clear();
  }

  SampleCandidates sample(PackedKeys positives, int numSampled, SamplerKind kind, float alpha, long seed) {
    return sample(positives, numSampled, kind, alpha, seed, false, false);
  }

  /**
   * @param distinct return each distinct drawn key once, with its row, and each draw's index
   *     into them (see {@link SampleCandidates}); the draws are the same as without
   * @param noneIfEmpty a shard without any key of sampling weight draws nothing (instead of
   *     failing)
   */
  SampleCandidates sample(PackedKeys positives, int numSampled, SamplerKind kind, float alpha,
      long seed, boolean distinct, boolean noneIfEmpty) {
    if (numSampled < 0 || numSampled > Limits.MAX_NUM_SAMPLED) {
      throw TableException.invalid(
          "table '%s': num_sampled must be in [0, %d] but was %d",
          table.name(), Limits.MAX_NUM_SAMPLED, numSampled);
    }
    if (kind != SamplerKind.UNIFORM_SAMPLER && kind != SamplerKind.LOG_UNIFORM_SAMPLER
        && kind != SamplerKind.UNIGRAM_SAMPLER) {
      throw TableException.invalid("table '%s': sampler %s is not supported", table.name(), kind);
    }
    float a = alpha == 0f ? DEFAULT_ALPHA : alpha;
    if (!(Float.isFinite(a) && a > 0f && a <= 10f)) {
      throw TableException.invalid("table '%s': alpha must be in (0, 10] but was %s",
          table.name(), alpha);
    }
    Snapshot s = snapshot(kind, a);
    int np = positives.size();
    PackedKeys.Builder keys = new PackedKeys.Builder(np + numSampled);
    boolean[] pos = new boolean[np + numSampled];
    double[] prob = new double[np + numSampled];
    for (int i = 0; i < np; i++) {
      keys.add(positives, i);
      pos[i] = true;
      int row = table.lookup(positives, i);
      prob[i] = row >= 0 ? s.probability(row) : 0.0;
    }
    if (numSampled > 0 && s.n == 0 && noneIfEmpty) {
      numSampled = 0;
      pos = java.util.Arrays.copyOf(pos, np);
      prob = java.util.Arrays.copyOf(prob, np);
    }
    if (numSampled > 0 && s.n == 0) {
      throw TableException.precondition(
          "table '%s' shard %d has no keys with sampling weight to draw %d candidates from",
          table.name(), table.shardIndex, numSampled);
    }
    SplittableRandom rnd = new SplittableRandom(seed ^ (0x9E3779B97F4A7C15L * (table.shardIndex + 1)));
    if (distinct) {
      return distinctDraws(keys, pos, prob, np, numSampled, s, rnd);
    }
    for (int j = 0; j < numSampled; j++) {
      int row = s.draw(rnd);
      table.appendKey(row, keys);
      prob[np + j] = s.prob[row];
    }
    return new SampleCandidates(keys.build(), pos, prob, s.mass, s.n);
  }

  /** The draws, de-duplicated by row id (open addressing, no boxing), with their rows. */
  private SampleCandidates distinctDraws(PackedKeys.Builder keys, boolean[] pos, double[] prob,
      int np, int numSampled, Snapshot s, SplittableRandom rnd) {
    int cap = Integer.highestOneBit(Math.max(4, numSampled) * 2 - 1) << 1;
    int[] slotRow = new int[cap];
    int[] slotIdx = new int[cap];
    java.util.Arrays.fill(slotRow, -1);
    int[] drawIndex = new int[numSampled];
    int[] distinctRows = new int[Math.min(numSampled, Math.max(s.n, 1))];
    int u = 0;
    for (int j = 0; j < numSampled; j++) {
      int row = s.draw(rnd);
      int slot = (row * 0x9E3779B9) & (cap - 1);
      while (slotRow[slot] != -1 && slotRow[slot] != row) {
        slot = (slot + 1) & (cap - 1);
      }
      if (slotRow[slot] == -1) {
        slotRow[slot] = row;
        slotIdx[slot] = u;
        distinctRows[u++] = row;
      }
      drawIndex[j] = slotIdx[slot];
    }
    double[] p = java.util.Arrays.copyOf(prob, np + u);
    boolean[] isPos = java.util.Arrays.copyOf(pos, np + u);
    for (int i = 0; i < u; i++) {
      table.appendKey(distinctRows[i], keys);
      p[np + i] = s.prob[distinctRows[i]];
    }
    return new SampleCandidates(keys.build(), isPos, p, s.mass, s.n,
        java.util.Arrays.copyOf(distinctRows, u), drawIndex);
  }

  private Snapshot snapshot(SamplerKind kind, float alpha) {
    String id = kind + "/" + alpha;
    Snapshot s = cache.get(id);
    int n = table.size();
    long total = table.totalFrequency();
    if (s == null || grew(s.n, n) || (kind != SamplerKind.UNIFORM_SAMPLER && grew(s.total, total))) {
      s = Snapshot.build(table, kind, alpha, n, total);
      cache.put(id, s);
    }
    return s;
  }

  private static boolean grew(long then, long now) {
    return now != then && (then == 0 || (now - then) > STALENESS * then);
  }

  static final class Snapshot {
    final int n; // rows 0..n-1 are covered
    final long total;
    final double mass;
    final double[] prob;
    final double[] aliasProb;
    final int[] alias;
    final boolean uniform;

    private Snapshot(int n, long total, double mass, double[] prob, double[] aliasProb,
        int[] alias, boolean uniform) {
      this.n = n;
      this.total = total;
      this.mass = mass;
      this.prob = prob;
      this.aliasProb = aliasProb;
      this.alias = alias;
      this.uniform = uniform;
    }

    static Snapshot build(TableStore t, SamplerKind kind, float alpha, int n, long total) {
      double[] w = new double[n];
      int ready = 0;
      for (int r = 0; r < n; r++) {
        if (t.isReady(r)) {
          ready++;
          w[r] = 1.0;
        }
      }
      double mass;
      switch (kind) {
        case UNIFORM_SAMPLER -> mass = ready;
        case UNIGRAM_SAMPLER -> {
          mass = 0;
          for (int r = 0; r < n; r++) {
            w[r] = w[r] == 0 ? 0 : Math.pow(t.meta(r, TableStore.M_FREQ), alpha);
            mass += w[r];
          }
        }
        default -> { // log-uniform over frequency rank (0 = most frequent)
          Integer[] order = new Integer[n];
          for (int r = 0; r < n; r++) {
            order[r] = r;
          }
          long[] f = new long[n];
          for (int r = 0; r < n; r++) {
            f[r] = w[r] == 0 ? -1 : t.meta(r, TableStore.M_FREQ);
          }
          java.util.Arrays.sort(order, (x, y) -> f[y] != f[x] ? Long.compare(f[y], f[x]) : x - y);
          double norm = Math.log(ready + 1.0);
          for (int rank = 0; rank < n; rank++) {
            int r = order[rank];
            w[r] = f[r] < 0 ? 0 : Math.log((rank + 2.0) / (rank + 1.0)) / norm;
          }
          mass = ready; // a shard's share of log-uniform draws follows its key count
        }
      }
      double sum = 0;
      for (double x : w) {
        sum += x;
      }
      double[] prob = new double[n];
      if (sum > 0) {
        for (int r = 0; r < n; r++) {
          prob[r] = w[r] / sum;
        }
      }
      int drawable = sum > 0 ? n : 0;
      boolean uniform = kind == SamplerKind.UNIFORM_SAMPLER && ready == n;
      double[] aliasProb = new double[uniform ? 0 : n];
      int[] alias = new int[uniform ? 0 : n];
      if (!uniform && drawable > 0) {
        buildAlias(prob, aliasProb, alias);
      }
      return new Snapshot(drawable, total, mass, prob, aliasProb, alias, uniform);
    }

    /** Vose's alias method. */
    private static void buildAlias(double[] p, double[] aliasProb, int[] alias) {
      int n = p.length;
      double[] scaled = new double[n];
      int[] small = new int[n];
      int[] large = new int[n];
      int ns = 0;
      int nl = 0;
      for (int i = 0; i < n; i++) {
        scaled[i] = p[i] * n;
        if (scaled[i] < 1.0) {
          small[ns++] = i;
        } else {
          large[nl++] = i;
        }
      }
      while (ns > 0 && nl > 0) {
        int s = small[--ns];
        int l = large[--nl];
        aliasProb[s] = scaled[s];
        alias[s] = l;
        scaled[l] = (scaled[l] + scaled[s]) - 1.0;
        if (scaled[l] < 1.0) {
          small[ns++] = l;
        } else {
          large[nl++] = l;
        }
      }
      while (nl > 0) {
        aliasProb[large[--nl]] = 1.0;
      }
      while (ns > 0) {
        aliasProb[small[--ns]] = 1.0;
      }
    }

    int draw(SplittableRandom rnd) {
      int i = rnd.nextInt(n);
      if (uniform) {
        return i;
      }
      return rnd.nextDouble() < aliasProb[i] ? i : alias[i];
    }

    /** Probability of a row; rows newer than the snapshot are never drawn by it. */
    double probability(int row) {
      return row < prob.length ? prob[row] : 0.0;
    }
  }
}
