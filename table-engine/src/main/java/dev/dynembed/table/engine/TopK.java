package dev.dynembed.table.engine;

import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.Metric;

/**
 * Brute-force top-k over one shard: one pass over the rows, every query scored against each row
 * while it is in cache, a bounded min-heap per query. Exact, O(rows x queries x dim).
 */
public final class TopK {
  private TopK() {}

  /**
   * Refuses a query batch that does not fit the table: counts out of range, widths, NaN/Inf
   * (checked for the exact scan and the approximate index alike).
   */
  static void check(TableStore t, float[] queries, int q, int k, boolean biasLastDim) {
    int dim = t.dim;
    int width = biasLastDim ? dim - 1 : dim;
    if (q < 1 || q > Limits.MAX_TOP_K_QUERIES) {
      throw TableException.invalid("table '%s': num_queries must be in [1, %d] but was %d",
          t.name(), Limits.MAX_TOP_K_QUERIES, Integer.toUnsignedLong(q)); // uint32 on the wire
    }
    if (k < 1 || k > Limits.MAX_TOP_K) {
      throw TableException.invalid("table '%s': k must be in [1, %d] but was %d",
          t.name(), Limits.MAX_TOP_K, Integer.toUnsignedLong(k));
    }
    if (biasLastDim && dim < 2) {
      throw TableException.invalid(
          "table '%s': bias_last_dim needs dim >= 2 but the table has dim %d", t.name(), dim);
    }
    if ((long) q * width != queries.length) {
      throw TableException.invalid(
          "table '%s': %d queries of width %d need %d floats but the request had %d%s",
          t.name(), q, width, (long) q * width, queries.length,
          biasLastDim ? " (bias_last_dim: queries have dim - 1 columns)" : "");
    }
    int bad = FloatKernels.firstNonFinite(queries, 0, queries.length);
    if (bad >= 0) {
      throw TableException.invalid("table '%s': query %d column %d is %s",
          t.name(), bad / width, bad % width, queries[bad]);
    }
    for (int i = 0; i < queries.length; i++) { // as rows are: scores stay finite
      if (Math.abs(queries[i]) > Limits.MAX_ROW_VALUE) {
        throw TableException.invalid("table '%s': query %d column %d is %s; query values must"
            + " be within +-%s", t.name(), i / width, i % width, queries[i],
            Limits.MAX_ROW_VALUE);
      }
    }
  }

  /**
   * @param queries FLOAT [q, width], width = dim, or dim - 1 with biasLastDim
   */
  public static TopKHits run(TableStore t, float[] queries, int q, int k, boolean biasLastDim,
      Metric metric, PackedKeys exclude) {
    check(t, queries, q, k, biasLastDim);
    int dim = t.dim;
    int width = biasLastDim ? dim - 1 : dim;
    boolean cosine = metric == Metric.COSINE;
    float[] qnorm = new float[q];
    for (int a = 0; a < q; a++) {
      qnorm[a] = norm(queries, a * width, width);
    }
    java.util.BitSet excluded = excludedRows(t, exclude);
    int n = t.size();
    int kk = hitsPerQuery(t, q, k);
    float[][] hs = new float[q][kk];
    int[][] hr = new int[q][kk];
    int[] hn = new int[q];
    for (int r = 0; r < n; r++) {
      if (excluded.get(r) || !t.isReady(r)) {
        continue;
      }
      float[] page = t.rowPage(r);
      int base = t.rowBase(r);
      float rnorm = 1f;
      if (cosine) {
        rnorm = norm(page, base, width);
      }
      for (int a = 0; a < q; a++) {
        offer(hs[a], hr[a], hn, a, kk,
            score(page, base, queries, a * width, width, biasLastDim, cosine, rnorm, qnorm[a]), r);
      }
    }
    PackedKeys.Builder keys = new PackedKeys.Builder(q * kk);
    int total = 0;
    for (int a = 0; a < q; a++) {
      total += hn[a];
    }
    float[] scores = new float[total];
    int[] counts = new int[q];
    int at = 0;
    for (int a = 0; a < q; a++) {
      int m = sortDescending(hs[a], hr[a], hn[a]);
      float[] s = hs[a];
      int[] rr = hr[a];
      for (int i = 0; i < m; i++) {
        t.appendKey(rr[i], keys);
        scores[at++] = s[i];
      }
      counts[a] = m;
    }
    return new TopKHits(keys.build(), scores, counts);
  }

  /**
   * The k best of two hit lists of the same queries (each by descending score): by score, ties
   * to {@code a}; a key in both lists comes once, with its better score.
   */
  public static TopKHits merge(TopKHits a, TopKHits b, int q, int k) {
    PackedKeys.Builder keys = new PackedKeys.Builder(q * k);
    float[] scores = new float[q * k];
    int[] counts = new int[q];
    int at = 0;
    int ia = 0;
    int ib = 0;
    for (int x = 0; x < q; x++) {
      int ea = ia + a.counts()[x];
      int eb = ib + b.counts()[x];
      java.util.Set<String> seen = new java.util.HashSet<>();
      int m = 0;
      while (m < k && (ia < ea || ib < eb)) {
        boolean fromA = ib >= eb || (ia < ea && a.scores()[ia] >= b.scores()[ib]);
        PackedKeys src = fromA ? a.keys() : b.keys();
        int i = fromA ? ia++ : ib++;
        if (seen.add(src.key(i))) {
          keys.add(src, i);
          scores[at++] = fromA ? a.scores()[i] : b.scores()[i];
          m++;
        }
      }
      counts[x] = m;
      ia = ea;
      ib = eb;
    }
    return new TopKHits(keys.build(), java.util.Arrays.copyOf(scores, at), counts);
  }

  /**
   * The rows of the excluded keys in memory. Looked up without promotion: a top-k holds no lock
   * that would make moving a row out of the disk tier safe, and a cold excluded key is found in
   * the cold rows' own pass (their chunk stores).
   */
  static java.util.BitSet excludedRows(TableStore t, PackedKeys exclude) {
    java.util.BitSet excluded = new java.util.BitSet();
    for (int i = 0; i < exclude.size(); i++) {
      int row = t.lookupHot(exclude, i);
      if (row >= 0) {
        excluded.set(row);
      }
    }
    return excluded;
  }

  /**
   * Hits per query on this shard, min(k, rows) (a shard never has more hits than rows: k beyond
   * them would only allocate); refuses a call whose hits would pass the limit.
   */
  static int hitsPerQuery(TableStore t, int q, int k) {
    int kk = Math.min(k, t.size());
    if ((long) q * kk > Limits.MAX_TOP_K_HITS) {
      throw TableException.exhausted("table '%s': %d queries x k %d = %d hits on this shard exceed"
          + " %d; ask for fewer queries per call or a smaller k", t.name(), q, kk, (long) q * kk,
          Limits.MAX_TOP_K_HITS);
    }
    return kk;
  }

  /**
   * A row's score for a query: the dot product over the query's width, plus the row's bias
   * column with {@code bias}, over {@code rnorm * qnorm} for cosine (0 when either is 0). One
   * function for the exact scan and the approximate index, so both score a row alike.
   */
  static float score(float[] page, int base, float[] queries, int qo, int width, boolean bias,
      boolean cosine, float rnorm, float qnorm) {
    float dot = FloatKernels.dot(page, base, queries, qo, width);
    if (bias) {
      dot += page[base + width];
    }
    if (!cosine) {
      return dot;
    }
    float d = rnorm * qnorm;
    return d == 0f ? 0f : dot / d;
  }

  /**
   * The Euclidean norm of {@code a[off, off + width)}: the SIMD dot product with itself (one
   * function for the exact scan and the approximate index, so that both score a row alike).
   */
  static float norm(float[] a, int off, int width) {
    return (float) Math.sqrt(FloatKernels.dot(a, off, a, off, width));
  }

  /** Heap-sorts a min-heap of m hits into descending order (ties: lower row first); m. */
  static int sortDescending(float[] s, int[] r, int m) {
    for (int end = m - 1; end > 0; end--) {
      swap(s, r, 0, end);
      siftDown(s, r, 0, end);
    }
    return m;
  }

  /** Offers a hit to query a's bounded min-heap of k (hn[a] hits so far). */
  static void offer(float[] s, int[] r, int[] hn, int a, int k, float score, int row) {
    int m = hn[a];
    if (m < k) {
      int i = m;
      s[i] = score;
      r[i] = row;
      hn[a] = m + 1;
      while (i > 0) { // sift up
        int p = (i - 1) >>> 1;
        if (less(s, r, i, p)) {
          swap(s, r, i, p);
          i = p;
        } else {
          break;
        }
      }
    } else if (score > s[0] || (score == s[0] && row < r[0])) {
      s[0] = score;
      r[0] = row;
      siftDown(s, r, 0, m);
    }
  }

  /** Heap order: lower score first; on equal scores the higher row id is "smaller". */
  private static boolean less(float[] s, int[] r, int i, int j) {
    return s[i] < s[j] || (s[i] == s[j] && r[i] > r[j]);
  }

  private static void siftDown(float[] s, int[] r, int i, int m) {
    while (true) {
      int l = 2 * i + 1;
      if (l >= m) {
        return;
      }
      int c = (l + 1 < m && less(s, r, l + 1, l)) ? l + 1 : l;
      if (less(s, r, c, i)) {
        swap(s, r, c, i);
        i = c;
      } else {
        return;
      }
    }
  }

  private static void swap(float[] s, int[] r, int i, int j) {
    float ts = s[i];
    s[i] = s[j];
    s[j] = ts;
    int tr = r[i];
    r[i] = r[j];
    r[j] = tr;
  }
}
