package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import dev.dynembed.table.tools.ExactOracle;
import dev.dynembed.table.tools.LocalShardProcesses;

/**
 * Shards killed with SIGKILL at random moments while trainers write, with an oracle: SGD with
 * learning rate 1 from zero rows, gradients that are multiples of 1/4 (every sum exact in any
 * order), so each row must end at minus the sum of the gradients sent for it, bit for bit, and
 * each key's count at the number of its occurrences counted: nothing lost (the write-ahead
 * log), nothing applied twice (call ids), and no trainer ever sees an error (resends ride
 * through the restarts). {@code -Dchaos.seconds=N} runs it longer (default 20).
 */
@Tag("processes")
class ChaosTest {
  @TempDir Path dir;

  private static final int KEYS = 400;
  private static final int DIM = 4;

  @Test
  void sigkilledShards_loseNothingAcknowledged_andApplyNothingTwice() throws Exception {
    chaos(Long.getLong("chaos.seconds", 20), ClientOptions.RowCaching.OFF);
  }

  /**
   * The same with the trainers' row cache on (docs/design/0022-row-cache.md): its flushes ride
   * through the restarts like any write, and once the client flushed (closing it does) every row
   * and count is exact on the shards.
   */
  @Test
  void sigkilledShards_withARowCache_loseNothingAcknowledged_andApplyNothingTwice()
      throws Exception {
    // 20 s as the plain run: at 15 s a loaded CI run on gRPC made 41 steps, under the 50 asked
    chaos(Long.getLong("chaos.seconds", 20), new ClientOptions.RowCaching(8L << 20, 4));
  }

  private void chaos(long seconds, ClientOptions.RowCaching caching) throws Exception {
    try (LocalShardProcesses procs = new LocalShardProcesses(3, 0, dir, "256m", "");
        TableClient c = TableClients.connect(procs.endpoints(),
            ClientOptions.builder().retryFor(Duration.ofSeconds(90)).rowCache(caching)
                .deadline(Duration.ofSeconds(10)).build())) {
      EmbeddingTable t = c.createTable(ExactOracle.config("chaos", DIM).build());
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      ExecutorService pool = Executors.newSingleThreadExecutor();
      Future<Integer> killer = pool.submit(() -> {
        Random r = new Random(42);
        int kills = 0;
        Thread.sleep(1000);
        while (System.nanoTime() < end - TimeUnit.SECONDS.toNanos(3)) {
          procs.kill(r.nextInt(3));
          kills++;
          Thread.sleep(2500 + r.nextInt(2500)); // ~5 kills a minute per shard: under the restart limit
        }
        return kills;
      });
      ExactOracle oracle = new ExactOracle(KEYS, DIM);
      // a trainer that saw an error fails the test here; past the end (no more faults) the
      // trainers go on, at most 60 s, until they made the steps asked below
      oracle.run(t, 2, end, 51, end + TimeUnit.SECONDS.toNanos(60));
      int kills = killer.get();
      pool.shutdown();
      assertTrue(kills >= 3 && procs.restarts() >= 3, kills + " kills, " + procs.restarts()
          + " restarts");
      assertTrue(oracle.steps > 50, "only " + oracle.steps + " steps");
      String[] keys = oracle.keys();
      t.flush(); // a cache's gradients and counts reach the shards
      try (TableClient plain = TableClients.connect(procs.endpoints())) { // the shards' rows
        EmbeddingTable p = plain.openTable("chaos");
        assertArrayEquals(oracle.rows, p.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, p.count(keys, false).frequencies());
      }
      System.out.printf("chaos: %d s, %d steps, %d kills, %d restarts%s: every row and count"
          + " exact%n", seconds, oracle.steps, kills, procs.restarts(),
          caching.on() ? ", row cache " + TableClients.traffic(t) : "");
    }
  }
}
