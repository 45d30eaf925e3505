package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.IndexInfo;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The approximate top-k index (docs/design/0016-approximate-top-k.md), in process and on 2
 * loopback shards: recall against the exact answer, exclusions, rows added or updated after the
 * build, the rebuild after a restore, the memory counted, bad options refused.
 */
class ApproximateTopKTest {
  @TempDir Path dir;

  private static final int DIM = 32;
  private static final int ROWS = 20_000;

  private TableClient client(int shards, List<AutoCloseable> keep) throws Exception {
    return LoopbackCluster.client(shards, dir, keep);
  }

  private static List<ShardEngine> engines(TableClient c, List<AutoCloseable> keep) {
    return LoopbackCluster.engines(c, keep);
  }

  private static void settle(TableClient c, List<AutoCloseable> keep) {
    for (ShardEngine e : engines(c, keep)) {
      e.awaitIndexes();
    }
  }

  private static TableConfig config(String name) {
    return TableConfigs.builder(name, DIM).setOptimizer(TableConfigs.sgd(1f))
        .setInitializer(TableConfigs.uniform(-1f, 1f, 7)).build();
  }

  private static String[] keys(int n, String prefix) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = prefix + i;
    }
    return k;
  }

  private static float[] queries(int q, int width, long seed) {
    Random r = new Random(seed);
    float[] out = new float[q * width];
    for (int i = 0; i < out.length; i++) {
      out[i] = (float) r.nextGaussian();
    }
    return out;
  }

  private static double recall(TopKResult approx, TopKResult exact) {
    int hit = 0;
    int total = 0;
    for (int a = 0; a < exact.keys().length; a++) {
      Set<String> truth = Set.of(exact.keys()[a]);
      for (String k : approx.keys()[a]) {
        hit += truth.contains(k) ? 1 : 0;
      }
      total += truth.size();
    }
    return (double) hit / total;
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void recallAgainstTheExactAnswer_exclusions_andTheMemoryCounted(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      EmbeddingTable t = c.createTable(config("ann"));
      String[] keys = keys(ROWS, "k");
      for (int i = 0; i < ROWS; i += 4096) {
        t.findOrInsert(java.util.Arrays.copyOfRange(keys, i, Math.min(ROWS, i + 4096)));
      }
      long bytesBefore = t.describe().getCounters().getBytesUsed();
      for (ShardEngine e : engines(c, keep)) { // no index yet: a top-k scans, off the event loop
        assertFalse(e.isShortSearch("ann", 1, Metric.COSINE, false, 100));
      }
      // this build on Lucene's concurrent builder (2 threads), the other tests' on one
      System.setProperty("dynembed.indexBuildThreads", "2");
      List<IndexInfo> built;
      try {
        built = t.buildIndex(Metric.COSINE, false, 16, 100, true);
      } finally {
        System.clearProperty("dynembed.indexBuildThreads");
      }
      assertEquals(Math.max(1, shards), built.size());
      long rows = 0;
      for (IndexInfo i : built) {
        assertEquals(IndexInfo.State.READY, i.getState());
        rows += i.getRows();
      }
      assertEquals(ROWS, rows);
      var counters = t.describe().getCounters();
      assertTrue(counters.getIndexBytes() > (long) ROWS * DIM * 4, counters.toString());
      assertTrue(counters.getBytesUsed() >= bytesBefore + counters.getIndexBytes(),
          counters.toString());

      // servers answer a short search of the index on the thread that read it, a scan in their
      // pool: only a search of the index, of at most SHORT_SEARCH_CANDIDATES candidates, is short
      for (ShardEngine e : engines(c, keep)) {
        assertTrue(e.isShortSearch("ann", 1, Metric.COSINE, false, 100));
        assertTrue(e.isShortSearch("ann", 40, Metric.COSINE, false, 100));
        assertFalse(e.isShortSearch("ann", 41, Metric.COSINE, false, 100), "4,100 candidates");
        assertFalse(e.isShortSearch("ann", 1, Metric.COSINE, false, 0), "exact");
        assertFalse(e.isShortSearch("ann", 1, Metric.DOT, false, 100), "not the index's metric");
        assertFalse(e.isShortSearch("ann", 1, Metric.COSINE, true, 100), "bias option");
        assertFalse(e.isShortSearch("ann", 1, Metric.COSINE, false, ROWS), "as broad as it");
        assertFalse(e.isShortSearch("nope", 1, Metric.COSINE, false, 100), "no such table");
      }
      int q = 50;
      float[] qs = queries(q, DIM, 11);
      TopKResult exact = t.topK(qs, q, 10, TopKOptions.COSINE);
      TopKResult approx = t.topK(qs, q, 10, TopKOptions.COSINE.approximate(100));
      assertEquals(0, exact.approximateShards());
      assertEquals(Math.max(1, shards), approx.approximateShards());
      double recall = recall(approx, exact);
      System.err.printf("approximate top-k, %d shards: recall@10 %.3f at breadth 100%n", shards,
          recall);
      assertTrue(recall >= 0.9, "recall@10 " + recall + " with breadth 100");
      for (int a = 0; a < q; a++) { // candidates are scored exactly: same score for a same key
        for (int j = 0; j < approx.keys()[a].length; j++) {
          int at = List.of(exact.keys()[a]).indexOf(approx.keys()[a][j]);
          if (at >= 0) {
            assertEquals(exact.scores()[a][at], approx.scores()[a][j], 0f);
          }
        }
      }
      // the exact top-3 of every query excluded: none comes back
      Set<String> banned = new HashSet<>();
      for (String[] row : exact.keys()) {
        banned.addAll(List.of(row).subList(0, 3));
      }
      TopKResult without = t.topK(qs, q, 10,
          TopKOptions.COSINE.excluding(new ArrayList<>(banned)).approximate(100));
      for (String[] row : without.keys()) {
        for (String k : row) {
          assertFalse(banned.contains(k), k + " was excluded");
        }
      }
      // another metric than the index's: exact
      TopKResult dot = t.topK(qs, q, 10, TopKOptions.DOT.approximate(100));
      assertEquals(0, dot.approximateShards());
      assertArrayEquals(t.topK(qs, q, 10, TopKOptions.DOT).keys(), dot.keys());
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void smallTables_answerExactly_newAndUpdatedRowsAreSeen_andStaleIndexesRebuild(int shards)
      throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      EmbeddingTable t = c.createTable(config("fresh").toBuilder().setDim(4)
          .setInitializer(TableConfigs.uniform(-1f, 1f, 3)).build());
      String[] small = keys(40, "s");
      t.findOrInsert(small);
      t.buildIndex(Metric.DOT, false, 0, 0, true);
      float[] q = {1f, 0.5f, -0.25f, 2f};
      // a search as broad as the table is the exact scan, bit for bit
      TopKResult exact = t.topK(q, 1, 5, TopKOptions.DOT);
      TopKResult broad = t.topK(q, 1, 5, TopKOptions.DOT.approximate(64));
      assertArrayEquals(exact.keys(), broad.keys());
      assertArrayEquals(exact.scores()[0], broad.scores()[0], 0f);

      String[] more = keys(3000, "m");
      t.findOrInsert(more);
      t.buildIndex(Metric.DOT, false, 0, 0, true);
      long builds = builds(t);
      // a key added after the build with the best score there is: found at once (scanned)
      t.findOrInsert("best");
      float[] row = t.find("best").rows();
      float[] g = new float[4];
      for (int j = 0; j < 4; j++) {
        g[j] = row[j] - 100f * q[j]; // SGD rate 1: the row becomes 100 q
      }
      t.applyGradients(new String[] {"best"}, g, 0f, 1);
      TopKResult r = t.topK(q, 1, 3, TopKOptions.DOT.approximate(32));
      assertTrue(r.approximateShards() > 0);
      assertEquals("best", r.keys()[0][0]);
      // past the staleness bound (1,000 changed rows, or 5%), the index is rebuilt
      float[] tiny = new float[more.length * 4];
      java.util.Arrays.fill(tiny, 1e-3f);
      t.applyGradients(more, tiny, 0f, 2);
      t.topK(q, 1, 3, TopKOptions.DOT.approximate(32)); // notices, starts the rebuild
      settle(c, keep);
      assertTrue(builds(t) > builds, "no rebuild after " + more.length + " updates");
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  private static long builds(EmbeddingTable t) {
    long b = 0;
    for (IndexInfo i : t.indexInfo()) {
      b += i.getBuilds();
    }
    return b;
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void aRestoredTable_getsItsIndexRebuilt(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      EmbeddingTable t = c.createTable(config("restored"));
      t.findOrInsert(keys(5000, "r"));
      t.save(dir.resolve("ckpt"), 1);
      t.buildIndex(Metric.COSINE, false, 0, 0, true);
      t.findOrInsert(keys(100, "later"));
      assertEquals(5000, t.restore(dir.resolve("ckpt")));
      settle(c, keep);
      float[] qs = queries(5, DIM, 3);
      TopKResult approx = t.topK(qs, 5, 10, TopKOptions.COSINE.approximate(200));
      assertEquals(Math.max(1, shards), approx.approximateShards());
      long rows = 0;
      for (IndexInfo i : t.indexInfo()) {
        rows += i.getRows();
      }
      assertEquals(5000, rows, "the index covers the restored rows");
      for (String[] row : approx.keys()) {
        for (String k : row) {
          assertTrue(k.startsWith("r"), k + " is not in the restored table");
        }
      }
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }

  /**
   * A build waited for is bounded by the client's index-build deadline, not by the checkpoint
   * deadline (a 1M-row graph with max_conn 48 outlasted the latter's 10 minutes).
   */
  @org.junit.jupiter.api.Test
  void aWaitedBuild_outlastsTheCheckpointDeadline_andEndsAtItsOwn() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient slow = TableClients.connect(cluster.endpoints, ClientOptions.builder()
            .checkpointDeadline(java.time.Duration.ofMillis(50)).build());
        TableClient hasty = TableClients.connect(cluster.endpoints, ClientOptions.builder()
            .indexBuildDeadline(java.time.Duration.ofMillis(50)).build())) {
      EmbeddingTable t = slow.createTable(config("long"));
      String[] keys = keys(ROWS, "k");
      for (int i = 0; i < ROWS; i += 4096) {
        t.findOrInsert(java.util.Arrays.copyOfRange(keys, i, Math.min(ROWS, i + 4096)));
      }
      long t0 = System.nanoTime();
      List<IndexInfo> infos = t.buildIndex(Metric.COSINE, false, 32, 200, true);
      assertTrue(System.nanoTime() - t0 > 50_000_000L, "the build was too quick to show it");
      for (IndexInfo i : infos) {
        assertEquals(IndexInfo.State.READY, i.getState());
      }
      RuntimeException e = assertThrows(RuntimeException.class, () -> hasty.openTable("long")
          .buildIndex(Metric.COSINE, false, 32, 200, true));
      assertTrue(e.getMessage().contains("DEADLINE_EXCEEDED"), e.getMessage());
    }
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void badOptions_areRefusedNamingThem(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = client(shards, keep)) {
      EmbeddingTable t = c.createTable(config("bad"));
      t.findOrInsert(keys(10, "b"));
      TableException e = assertThrows(TableException.class,
          () -> t.buildIndex(Metric.COSINE, false, 1, 0, true));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().contains("max_conn must be in [2, 512] but was 1"),
          e.getMessage());
      e = assertThrows(TableException.class,
          () -> t.buildIndex(Metric.COSINE, false, 0, 5000, true));
      assertTrue(e.getMessage().contains("beam_width must be in [1, 3200]"), e.getMessage());
      e = assertThrows(TableException.class, () -> t.topK(new float[DIM], 1, 5,
          TopKOptions.COSINE.approximate(1_000_000)));
      assertTrue(e.getMessage().contains("search_breadth must be in [0, 100000]"),
          e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> TopKOptions.COSINE.approximate(-1));
      EmbeddingTable tiered = c.createTable(config("tiered").toBuilder().setMaxKeys(100)
          .setDiskTier(true).build());
      e = assertThrows(TableException.class,
          () -> tiered.buildIndex(Metric.DOT, false, 0, 0, true));
      assertTrue(e.getMessage().contains("has a disk tier"), e.getMessage());
      e = assertThrows(TableException.class, () -> t.topK(new float[DIM + 1], 1, 5,
          TopKOptions.COSINE.approximate(10)));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }
}
