package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.v1.IndexInfo;
import dev.dynembed.table.v1.Metric;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The approximate top-k index against the exact scan (docs/design/0016-approximate-top-k.md):
 * build time and memory, then per search breadth the latency of one query and its recall@k
 * against the exact answer; and the exact scan against its own limit (one sequential read of
 * the same floats).
 */
@Command(name = "table-bench ann", mixinStandardHelpOptions = true)
public final class AnnBench extends HnswOptions implements Callable<Integer> {
  @Option(names = "--rows", defaultValue = "1000000",
      description = "rows in the table (default ${DEFAULT-VALUE})") int rows;
  @Option(names = "--dim", defaultValue = "100",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--data", defaultValue = "random", description = "random (uniform rows),"
      + " clustered (1,000 Gaussian clusters, as trained embeddings group) or zipf (trained by"
      + " Zipf(1) draws: each draw moves its row 10% towards its key's topic, so frequent keys"
      + " cluster and rare ones stay near their random start)") String data;
  @Option(names = "--zipf-draws", defaultValue = "5000000", description = "zipf: key draws")
  int zipfDraws;
  @Option(names = "--queries", defaultValue = "200",
      description = "queries measured (default ${DEFAULT-VALUE})") int queries;
  @Option(names = "--query-from", defaultValue = "rows", description = "rows: stored rows,"
      + " drawn uniformly, with 10% noise (a neighbour query: what nearest and analogy ask);"
      + " zipf: the same with the rows drawn Zipf(1), as traffic draws keys (mostly the trained"
      + " rows of --data zipf); random: Gaussian vectors (no structure: the hardest case);"
      + " several, comma-separated, are asked of the same index in turn", split = ",")
  String[] queryFroms;
  @Option(names = "-k", defaultValue = "10",
      description = "neighbours per query (default ${DEFAULT-VALUE})") int k;
  @Option(names = "--breadth", defaultValue = "50,100,200,400", split = ",",
      description = "search breadths measured, candidates per query (default ${DEFAULT-VALUE})")
  int[] breadths;
  @Option(names = "--shards", defaultValue = "0", description = "0: in process; N: N shard"
      + " processes on loopback") int shards;
  @Option(names = "--server-heap", defaultValue = "4g",
      description = "heap of each shard process (default ${DEFAULT-VALUE})") String serverHeap;
  @Option(names = "--build-threads", description = "in process: threads of the index build"
      + " (-Ddynembed.indexBuildThreads; default half the cores)") Integer buildThreads;
  @Option(names = "--warmup-s", defaultValue = "10", description = "seconds of the same queries"
      + " before each timed pass (the client's and the shards' JIT; a single pass of 200"
      + " queries left 3 JVMs on 2 cores at 2-3x their warm latency)") double warmupS;

  public static void main(String[] args) {
    System.exit(new CommandLine(new AnnBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    Path dir = Files.createTempDirectory("ann-bench");
    System.out.printf(Locale.ROOT, "approximate top-k: %,d rows x dim %d (%s), cosine, k %d,"
        + " %d queries (%s) one at a time after %.0f s of them, HNSW max_conn %d beam_width %d;"
        + " %s; JDK %s, %d cores%n", rows, dim, data, k, queries, String.join(", ", queryFroms),
        warmupS, maxConn, beamWidth, shards == 0 ? "in process"
            : shards + " shard processes on loopback", System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors());
    try (LocalShardProcesses procs = shards == 0 ? null
            : new LocalShardProcesses(shards, 0, dir, serverHeap, "");
        TableClient c = procs == null ? TableClients.inProcess(dir)
            : TableClients.connect(procs.endpoints())) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("ann", dim)
          .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.uniform(-1f, 1f, 5))
          .build());
      fill(t);
      if (buildThreads != null) {
        System.setProperty("dynembed.indexBuildThreads", String.valueOf(buildThreads));
      }
      long t0 = System.nanoTime();
      List<IndexInfo> infos = t.buildIndex(Metric.COSINE, false, maxConn, beamWidth, true);
      double build = (System.nanoTime() - t0) / 1e9;
      long bytes = infos.stream().mapToLong(IndexInfo::getBytes).sum();
      System.out.printf(Locale.ROOT, "index built in %.1f s (wall, shards in parallel),"
          + " %,d MiB (%.0f bytes a row; the rows themselves %d)%n", build, bytes >> 20,
          (double) bytes / rows, 4 * dim);
      double exactMs = 0;
      for (String from : queryFroms) {
        float[] qs = queries(t, from);
        TopKResult[] exact = new TopKResult[queries];
        exactMs = time(t, qs, TopKOptions.COSINE, exact);
        System.out.println("queries: " + from);
        System.out.println("| search | ms / query | speed-up vs exact | recall@" + k + " (keys)"
            + " | recall@" + k + " (scores) | queries with no hit |");
        System.out.println("|---|---:|---:|---:|---:|---:|");
        System.out.printf(Locale.ROOT, "| exact scan | %.2f | 1.0 | 1.000 | 1.000 | 0 |%n",
            exactMs);
        List<String> misses = new java.util.ArrayList<>();
        for (int b : breadths) {
          TopKResult[] approx = new TopKResult[queries];
          double ms = time(t, qs, TopKOptions.COSINE.approximate(b), approx);
          System.out.printf(Locale.ROOT, "| breadth %d | %.3f | %.1f | %.3f | %.3f | %d |%n", b,
              ms, exactMs / ms, recall(approx, exact), scoreRecall(approx, exact),
              lost(approx, exact));
          misses.add(String.format(Locale.ROOT, "breadth %d: %s%s", b, misses(approx, exact),
              byQueryKey(approx, exact)));
        }
        System.out.println("misses (" + from + " queries), by the missed key's rank in the"
            + " Zipf draws (key i is the i-th most drawn), and the k-th answer's score below"
            + " the exact k-th (relative; median / 90th percentile / max over queries):");
        misses.forEach(m -> System.out.println("  " + m));
      }
      if (shards == 0) {
        scanLimit(exactMs);
      }
    }
    return 0;
  }

  private void fill(EmbeddingTable t) {
    Random r = new Random(17);
    float[][] centers = new float[1000][dim];
    for (float[] ct : centers) {
      for (int j = 0; j < dim; j++) {
        ct[j] = (float) r.nextGaussian();
      }
    }
    int batch = 4096;
    for (int i = 0; i < rows; i += batch) {
      int n = Math.min(batch, rows - i);
      String[] keys = new String[n];
      for (int j = 0; j < n; j++) {
        keys[j] = "key" + (i + j);
      }
      float[] rowsNow = t.findOrInsert(keys);
      if (data.equals("clustered")) { // SGD at rate 1: row := center + noise
        float[] g = new float[n * dim];
        for (int j = 0; j < n; j++) {
          float[] ct = centers[r.nextInt(centers.length)];
          for (int d = 0; d < dim; d++) {
            g[j * dim + d] = rowsNow[j * dim + d] - (ct[d] + 0.3f * (float) r.nextGaussian());
          }
        }
        t.applyGradients(keys, g, 0f, 1);
      } else if (!data.equals("random") && !data.equals("zipf")) {
        throw new IllegalArgumentException("--data must be random, clustered or zipf but was '"
            + data + "'");
      }
    }
    if (data.equals("zipf")) {
      train(t, centers);
    }
  }

  /** Zipf(1) draws over the keys; each moves its row 10% towards its key's topic centre. */
  private void train(EmbeddingTable t, float[][] centers) {
    Zipf z = new Zipf(rows, 1.0);
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(23);
    int batch = 4096;
    for (int done = 0; done < zipfDraws; done += batch) {
      java.util.Map<String, Integer> draws = new java.util.LinkedHashMap<>();
      for (int i = 0; i < batch; i++) {
        draws.merge("key" + z.next(rnd), 1, Integer::sum);
      }
      String[] keys = draws.keySet().toArray(new String[0]);
      float[] now = t.find(keys).rows();
      float[] g = new float[keys.length * dim];
      for (int j = 0; j < keys.length; j++) {
        float[] ct = centers[Math.floorMod(keys[j].hashCode(), centers.length)];
        // n draws of one key in a batch: (1 - 0.9^n) of the way, as n steps of 10% would go
        float step = (float) (1 - Math.pow(0.9, draws.get(keys[j])));
        for (int d = 0; d < dim; d++) {
          g[j * dim + d] = step * (now[j * dim + d] - ct[d]);
        }
      }
      t.applyGradients(keys, g, 0f, 1);
    }
  }

  /** The key number each query row was drawn from (null for random queries). */
  private int[] queryKeys;

  /**
   * Recall split by the query's own key number (with --data zipf, key i is the i-th most drawn:
   * below 10,000 the trained rows, from 100,000 on rows drawn about once or never).
   */
  private String byQueryKey(TopKResult[] approx, TopKResult[] exact) {
    if (queryKeys == null) {
      return "";
    }
    long[] bounds = {0, 10_000, 100_000, Long.MAX_VALUE};
    String[] names = {"<1e4", "1e4-1e5", ">=1e5"};
    StringBuilder b = new StringBuilder("; recall by the query's own key:");
    for (int g = 0; g < names.length; g++) {
      long lo = bounds[g];
      long hi = bounds[g + 1];
      java.util.function.IntPredicate in = a -> queryKeys[a] >= lo && queryKeys[a] < hi;
      long n = java.util.stream.IntStream.range(0, exact.length).filter(in).count();
      double r = recall(approx, exact, in);
      b.append(String.format(Locale.ROOT, " %s %s (%d queries)", names[g],
          Double.isNaN(r) ? "-" : String.format(Locale.ROOT, "%.3f", r), n));
    }
    return b.toString();
  }

  private float[] queries(EmbeddingTable t, String queryFrom) {
    Random r = new Random(99);
    queryKeys = null;
    float[] q = new float[queries * dim];
    if (queryFrom.equals("random")) {
      for (int i = 0; i < q.length; i++) {
        q[i] = (float) r.nextGaussian();
      }
      return q;
    }
    if (!queryFrom.equals("rows") && !queryFrom.equals("zipf")) {
      throw new IllegalArgumentException("--query-from must be rows, zipf or random but was '"
          + queryFrom + "'");
    }
    Zipf z = new Zipf(rows, 1.0);
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(31);
    queryKeys = new int[queries];
    for (int a = 0; a < queries; a++) {
      int key = queryFrom.equals("zipf") ? z.next(rnd) : r.nextInt(rows);
      queryKeys[a] = key;
      float[] row = t.find("key" + key).rows();
      double norm = 0;
      for (float x : row) {
        norm += x * x;
      }
      double noise = 0.1 * Math.sqrt(norm / dim);
      for (int j = 0; j < dim; j++) {
        q[a * dim + j] = row[j] + (float) (noise * r.nextGaussian());
      }
    }
    return q;
  }

  /**
   * Mean ms of one query, each sent alone, after at least one pass of the same queries and
   * {@code --warmup-s} seconds of them.
   */
  private double time(EmbeddingTable t, float[] qs, TopKOptions o, TopKResult[] out) {
    long warmUntil = System.nanoTime() + (long) (warmupS * 1e9);
    do {
      pass(t, qs, o, out);
    } while (System.nanoTime() < warmUntil);
    long t0 = System.nanoTime();
    pass(t, qs, o, out);
    return (System.nanoTime() - t0) / 1e6 / queries;
  }

  /** Every query once, each sent alone. */
  private void pass(EmbeddingTable t, float[] qs, TopKOptions o, TopKResult[] out) {
    for (int a = 0; a < queries; a++) {
      out[a] = t.topK(java.util.Arrays.copyOfRange(qs, a * dim, (a + 1) * dim), 1, k, o);
    }
  }

  private static double recall(TopKResult[] approx, TopKResult[] exact) {
    return recall(approx, exact, a -> true);
  }

  /** Recall over the queries {@code which} accepts (NaN if none). */
  private static double recall(TopKResult[] approx, TopKResult[] exact,
      java.util.function.IntPredicate which) {
    int hit = 0;
    int total = 0;
    for (int a = 0; a < exact.length; a++) {
      if (!which.test(a)) {
        continue;
      }
      Set<String> truth = new HashSet<>(List.of(exact[a].keys()[0]));
      for (String key : approx[a].keys()[0]) {
        hit += truth.contains(key) ? 1 : 0;
      }
      total += truth.size();
    }
    return (double) hit / total;
  }

  /**
   * Where the missed rows are: counts of missed exact top-k keys by decade of their key number
   * (with --data zipf, key i is the i-th most drawn, so low numbers are the most trained rows),
   * and how far below the exact k-th score the search's k-th answer scores (relative).
   */
  private static String misses(TopKResult[] approx, TopKResult[] exact) {
    int[] decades = new int[8];
    double[] gaps = new double[exact.length];
    for (int a = 0; a < exact.length; a++) {
      Set<String> got = new HashSet<>(List.of(approx[a].keys()[0]));
      for (String key : exact[a].keys()[0]) {
        if (!got.contains(key) && key.startsWith("key")) {
          int n = Integer.parseInt(key.substring(3));
          decades[Math.min(7, n == 0 ? 0 : (int) Math.log10(n) + 1)]++;
        }
      }
      float[] e = exact[a].scores()[0];
      float[] s = approx[a].scores()[0];
      if (e.length > 0) {
        float ek = e[e.length - 1];
        float sk = s.length >= e.length ? s[e.length - 1] : Float.NEGATIVE_INFINITY;
        gaps[a] = Math.max(0, (ek - sk) / Math.max(1e-9, Math.abs(ek)));
      }
    }
    java.util.Arrays.sort(gaps);
    StringBuilder b = new StringBuilder("missed keys by number: ");
    String[] names = {"0", "1-9", "10-99", "100-999", "1e3-1e4", "1e4-1e5", "1e5-1e6", "1e6+"};
    for (int d = 0; d < decades.length; d++) {
      b.append(names[d]).append(':').append(decades[d]).append(d + 1 < decades.length ? " " : "");
    }
    return b.append(String.format(Locale.ROOT, "; k-th score gap %.2e / %.2e / %.2e",
        gaps[gaps.length / 2], gaps[(int) (gaps.length * 0.9)], gaps[gaps.length - 1]))
        .toString();
  }

  /** Queries none of whose exact top k the search found: it ended in another part of the graph. */
  private static int lost(TopKResult[] approx, TopKResult[] exact) {
    int lost = 0;
    for (int a = 0; a < exact.length; a++) {
      Set<String> truth = new HashSet<>(List.of(exact[a].keys()[0]));
      boolean any = false;
      for (String key : approx[a].keys()[0]) {
        any |= truth.contains(key);
      }
      lost += any || truth.isEmpty() ? 0 : 1;
    }
    return lost;
  }

  /**
   * Recall by score, as ann-benchmarks counts it: an answer is a hit when its score is at least
   * the exact k-th best score (less 1e-5 relative). It differs from the recall by keys only when
   * rows tie: rows trained to the same point (every frequent key of a topic, in --data zipf)
   * score alike, and the exact top k is then one arbitrary pick among them. Every score the
   * index returns is exact (candidates are re-scored on their rows), so this cannot flatter it.
   */
  private static double scoreRecall(TopKResult[] approx, TopKResult[] exact) {
    int hit = 0;
    int total = 0;
    for (int a = 0; a < exact.length; a++) {
      float[] truth = exact[a].scores()[0];
      if (truth.length == 0) {
        continue;
      }
      float kth = truth[truth.length - 1];
      float floor = kth - 1e-5f * Math.max(1f, Math.abs(kth));
      int got = 0;
      for (float s : approx[a].scores()[0]) {
        got += s >= floor ? 1 : 0;
      }
      hit += Math.min(got, truth.length);
      total += truth.length;
    }
    return (double) hit / total;
  }

  /** One sequential pass over as many floats as the table's rows hold: the scan's floor. */
  private void scanLimit(double exactMs) {
    float[] floats = new float[rows * dim];
    Random r = new Random(1);
    for (int i = 0; i < floats.length; i += 97) {
      floats[i] = r.nextFloat();
    }
    double best = Double.MAX_VALUE;
    float sink = 0;
    for (int pass = 0; pass < 10; pass++) {
      long t0 = System.nanoTime();
      float s0 = 0;
      float s1 = 0;
      float s2 = 0;
      float s3 = 0;
      for (int i = 0; i + 3 < floats.length; i += 4) {
        s0 += floats[i];
        s1 += floats[i + 1];
        s2 += floats[i + 2];
        s3 += floats[i + 3];
      }
      sink += s0 + s1 + s2 + s3;
      best = Math.min(best, (System.nanoTime() - t0) / 1e6);
    }
    double gb = 4.0 * rows * dim / 1e9;
    System.out.printf(Locale.ROOT, "exact scan: %.1f ms a query = %.2f GB/s of rows (%.0fM"
        + " rows/s); a sequential read of the same %.2f GB: %.1f ms = %.2f GB/s; the scan is"
        + " %.2fx its floor (sink %s)%n", exactMs, gb / (exactMs / 1e3), rows / exactMs / 1e3,
        gb, best, gb / (best / 1e3), exactMs / best, sink == 0 ? "0" : "x");
  }
}
