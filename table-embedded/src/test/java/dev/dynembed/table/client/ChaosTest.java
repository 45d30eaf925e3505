package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import dev.dynembed.table.tools.LocalShardProcesses;

/**
 * Shards killed with SIGKILL at random moments while trainers write, with an oracle: SGD with
 * learning rate 1 from zero rows, gradients that are multiples of 1/4 (every sum exact in any
 * order), so each row must end at minus the sum of the gradients sent for it, bit for bit, and
 * each key's count at the number of its occurrences counted: nothing lost (the write-ahead
 * log), nothing applied twice (call ids), and no trainer ever sees an error (resends ride
 * through the restarts). {@code -Dchaos.seconds=N} runs it longer (default 20).
 */
class ChaosTest {
  @TempDir Path dir;

  private static final int KEYS = 400;
  private static final int DIM = 4;

  @Test
  void sigkilledShards_loseNothingAcknowledged_andApplyNothingTwice() throws Exception {
    long seconds = Long.getLong("chaos.seconds", 20);
    try (LocalShardProcesses procs = new LocalShardProcesses(3, 0, dir, "256m", "");
        TableClient c = TableClients.connect(procs.endpoints(),
            ClientOptions.builder().retryFor(Duration.ofSeconds(90))
                .deadline(Duration.ofSeconds(10)).build())) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("chaos", DIM)
          .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
      int trainers = 2;
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      ExecutorService pool = Executors.newFixedThreadPool(trainers + 1);
      List<Future<long[][]>> work = new ArrayList<>();
      for (int w = 0; w < trainers; w++) {
        int seed = w;
        work.add(pool.submit(() -> train(t, new Random(seed), end)));
      }
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
      float[] expected = new float[KEYS * DIM];
      long[] counts = new long[KEYS];
      long steps = 0;
      for (Future<long[][]> f : work) {
        long[][] r = f.get(); // a trainer that saw an error fails the test here
        for (int i = 0; i < expected.length; i++) {
          expected[i] += Float.intBitsToFloat((int) r[0][i]);
        }
        for (int k = 0; k < KEYS; k++) {
          counts[k] += r[1][k];
        }
        steps += r[2][0];
      }
      int kills = killer.get();
      pool.shutdown();
      assertTrue(kills >= 3 && procs.restarts() >= 3, kills + " kills, " + procs.restarts()
          + " restarts");
      assertTrue(steps > 50, "only " + steps + " steps");
      String[] keys = new String[KEYS];
      for (int k = 0; k < KEYS; k++) {
        keys[k] = "key" + k;
      }
      assertArrayEquals(expected, t.find(keys).rows(), 0f);
      assertArrayEquals(counts, t.count(keys, false).frequencies());
      System.out.printf("chaos: %d s, %d steps, %d kills, %d restarts: every row and count"
          + " exact%n", seconds, steps, kills, procs.restarts());
    }
  }

  /** Counts, reads and writes until {@code end}; returns (row sums as float bits, counts, steps). */
  private static long[][] train(EmbeddingTable t, Random r, long end) {
    float[] sums = new float[KEYS * DIM];
    long[] counts = new long[KEYS];
    long steps = 0;
    while (System.nanoTime() < end) {
      String[] keys = new String[32];
      float[] g = new float[keys.length * DIM];
      for (int i = 0; i < keys.length; i++) {
        int k = r.nextInt(KEYS);
        keys[i] = "key" + k;
        counts[k]++;
        for (int j = 0; j < DIM; j++) {
          g[i * DIM + j] = (r.nextInt(9) - 4) / 4f;
          sums[k * DIM + j] -= g[i * DIM + j];
        }
      }
      t.findOrInsert(keys, true);
      t.applyGradients(keys, g, 0f, steps);
      steps++;
    }
    long[] bits = new long[sums.length];
    for (int i = 0; i < sums.length; i++) {
      bits[i] = Float.floatToRawIntBits(sums[i]);
    }
    return new long[][] {bits, counts, {steps}};
  }
}
