package dev.dynembed.table.tools;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.TableConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The exact oracle of the chaos tests (issue 13; the Redis tier's, issue 33, and the replicas'
 * and resharding's to come): trainers count and update keys {@code key0..keyN-1} of a table with
 * SGD at rate 1 from zero rows, with gradients in quarters in [-1, 1]. Every value is then a sum
 * of quarters, exact in float32 whatever the order the shards apply the updates in, so at the end
 * every row equals minus the sum of the acknowledged gradients and every count the sum of the
 * counted reads, bit for bit: a lost, doubled or torn update shows.
 */
public final class ExactOracle {
  private final int keys;
  private final int dim;
  /** The expected rows ([keys, dim]) and counts so far, and the steps the trainers took. */
  public final float[] rows;
  public final long[] counts;
  public long steps;

  public ExactOracle(int keys, int dim) {
    this.keys = keys;
    this.dim = dim;
    this.rows = new float[keys * dim];
    this.counts = new long[keys];
  }

  /** The oracle's table config (SGD rate 1, zero rows); add caps or tiers to it as needed. */
  public static TableConfig.Builder config(String name, int dim) {
    return TableConfigs.builder(name, dim).setOptimizer(TableConfigs.sgd(1f))
        .setInitializer(TableConfigs.zeros());
  }

  /** The keys {@code key0..keyN-1}. */
  public String[] keys() {
    String[] k = new String[keys];
    for (int i = 0; i < keys; i++) {
      k[i] = "key" + i;
    }
    return k;
  }

  /**
   * Runs {@code trainers} threads (seeds 0..trainers-1) on {@code t} until {@code endNanos}
   * (System.nanoTime), each stepping batches of 32 counted reads and their gradients, and adds
   * what they did to the expectations.
   *
   * @throws ExecutionException with a trainer's error (a trainer that saw one stops)
   */
  public void run(EmbeddingTable t, int trainers, long endNanos)
      throws ExecutionException, InterruptedException {
    run(t, trainers, endNanos, 0, endNanos);
  }

  /**
   * The same, but the trainers go on past {@code endNanos} until they took {@code minSteps}
   * steps together or {@code latestNanos} passed: a chaos test's faults end at its end time, and
   * a loaded machine (CI) may have spent that time mostly in failovers; the steps after it show
   * the table still trains, instead of a fixed time that passes or fails with the machine's load.
   */
  public void run(EmbeddingTable t, int trainers, long endNanos, long minSteps, long latestNanos)
      throws ExecutionException, InterruptedException {
    AtomicLong together = new AtomicLong();
    ExecutorService pool = Executors.newFixedThreadPool(trainers);
    try {
      List<Future<long[][]>> work = new ArrayList<>();
      for (int w = 0; w < trainers; w++) {
        int seed = w;
        work.add(pool.submit(() -> train(t, new Random(seed), endNanos, minSteps,
            latestNanos, together)));
      }
      for (Future<long[][]> f : work) {
        long[][] r = f.get();
        for (int i = 0; i < rows.length; i++) {
          rows[i] += Float.intBitsToFloat((int) r[0][i]);
        }
        for (int k = 0; k < keys; k++) {
          counts[k] += r[1][k];
        }
        steps += r[2][0];
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /** One trainer: (row sums as float bits, counts, {steps}). */
  private long[][] train(EmbeddingTable t, Random r, long end, long minSteps, long latest,
      AtomicLong together) {
    float[] sums = new float[keys * dim];
    long[] c = new long[keys];
    long n = 0;
    for (long now = System.nanoTime(); now < end
        || (together.get() < minSteps && now < latest); now = System.nanoTime()) {
      String[] batch = new String[32];
      float[] g = new float[batch.length * dim];
      for (int i = 0; i < batch.length; i++) {
        int k = r.nextInt(keys);
        batch[i] = "key" + k;
        c[k]++;
        for (int j = 0; j < dim; j++) {
          g[i * dim + j] = (r.nextInt(9) - 4) / 4f;
          sums[k * dim + j] -= g[i * dim + j];
        }
      }
      t.findOrInsert(batch, true);
      t.applyGradients(batch, g, 0f, n);
      n++;
      together.incrementAndGet();
    }
    long[] bits = new long[sums.length];
    for (int i = 0; i < sums.length; i++) {
      bits[i] = Float.floatToRawIntBits(sums[i]);
    }
    return new long[][] {bits, c, {n}};
  }
}
