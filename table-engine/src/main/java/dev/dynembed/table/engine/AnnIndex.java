package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.Metric;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.search.KnnCollector;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TaskExecutor;
import org.apache.lucene.util.Bits;
import org.apache.lucene.util.hnsw.HnswConcurrentMergeBuilder;
import org.apache.lucene.util.hnsw.HnswGraphBuilder;
import org.apache.lucene.util.hnsw.HnswGraphSearcher;
import org.apache.lucene.util.hnsw.OnHeapHnswGraph;
import org.apache.lucene.util.hnsw.RandomAccessVectorValues;
import org.apache.lucene.util.hnsw.RandomVectorScorerSupplier;

/**
 * An approximate nearest-neighbour index of one store's rows in memory (design 0016): Lucene's
 * HNSW graph over copies of the rows, transformed so that one inner product is the exact top-k
 * score. Row r becomes {@code v_r = row_r / n_r} (all dim columns, the bias column included) with
 * {@code n_r = |row_r[0..w)|} for cosine and 1 for dot; a query q becomes {@code u = [q, 1] / |q|}
 * (cosine) or {@code [q, 1]} (dot), the 1 only with bias_last_dim. Then {@code v_r . u} is what
 * {@link TopK} scores, and the graph is searched by maximum inner product.
 *
 * <p>Ordinals are the store's row ids, so exclusions and keys need no map; a store replaced
 * (eviction, restore) invalidates the index. The graph finds candidates; each is then scored
 * exactly against its row as it is now, and rows added since the build are scanned exactly, so
 * scores are never stale, only the graph's navigation is (bounded by {@link #stale}).
 * Immutable once built; searches run concurrently.
 */
final class AnnIndex {
  /** Rows changed (added or updated) since the build that make an index stale: this share... */
  static final double STALE_FRACTION = 0.05;
  /** ...or at least this many. */
  static final long STALE_MIN = 1_000;

  final TableStore store;
  final Metric metric;
  final boolean bias;
  final int rows;
  final long updatesAtBuild;
  final double buildSeconds;
  private final int dim;
  private final OnHeapHnswGraph graph;
  private final RandomAccessVectorValues.Floats vectors;
  private final BitSet missing; // rows not ready at the build: never returned by the graph

  private AnnIndex(TableStore store, Metric metric, boolean bias, int rows, long updatesAtBuild,
      double buildSeconds, OnHeapHnswGraph graph, RandomAccessVectorValues.Floats vectors,
      BitSet missing) {
    this.store = store;
    this.metric = metric;
    this.bias = bias;
    this.rows = rows;
    this.updatesAtBuild = updatesAtBuild;
    this.buildSeconds = buildSeconds;
    this.dim = store.dim;
    this.graph = graph;
    this.vectors = vectors;
    this.missing = missing;
  }

  /** Heap bytes an index of {@code rows} rows of {@code dim} with {@code maxConn} will hold. */
  static long estimateBytes(long rows, int dim, int maxConn) {
    return rows * (16L + 4L * dim) + rows * (2L * maxConn * 4 + 64);
  }

  /**
   * Builds the index of the store's rows now in memory (a weakly consistent copy: rows updated
   * meanwhile may be copied before or after the update; the exact re-scoring hides that).
   */
  static AnnIndex build(TableStore t, Metric metric, boolean bias, int maxConn, int beamWidth,
      long seed) {
    long t0 = System.nanoTime();
    long updates = t.updatesTotal();
    int n = t.size();
    int dim = t.dim;
    int width = bias ? dim - 1 : dim;
    boolean cosine = metric == Metric.COSINE;
    List<float[]> vs = new ArrayList<>(n);
    BitSet missing = new BitSet();
    for (int r = 0; r < n; r++) {
      float[] v = new float[dim];
      if (t.isReady(r)) {
        System.arraycopy(t.rowPage(r), t.rowBase(r), v, 0, dim);
        if (cosine) {
          float norm = TopK.norm(v, 0, width);
          if (norm > 0f) {
            for (int j = 0; j < dim; j++) {
              v[j] /= norm;
            }
          } else {
            java.util.Arrays.fill(v, 0f);
          }
        }
      } else {
        missing.set(r);
      }
      vs.add(v);
    }
    RandomAccessVectorValues.Floats values = RandomAccessVectorValues.fromFloats(vs, dim);
    try {
      RandomVectorScorerSupplier scorers = SimdVectorScorer.supplier(similarity(metric, bias),
          values);
      OnHeapHnswGraph graph = n == 0 ? null : graph(scorers, maxConn, beamWidth, seed, n);
      return new AnnIndex(t, metric, bias, n, updates, (System.nanoTime() - t0) / 1e9, graph,
          values, missing);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // on-heap vectors: not expected
    }
  }

  /**
   * The graph's similarity: cosine without a bias column has unit vectors, whose dot product
   * Lucene scores as a distance ((1 + dot) / 2); otherwise the maximum inner product (the same
   * order as the dot product, for vectors of any norm).
   */
  private static VectorSimilarityFunction similarity(Metric metric, boolean bias) {
    return metric == Metric.COSINE && !bias ? VectorSimilarityFunction.DOT_PRODUCT
        : VectorSimilarityFunction.MAXIMUM_INNER_PRODUCT;
  }

  /**
   * Threads a build uses: {@code -Ddynembed.indexBuildThreads=N}, else half the cores (a shard
   * keeps the other half for its calls), at least 1.
   */
  static int buildThreads() {
    int cores = Runtime.getRuntime().availableProcessors();
    return Math.max(1, Integer.getInteger("dynembed.indexBuildThreads", cores / 2));
  }

  /** The graph of n vectors: Lucene's concurrent builder on several threads, else one. */
  private static OnHeapHnswGraph graph(RandomVectorScorerSupplier scorers, int maxConn,
      int beamWidth, long seed, int n) throws IOException {
    int threads = Math.min(buildThreads(), Math.max(1, n / 1024));
    HnswGraphBuilder single = HnswGraphBuilder.create(scorers, maxConn, beamWidth, seed, n);
    if (threads == 1) {
      return single.build(n);
    }
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(
        threads, r -> {
          Thread t = new Thread(r, "index-build");
          t.setDaemon(true);
          return t;
        });
    try {
      return new HnswConcurrentMergeBuilder(new TaskExecutor(pool), threads, scorers, maxConn,
          beamWidth, single.getGraph(), null).build(n);
    } finally {
      pool.shutdownNow();
    }
  }

  /** Heap bytes: the graph and the vector copies. */
  long bytes() {
    return (graph == null ? 0 : graph.ramBytesUsed()) + (long) rows * (16L + 4L * dim);
  }

  /** Whether the store is the one indexed and served it for this metric and bias option. */
  boolean serves(TableStore t, Metric m, boolean b) {
    return t == store && normalize(m) == metric && b == bias;
  }

  static Metric normalize(Metric m) {
    return m == Metric.COSINE ? Metric.COSINE : Metric.DOT;
  }

  /** Rows added or updated since the build passed the staleness bound: time for a rebuild. */
  boolean stale() {
    long changed = (store.size() - rows) + (store.updatesTotal() - updatesAtBuild);
    return changed > Math.max(STALE_MIN, (long) (rows * STALE_FRACTION));
  }

  /**
   * The k best rows per query: the graph's {@code breadth} candidates (excluded rows skipped),
   * plus the rows added since the build, each scored exactly on its current values. Queries are
   * checked by the caller ({@link TopK#check}).
   */
  TopKHits search(float[] queries, int q, int k, int breadth, PackedKeys exclude) {
    TableStore t = store;
    int width = bias ? dim - 1 : dim;
    boolean cosine = metric == Metric.COSINE;
    BitSet excluded = TopK.excludedRows(t, exclude);
    Bits accept = new Bits() {
      @Override
      public boolean get(int index) {
        return !excluded.get(index) && !missing.get(index);
      }

      @Override
      public int length() {
        return rows;
      }
    };
    int n = t.size();
    int kk = TopK.hitsPerQuery(t, q, k);
    float[] u = new float[dim];
    PackedKeys.Builder keys = new PackedKeys.Builder(q * Math.max(1, kk));
    float[] scores = new float[q * kk];
    int[] counts = new int[q];
    int at = 0;
    for (int a = 0; a < q; a++) {
      System.arraycopy(queries, a * width, u, 0, width);
      float qnorm = TopK.norm(queries, a * width, width);
      if (bias) {
        u[width] = 1f;
      }
      if (cosine && qnorm > 0f) {
        for (int j = 0; j < dim; j++) {
          u[j] /= qnorm;
        }
      }
      int[] cand = candidates(u, Math.max(kk, breadth), accept);
      float[] hs = new float[kk];
      int[] hr = new int[kk];
      int[] hn = {0};
      for (int row : cand) {
        TopK.offer(hs, hr, hn, 0, kk, score(t, row, queries, a * width, width, qnorm), row);
      }
      for (int row = rows; row < n; row++) { // added since the build: scanned exactly
        if (!excluded.get(row) && t.isReady(row)) {
          TopK.offer(hs, hr, hn, 0, kk, score(t, row, queries, a * width, width, qnorm), row);
        }
      }
      int m = TopK.sortDescending(hs, hr, hn[0]);
      for (int i = 0; i < m; i++) {
        t.appendKey(hr[i], keys);
        scores[at++] = hs[i];
      }
      counts[a] = m;
    }
    return new TopKHits(keys.build(), java.util.Arrays.copyOf(scores, at), counts, true);
  }

  private int[] candidates(float[] u, int breadth, Bits accept) {
    if (graph == null) {
      return new int[0];
    }
    try {
      KnnCollector c = HnswGraphSearcher.search(SimdVectorScorer.of(similarity(metric, bias),
          vectors, u), breadth, graph, accept, Integer.MAX_VALUE);
      ScoreDoc[] docs = c.topDocs().scoreDocs;
      int[] out = new int[docs.length];
      for (int i = 0; i < docs.length; i++) {
        out[i] = docs[i].doc;
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@link TopK}'s score of a row for query a, from the row as it is now. */
  private float score(TableStore t, int row, float[] queries, int qo, int width, float qnorm) {
    float[] page = t.rowPage(row);
    int base = t.rowBase(row);
    boolean cosine = metric == Metric.COSINE;
    return TopK.score(page, base, queries, qo, width, bias, cosine,
        cosine ? TopK.norm(page, base, width) : 1f, qnorm);
  }

  /** Refuses build parameters out of range, naming them. */
  static void check(String table, int maxConn, int beamWidth, TableStore t, boolean bias) {
    if (maxConn < 2 || maxConn > 512) {
      throw TableException.invalid("table '%s': max_conn must be in [2, 512] but was %d", table,
          Integer.toUnsignedLong(maxConn));
    }
    if (beamWidth < 1 || beamWidth > 3200) {
      throw TableException.invalid("table '%s': beam_width must be in [1, 3200] but was %d",
          table, Integer.toUnsignedLong(beamWidth));
    }
    if (bias && t.dim < 2) {
      throw TableException.invalid("table '%s': bias_last_dim needs dim >= 2 but the table has"
          + " dim %d", table, t.dim);
    }
    if (t.config().getDiskTier()) {
      throw TableException.invalid("table '%s' has a disk tier: the approximate index covers"
          + " rows in memory, so its top-k stays exact", table);
    }
  }
}
