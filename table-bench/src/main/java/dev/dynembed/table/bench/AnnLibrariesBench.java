package dev.dynembed.table.bench;

import dev.dynembed.table.engine.SimdVectorScorer;
import io.github.jbellis.jvector.graph.GraphIndexBuilder;
import io.github.jbellis.jvector.graph.GraphSearcher;
import io.github.jbellis.jvector.graph.ListRandomAccessVectorValues;
import io.github.jbellis.jvector.graph.OnHeapGraphIndex;
import io.github.jbellis.jvector.graph.SearchResult;
import io.github.jbellis.jvector.vector.VectorEncoding;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.lucene.codecs.hnsw.DefaultFlatVectorScorer;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.search.KnnCollector;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TaskExecutor;
import org.apache.lucene.util.hnsw.HnswConcurrentMergeBuilder;
import org.apache.lucene.util.hnsw.HnswGraphBuilder;
import org.apache.lucene.util.hnsw.HnswGraphSearcher;
import org.apache.lucene.util.hnsw.OnHeapHnswGraph;
import org.apache.lucene.util.hnsw.RandomAccessVectorValues;
import org.apache.lucene.util.hnsw.RandomVectorScorerSupplier;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The two HNSW libraries issue 32 named, on the same unit vectors, the same graph degree and
 * build beam, with nothing of the table around them: Lucene 9.12's {@code HnswGraphBuilder} (one
 * thread and its concurrent builder on every core) against JVector 1.0's {@code
 * GraphIndexBuilder} (its SIMD, like Lucene's, needs Java 20: on Java 17 both score in scalar
 * loops), and Lucene with the table's SIMD scorer ({@link SimdVectorScorer}, what the index
 * uses). Per library: build wall and CPU seconds, graph bytes, and
 * per search breadth the latency of one query and its recall@10 against the exact answer.
 */
@Command(name = "table-bench ann-libraries", mixinStandardHelpOptions = true)
public final class AnnLibrariesBench extends HnswOptions implements Callable<Integer> {
  @Option(names = "--rows", defaultValue = "100000",
      description = "rows in the table (default ${DEFAULT-VALUE})") int rows;
  @Option(names = "--dim", defaultValue = "100",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--data", defaultValue = "clustered", description = "clustered (1,000"
      + " Gaussian centres, noise 0.3) or random (uniform)") String data;
  @Option(names = "--queries", defaultValue = "500",
      description = "queries measured (default ${DEFAULT-VALUE})") int queries;
  @Option(names = "--breadth", defaultValue = "50,100,200", split = ",",
      description = "search breadths measured, candidates per query (default ${DEFAULT-VALUE})")
  int[] breadths;
  @Option(names = "--warmup-s", defaultValue = "5",
      description = "warm-up seconds (default ${DEFAULT-VALUE})") double warmupS;

  private static final int K = 10;
  private java.io.PrintStream out = System.out;

  public static void main(String[] args) {
    System.exit(new CommandLine(new AnnLibrariesBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    int cores = Runtime.getRuntime().availableProcessors();
    System.out.printf(Locale.ROOT, "HNSW libraries: %,d unit vectors x dim %d (%s), dot product,"
        + " max_conn %d, beam_width %d, %d queries (stored rows + 10%% noise) one at a time after"
        + " %.0f s of them; JDK %s, %d cores%n", rows, dim, data, maxConn, beamWidth, queries,
        warmupS, System.getProperty("java.version"), cores);
    List<float[]> vs = vectors();
    float[][] qs = queries(vs);
    int[][] truth = exact(vs, qs);
    System.out.println("| library | build wall s | build CPU s | graph MiB | breadth | ms / query"
        + " | recall@10 |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|");
    // every builder and searcher once on 10,000 vectors first, untimed: else the first one
    // measured pays the JIT for the ones after it (seen: 20.8 s vs 12.5 s for the same build)
    List<float[]> few = vs.subList(0, Math.min(rows, 10_000));
    float[][] fewQs = Arrays.copyOf(qs, Math.min(qs.length, 20));
    int[][] fewTruth = exact(few, fewQs);
    out = new java.io.PrintStream(java.io.OutputStream.nullOutputStream());
    lucene(few, fewQs, fewTruth, 1, true);
    lucene(few, fewQs, fewTruth, 1, false);
    jvector(few, fewQs, fewTruth);
    out = System.out;
    lucene(vs, qs, truth, 1, true);
    lucene(vs, qs, truth, 1, false);
    if (cores > 1) {
      lucene(vs, qs, truth, cores, true);
    }
    jvector(vs, qs, truth);
    return 0;
  }

  private List<float[]> vectors() {
    Random r = new Random(17);
    float[][] centres = new float[1000][dim];
    for (float[] c : centres) {
      for (int j = 0; j < dim; j++) {
        c[j] = (float) r.nextGaussian();
      }
    }
    List<float[]> out = new ArrayList<>(rows);
    for (int i = 0; i < rows; i++) {
      float[] v = new float[dim];
      if (data.equals("clustered")) {
        float[] c = centres[r.nextInt(centres.length)];
        for (int j = 0; j < dim; j++) {
          v[j] = c[j] + 0.3f * (float) r.nextGaussian();
        }
      } else if (data.equals("random")) {
        for (int j = 0; j < dim; j++) {
          v[j] = 2 * r.nextFloat() - 1;
        }
      } else {
        throw new IllegalArgumentException("--data must be clustered or random but was '" + data
            + "'");
      }
      out.add(unit(v));
    }
    return out;
  }

  private float[][] queries(List<float[]> vs) {
    Random r = new Random(99);
    float[][] q = new float[queries][];
    for (int a = 0; a < queries; a++) {
      float[] row = vs.get(r.nextInt(rows));
      float[] v = new float[dim];
      double noise = 0.1 / Math.sqrt(dim); // rows are unit vectors
      for (int j = 0; j < dim; j++) {
        v[j] = row[j] + (float) (noise * r.nextGaussian());
      }
      q[a] = unit(v);
    }
    return q;
  }

  private static float[] unit(float[] v) {
    double n = 0;
    for (float x : v) {
      n += x * x;
    }
    float inv = (float) (1 / Math.sqrt(n));
    for (int j = 0; j < v.length; j++) {
      v[j] *= inv;
    }
    return v;
  }

  /** The exact top 10 of every query by a full scan. */
  private int[][] exact(List<float[]> vs, float[][] qs) {
    int[][] out = new int[qs.length][];
    for (int a = 0; a < qs.length; a++) {
      int[] best = new int[K];
      float[] score = new float[K];
      Arrays.fill(score, Float.NEGATIVE_INFINITY);
      for (int i = 0; i < vs.size(); i++) {
        float[] v = vs.get(i);
        float s = 0;
        for (int j = 0; j < dim; j++) {
          s += v[j] * qs[a][j];
        }
        if (s > score[K - 1]) {
          int at = K - 1;
          while (at > 0 && score[at - 1] < s) {
            score[at] = score[at - 1];
            best[at] = best[at - 1];
            at--;
          }
          score[at] = s;
          best[at] = i;
        }
      }
      out[a] = best;
    }
    return out;
  }

  private interface Search {
    int[] top(float[] q, int breadth) throws IOException;
  }

  /** @param simd the table's SIMD scorer (what AnnIndex uses) instead of Lucene's default */
  private void lucene(List<float[]> vs, float[][] qs, int[][] truth, int threads, boolean simd)
      throws IOException {
    RandomAccessVectorValues.Floats values = RandomAccessVectorValues.fromFloats(vs, dim);
    VectorSimilarityFunction sim = VectorSimilarityFunction.DOT_PRODUCT;
    RandomVectorScorerSupplier scorers = simd ? SimdVectorScorer.supplier(sim, values)
        : DefaultFlatVectorScorer.INSTANCE.getRandomVectorScorerSupplier(sim, values);
    long cpu0 = cpuNanos();
    long t0 = System.nanoTime();
    HnswGraphBuilder single = HnswGraphBuilder.create(scorers, maxConn, beamWidth, 42, vs.size());
    OnHeapHnswGraph graph;
    if (threads == 1) {
      graph = single.build(vs.size());
    } else {
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        graph = new HnswConcurrentMergeBuilder(new TaskExecutor(pool), threads, scorers, maxConn,
            beamWidth, single.getGraph(), null).build(vs.size());
      } finally {
        pool.shutdownNow();
      }
    }
    double wall = (System.nanoTime() - t0) / 1e9;
    double cpu = (cpuNanos() - cpu0) / 1e9;
    report("Lucene 9.12.3" + (simd ? " + SIMD scorer, " : ", ") + threads
        + (threads == 1 ? " thread" : " threads"), wall, cpu, graph.ramBytesUsed(), qs, truth,
        (q, b) -> {
          KnnCollector c = HnswGraphSearcher.search(simd ? SimdVectorScorer.of(sim, values, q)
              : DefaultFlatVectorScorer.INSTANCE.getRandomVectorScorer(sim, values.copy(), q), b,
              graph, null, Integer.MAX_VALUE);
          ScoreDoc[] docs = c.topDocs().scoreDocs;
          int[] out = new int[Math.min(K, docs.length)];
          for (int i = 0; i < out.length; i++) {
            out[i] = docs[i].doc;
          }
          return out;
        });
  }

  private void jvector(List<float[]> vs, float[][] qs, int[][] truth) throws IOException {
    ListRandomAccessVectorValues values = new ListRandomAccessVectorValues(vs, dim);
    io.github.jbellis.jvector.vector.VectorSimilarityFunction dot =
        io.github.jbellis.jvector.vector.VectorSimilarityFunction.DOT_PRODUCT;
    long cpu0 = cpuNanos();
    long t0 = System.nanoTime();
    // neighbour overflow 1.2 and alpha 1.2: JVector's own defaults in its examples
    GraphIndexBuilder<float[]> builder = new GraphIndexBuilder<>(values, VectorEncoding.FLOAT32,
        dot, maxConn, beamWidth, 1.2f, 1.2f);
    OnHeapGraphIndex<float[]> graph = builder.build();
    double wall = (System.nanoTime() - t0) / 1e9;
    double cpu = (cpuNanos() - cpu0) / 1e9;
    report("JVector 1.0.2 (its build's own pool)", wall, cpu, graph.ramBytesUsed(), qs, truth,
        (q, b) -> {
          SearchResult r = GraphSearcher.search(q, b, values, VectorEncoding.FLOAT32, dot, graph,
              new io.github.jbellis.jvector.util.Bits.MatchAllBits(vs.size()));
          SearchResult.NodeScore[] nodes = r.getNodes();
          int[] out = new int[Math.min(K, nodes.length)];
          for (int i = 0; i < out.length; i++) {
            out[i] = nodes[i].node;
          }
          return out;
        });
  }

  private void report(String name, double wall, double cpu, long bytes, float[][] qs,
      int[][] truth, Search s) throws IOException {
    for (int b : breadths) {
      long warmUntil = System.nanoTime() + (out == System.out ? (long) (warmupS * 1e9) : 0);
      do {
        for (float[] q : qs) {
          s.top(q, b);
        }
      } while (System.nanoTime() < warmUntil);
      int hit = 0;
      long t0 = System.nanoTime();
      int[][] got = new int[qs.length][];
      for (int a = 0; a < qs.length; a++) {
        got[a] = s.top(qs[a], b);
      }
      double ms = (System.nanoTime() - t0) / 1e6 / qs.length;
      for (int a = 0; a < qs.length; a++) {
        for (int id : got[a]) {
          for (int t : truth[a]) {
            hit += t == id ? 1 : 0;
          }
        }
      }
      out.printf(Locale.ROOT, "| %s | %.1f | %.1f | %.1f | %d | %.3f | %.3f |%n", name,
          wall, cpu, bytes / 1048576.0, b, ms, (double) hit / (K * qs.length));
    }
  }

  /** CPU time of the whole process (every build thread). */
  private static long cpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean)
        ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
  }
}
