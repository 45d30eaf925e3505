package dev.dynembed.table.bench;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicLong;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What replication costs and buys (issue 30; docs/design/0019-cluster-map.md): lookup+update
 * (findOrInsert, then Adagrad gradients) of Zipf batches through N loopback shards without
 * replication, then with one follower per shard, async and sync (rows/s, CPU of every shard
 * process per batch); then, with sync, the time from a primary's SIGKILL (its state directory
 * deleted) to the first answered step, and until the group has a follower in sync again.
 */
@Command(name = "table-bench replication", mixinStandardHelpOptions = true)
public final class ReplicationBench implements Callable<Integer> {
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per call (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--keys", defaultValue = "1000000", description = "key space") int numKeys;
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "exponent of the Zipf distribution of keys (default ${DEFAULT-VALUE})")
  double zipf;
  @Option(names = "--shards", defaultValue = "2",
      description = "shard processes (default ${DEFAULT-VALUE})") int shards;
  @Option(names = "--modes", defaultValue = "none,async,sync", split = ",",
      description = "replication of each run: none (one process per shard), async, sync")
  List<String> modes;
  @Option(names = "--seconds", defaultValue = "10",
      description = "measured seconds per case (default ${DEFAULT-VALUE})") double seconds;
  @Option(names = "--warmup", defaultValue = "15",
      description = "warm-up seconds per case (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--failovers", defaultValue = "3", description = "primaries killed (with"
      + " their disks) in the sync run, one at a time; 0 to skip")
  int failovers;
  @Option(names = "--server-heap", defaultValue = "2g",
      description = "heap of each shard process (default ${DEFAULT-VALUE})") String serverHeap;

  public static void main(String[] args) {
    System.exit(new CommandLine(new ReplicationBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    Zipf z = new Zipf(numKeys, zipf);
    SplittableRandom rnd = new SplittableRandom(42);
    List<String[]> batches = new ArrayList<>();
    for (int b = 0; b < 64; b++) {
      String[] k = new String[batch];
      for (int i = 0; i < batch; i++) {
        k[i] = "key:" + z.next(rnd);
      }
      batches.add(k);
    }
    float[] grads = new float[batch * dim];
    for (int i = 0; i < grads.length; i++) {
      grads[i] = (float) (rnd.nextDouble() - 0.5) * 0.01f;
    }
    System.out.printf(Locale.ROOT, "replication: %d shards, dim %d, batches of %,d Zipf(%.1f)"
        + " keys over %,d, Adagrad, fsync everysec, %.0f s warm-up + %.0f s per case; %d cores%n",
        shards, dim, batch, zipf, numKeys, warmup, seconds,
        Runtime.getRuntime().availableProcessors());
    Path base = Files.createTempDirectory("replication-bench");
    try {
      for (String mode : modes) {
        Path dir = base.resolve(mode);
        try (LocalShardProcesses procs = mode.equals("none")
            ? new LocalShardProcesses(shards, 0, dir, serverHeap, "")
            : LocalShardProcesses.replicated(shards, 1, mode, dir, serverHeap, "", List.of(),
                List.of());
            TableClient c = TableClients.open(procs.spec(), ClientOptions.builder()
                .retryFor(Duration.ofSeconds(120)).build())) {
          EmbeddingTable t = c.createTable(TableConfigs.builder("bench", dim)
              .setOptimizer(TableConfigs.adagrad(0.05f, 0.1f, 1e-10f)).build());
          double[] cpu0 = new double[1];
          long[] step = {0};
          Timed.Run run = Timed.run(warmup, seconds, i -> {
            String[] k = batches.get(i % batches.size());
            t.findOrInsert(k, true);
            t.applyGradients(k, grads, 0f, step[0]++);
          }, () -> cpu0[0] = procs.cpuSeconds());
          double cpu = procs.cpuSeconds() - cpu0[0];
          double rowsPerSec = run.steps() * (double) batch / run.seconds();
          System.out.printf(Locale.ROOT, "%-6s lookup+update %,10.0f rows/s  shard CPU %.2f ms"
              + " per batch (%d processes)%n", mode, rowsPerSec, cpu * 1e3 / run.steps(),
              mode.equals("none") ? shards : 2 * shards);
          if (mode.equals("sync") && failovers > 0) {
            failovers(procs, t, batches, grads, step);
          }
        }
      }
    } finally {
      Dirs.deleteTree(base);
    }
    return 0;
  }

  /**
   * A writer steps on; a primary is killed with its disk: the gap between the kill and the next
   * answered step (the lease running out, the election, the clients' resend), then the time
   * until a follower is in sync again (the killed process restarted, loading a snapshot).
   */
  private void failovers(LocalShardProcesses procs, EmbeddingTable t, List<String[]> batches,
      float[] grads, long[] step) throws Exception {
    // the start time of the last answered step: a step sent before the kill may be answered by
    // the dying primary
    AtomicLong lastAnswer = new AtomicLong(System.nanoTime());
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    Thread writer = new Thread(() -> {
      int i = 0;
      while (!stop.get()) {
        String[] k = batches.get(i++ % batches.size());
        long sent = System.nanoTime();
        t.findOrInsert(k, true);
        t.applyGradients(k, grads, 0f, step[0]++);
        lastAnswer.set(sent);
      }
    }, "failover-writer");
    writer.start();
    try {
      for (int f = 0; f < failovers; f++) {
        Thread.sleep(3000);
        procs.awaitGroups(Duration.ofSeconds(120));
        Thread.sleep(1000);
        int shard = f % shards;
        long epoch = procs.status().groups().get(shard).epoch();
        long killed = procs.killPrimary(shard, true);
        while (lastAnswer.get() < killed) {
          Thread.sleep(2);
        }
        double toAnswer = (System.nanoTime() - killed) / 1e9;
        while (true) { // a new primary with a follower in sync
          var g = procs.status().groups().get(shard);
          if (g.epoch() > epoch && !g.inSync().isEmpty()) {
            break;
          }
          Thread.sleep(20);
        }
        double toRedundant = (System.nanoTime() - killed) / 1e9;
        System.out.printf(Locale.ROOT, "failover %d: primary of shard %d SIGKILLed with its"
            + " state directory: first answered step after %.2f s, a follower in sync again"
            + " after %.2f s%n", f + 1, f % shards, toAnswer, toRedundant);
      }
    } finally {
      stop.set(true);
      writer.join(60_000);
    }
  }
}
