package dev.dynembed.table.tools;

import static dev.dynembed.table.tools.ServiceOptionsParsing.parse;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.RowInitializer;
import dev.dynembed.table.tools.cli.TableServiceOptions;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A grow (docs/design/0025) on 2 logged shard processes while one of them is SIGKILLed: the
 * supervisor restarts it from its log, the client's grow is resent to it (a shard that logged the
 * grow answers at once, one that had not grows then), and every row ends up at the new width
 * with its old columns exact and its new ones a fresh row's. Trainers that opened the table at
 * the old width write through the grow (their gradients widened with zero columns, their reads
 * cut to the old columns) and go on at the new width once it is done: every row exact.
 */
@Tag("processes")
class GrowWithAKillTest {
  @TempDir Path dir;

  /**
   * Two trainers (a client each) apply known gradients (SGD at rate 1 from zero rows, values in
   * quarters: every sum exact in any order) to a table of dim 32 while it grows to 48 and a shard
   * is SIGKILLed during the grow; each reads its keys every step and gets rows of the width it
   * opened. Once the grow is done everywhere they open the table again and go on at 48. After
   * all, every row is exactly minus the sum of the gradients sent for it: the old-width steps in
   * the old columns, the new-width steps in all.
   */
  @Test
  void twoTrainers_writeThroughAGrowFrom32To48WithAKill_andEveryRowIsExact() throws Exception {
    TableServiceOptions o = parse("--shards", "2", "--shard-fsync", "always");
    int numKeys = 400;
    String[] keys = new String[numKeys];
    for (int i = 0; i < numKeys; i++) {
      keys[i] = (i % 5 == 0 ? "мир" : "k") + i;
    }
    ClientOptions retry = ClientOptions.builder().retryFor(java.time.Duration.ofSeconds(60))
        .build();
    try (LocalShardProcesses procs = o.start(dir, "");
        TableClient admin = o.open(procs, retry)) {
      admin.createTable(TableConfigs.builder("g", 32).setOptimizer(TableConfigs.sgd(1f))
          .setInitializer(TableConfigs.zeros()).build());
      var grown = new java.util.concurrent.atomic.AtomicBoolean();
      var stop = new java.util.concurrent.atomic.AtomicBoolean();
      java.util.concurrent.atomic.AtomicIntegerArray oldSteps =
          new java.util.concurrent.atomic.AtomicIntegerArray(2);
      double[][] sums = new double[2][numKeys * 48];
      java.util.List<CompletableFuture<Void>> trainers = new java.util.ArrayList<>();
      for (int w = 0; w < 2; w++) {
        int id = w;
        trainers.add(CompletableFuture.runAsync(() -> {
          java.util.Random r = new java.util.Random(id);
          try (TableClient c = o.open(procs, retry)) {
            EmbeddingTable t = c.openTable("g");
            int afterGrow = 0;
            for (long step = 1; afterGrow < 40; step++) {
              if (grown.get() && t.dim() == 32) {
                t = c.openTable("g"); // the grow is done everywhere: on at the new width
                assertEquals(48, t.dim());
              }
              int dim = t.dim();
              String[] batch = new String[16];
              int[] at = new int[16];
              float[] g = new float[16 * dim];
              for (int i = 0; i < 16; i++) {
                at[i] = r.nextInt(numKeys);
                batch[i] = keys[at[i]];
                for (int j = 0; j < dim; j++) {
                  g[i * dim + j] = (r.nextInt(9) - 4) / 4f;
                }
              }
              assertEquals(16 * dim, t.find(batch).rows().length, "rows of the opened width");
              t.applyGradients(batch, g, 1f, step);
              for (int i = 0; i < 16; i++) {
                for (int j = 0; j < dim; j++) {
                  sums[id][at[i] * 48 + j] += g[i * dim + j];
                }
              }
              if (dim == 32) {
                oldSteps.incrementAndGet(id);
              } else {
                afterGrow++;
              }
              if (stop.get()) {
                throw new IllegalStateException("the grow did not finish");
              }
            }
          }
        }));
      }
      while (oldSteps.get(0) < 30 || oldSteps.get(1) < 30) {
        Thread.sleep(10);
      }
      CompletableFuture<EmbeddingTable> grow = CompletableFuture.supplyAsync(
          () -> admin.growTable("g", 48));
      Thread.sleep(10);
      procs.kill(1);
      grow.get();
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (procs.restarts() < 1 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertEquals(1, procs.restarts(), "the killed shard was restarted");
      int beforeDone = oldSteps.get(0) + oldSteps.get(1);
      assertEquals(48, admin.growTable("g", 48).dim()); // every shard answers at 48
      while (oldSteps.get(0) + oldSteps.get(1) < beforeDone + 10
          && System.nanoTime() < deadline + 60_000_000_000L) {
        Thread.sleep(5); // old-width steps against shards that all grew
      }
      assertTrue(oldSteps.get(0) + oldSteps.get(1) >= beforeDone + 10, "old-width steps after");
      grown.set(true);
      try {
        CompletableFuture.allOf(trainers.toArray(new CompletableFuture[0]))
            .get(120, java.util.concurrent.TimeUnit.SECONDS);
      } finally {
        stop.set(true);
      }
      System.err.printf("two trainers through a grow: %d old-width steps, %d of them after the"
          + " grow reached every shard%n", oldSteps.get(0) + oldSteps.get(1),
          oldSteps.get(0) + oldSteps.get(1) - beforeDone);
      float[] rows = admin.openTable("g").find(keys).rows();
      for (int k = 0; k < numKeys; k++) {
        float[] want = new float[48];
        for (int j = 0; j < 48; j++) {
          want[j] = 0f - (float) (sums[0][k * 48 + j] + sums[1][k * 48 + j]); // +0, as a row
        }
        assertArrayEquals(want, Arrays.copyOfRange(rows, k * 48, k * 48 + 48), keys[k]);
      }
    }
  }

  @Test
  void aShardKilledDuringAGrow_isRestartedFromItsLog_andTheGrowFinishes() throws Exception {
    TableServiceOptions o = parse("--shards", "2", "--shard-fsync", "always");
    int n = 100_000;
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = (i % 7 == 0 ? "мир" : "k") + i;
    }
    TableConfig config = TableConfigs.builder("g", 8)
        .setOptimizer(TableConfigs.adagrad(0.5f, 0f, 0f))
        .setInitializer(TableConfigs.uniform(-0.1f, 0.1f, 5)).build();
    try (LocalShardProcesses procs = o.start(dir, "");
        TableClient c = o.open(procs, ClientOptions.builder()
            .retryFor(java.time.Duration.ofSeconds(60)).build())) {
      EmbeddingTable t = c.createTable(config);
      for (int from = 0; from < n; from += 10_000) {
        String[] batch = Arrays.copyOfRange(keys, from, from + 10_000);
        t.findOrInsert(batch);
        float[] g = new float[batch.length * 8];
        Arrays.fill(g, 0.25f);
        t.applyGradients(batch, g, 0f, 1);
      }
      float[] before = t.find(keys).rows();
      long start = System.nanoTime();
      CompletableFuture<Long> grow = CompletableFuture.supplyAsync(() -> {
        c.growTable("g", 12);
        return System.nanoTime();
      });
      Thread.sleep(10); // the kill lands during the call (printed); the rows must hold either way
      long killed = System.nanoTime();
      procs.kill(1);
      long done = grow.get();
      System.err.printf("grow with a kill: killed at %.0f ms, the grow answered at %.0f ms%n",
          (killed - start) / 1e6, (done - start) / 1e6);
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (procs.restarts() < 1 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertEquals(1, procs.restarts(), "the killed shard was restarted");
      EmbeddingTable wide = c.growTable("g", 12); // every shard answers: already that wide
      assertEquals(12, wide.dim());
      float[] after = wide.find(keys).rows();
      RowInitializer init = new RowInitializer(config.getInitializer());
      float[] fresh = new float[12];
      for (int i = 0; i < n; i++) {
        assertArrayEquals(Arrays.copyOfRange(before, i * 8, i * 8 + 8),
            Arrays.copyOfRange(after, i * 12, i * 12 + 8), keys[i]);
        init.fill(PackedKeys.of(keys[i]).hash(0), fresh, 0, 12);
        assertArrayEquals(Arrays.copyOfRange(fresh, 8, 12),
            Arrays.copyOfRange(after, i * 12 + 8, i * 12 + 12), keys[i] + ": new columns");
      }
      float[] g = new float[3 * 12];
      Arrays.fill(g, 0.25f);
      assertTrue(wide.applyGradients(Arrays.copyOf(keys, 3), g, 0f, 2) >= 0);
    }
  }
}
