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

  /**
   * Takes over a replaced store's snapshots (a disk-tier table's eviction rebuild): theirs hold
   * keys, not row ids, so they stay valid for the store that replaces it.
   */
  void adopt(Samplers old) {
    cache.putAll(old.cache);
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
      prob[i] = row >= 0 ? s.probabilityOf(table, row) : 0.0;
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
      int idx = s.draw(rnd);
      s.appendKey(table, idx, keys);
      prob[np + j] = s.prob[idx];
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
      int idx = distinctRows[i];
      s.appendKey(table, idx, keys);
      p[np + i] = s.prob[idx];
      // a cold key drawn is promoted, as any access promotes: its row is then in memory (-1 if
      // it was removed since the snapshot: it reads as zeros)
      distinctRows[i] = idx < s.hot ? idx : table.lookup(PackedKeys.of(s.coldKeys[idx - s.hot]), 0);
    }
    return new SampleCandidates(keys.build(), isPos, p, s.mass, s.n,
        java.util.Arrays.copyOf(distinctRows, u), drawIndex);
  }

  private Snapshot snapshot(SamplerKind kind, float alpha) {
    String id = kind + "/" + alpha;
    Snapshot s = cache.get(id);
    // keys and counts over both tiers: promotions move keys between them, only new keys and
    // counts make a snapshot stale
    ColdRows cold = table.cold();
    int n = table.size() + (cold == null ? 0 : (int) cold.size());
    long total = table.totalFrequency() + (cold == null ? 0 : cold.frequency());
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
    final int n; // drawable entries: rows 0..hot-1 of the store, then the cold keys
    final int hot;
    final long total;
    final double mass;
    final double[] prob;
    final double[] aliasProb;
    final int[] alias;
    final boolean uniform;
    /** The disk tier's keys at the snapshot (entry hot + j), and their entries by key. */
    final String[] coldKeys;
    private final java.util.Map<String, Integer> coldIndex;

    private Snapshot(int n, int hot, long total, double mass, double[] prob, double[] aliasProb,
        int[] alias, boolean uniform, String[] coldKeys) {
      this.n = n;
      this.hot = hot;
      this.total = total;
      this.mass = mass;
      this.prob = prob;
      this.aliasProb = aliasProb;
      this.alias = alias;
      this.uniform = uniform;
      this.coldKeys = coldKeys;
      this.coldIndex = new java.util.HashMap<>(coldKeys.length * 2);
      for (int j = 0; j < coldKeys.length; j++) {
        coldIndex.put(coldKeys[j], j);
      }
    }

    /**
     * @param nKeys rows and cold keys counted for staleness; the rows covered are those below the
     *     store's size now, the cold keys those of the disk tier now
     */
    static Snapshot build(TableStore t, SamplerKind kind, float alpha, int nKeys, long total) {
      ColdRows ct = t.cold();
      java.util.List<java.util.Map.Entry<String, Long>> cold = ct == null ? java.util.List.of()
          : new java.util.ArrayList<>(ct.counts());
      // with a disk tier every entry is a key, not a row id: the snapshot then outlives the
      // store (an eviction's rebuild adopts it), since rows move between tiers all the time
      int rows = t.size();
      int hot = ct == null ? rows : 0;
      int extra = ct == null ? 0 : rows;
      int n = hot + extra + cold.size();
      String[] coldKeys = new String[extra + cold.size()];
      long[] f = new long[n]; // -1: not drawable (a row still being inserted)
      int ready = 0;
      for (int r = 0; r < rows; r++) {
        f[r] = t.isReady(r) ? t.meta(r, TableStore.M_FREQ) : -1;
        if (ct != null) {
          coldKeys[r] = f[r] < 0 ? "" : t.key(r);
        }
        ready += f[r] >= 0 ? 1 : 0;
      }
      for (int j = 0; j < cold.size(); j++) {
        coldKeys[extra + j] = cold.get(j).getKey();
        f[hot + extra + j] = cold.get(j).getValue();
        ready++;
      }
      double[] w = new double[n];
      double mass;
      switch (kind) {
        case UNIFORM_SAMPLER -> {
          for (int r = 0; r < n; r++) {
            w[r] = f[r] < 0 ? 0 : 1.0;
          }
          mass = ready;
        }
        case UNIGRAM_SAMPLER -> {
          mass = 0;
          for (int r = 0; r < n; r++) {
            w[r] = f[r] <= 0 ? 0 : Math.pow(f[r], alpha);
            mass += w[r];
          }
        }
        default -> { // log-uniform over frequency rank (0 = most frequent)
          Integer[] order = new Integer[n];
          for (int r = 0; r < n; r++) {
            order[r] = r;
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
      return new Snapshot(drawable, hot, total, mass, prob, aliasProb, alias, uniform,
          coldKeys);
    }

    /** Appends entry {@code idx}'s key. */
    void appendKey(TableStore t, int idx, PackedKeys.Builder keys) {
      if (idx < hot) {
        t.appendKey(idx, keys);
      } else {
        byte[] k = coldKeys[idx - hot].getBytes(java.nio.charset.StandardCharsets.UTF_8);
        keys.add(k, 0, k.length);
      }
    }

    /**
     * Probability of a row's key; a row promoted from the disk tier since the snapshot has its
     * cold entry's; rows newer than the snapshot otherwise are never drawn by it.
     */
    double probabilityOf(TableStore t, int row) {
      if (row < hot) {
        return row < prob.length ? prob[row] : 0.0;
      }
      if (coldKeys.length == 0) {
        return 0.0;
      }
      Integer j = coldIndex.get(t.key(row));
      return j == null || hot + j >= prob.length ? 0.0 : prob[hot + j];
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

  }
}
