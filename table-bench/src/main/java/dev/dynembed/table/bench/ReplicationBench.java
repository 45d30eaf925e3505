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
  @Option(names = "--follower-restarts", defaultValue = "3", description = "in the async run,"
      + " followers disrupted one at a time, in turn: paused (SIGSTOP) 2 s, past the replication"
      + " timeout (1 s in that run), then resumed (cut off, the process alive: it rejoins from its log); SIGKILLed"
      + " and restarted on its disk (it replays its own log, then rejoins from its log or loads a"
      + " snapshot, whichever the primary finds smaller); SIGKILLed with its disk (it loads a"
      + " snapshot); 0 to skip")
  int followerRestarts;
  @Option(names = "--disruption-batches-per-s", defaultValue = "0", description = "the writer's"
      + " rate during the follower disruptions (0: as fast as it goes): the log a follower"
      + " misses grows with it, and the primary sends a snapshot when that log outweighs one")
  double disruptionRate;
  @Option(names = "--follower-rejoin", defaultValue = "log", description = "the shards'"
      + " --follower-rejoin in the async run: log or snapshot (default ${DEFAULT-VALUE})")
  String followerRejoin;
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
                // the follower disruptions: a pause of 2 s cuts a follower off
                mode.equals("async") && followerRestarts > 0 ? List.of(
                    "--replication-timeout-ms", "1000", "--follower-rejoin", followerRejoin)
                    : List.of());
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
          if (mode.equals("async") && followerRestarts > 0) {
            followerRestarts(procs, t, batches, grads, step);
          }
        }
      }
    } finally {
      Dirs.deleteTree(base);
    }
    return 0;
  }

  /**
   * A writer steps on; a follower is killed, with its disk (it rejoins from its own log) or
   * without (it loads a snapshot), and restarted: the time from the kill until the primary has
   * it in sync again, and how it came back (from its follower's log).
   */
  private void followerRestarts(LocalShardProcesses procs, EmbeddingTable t,
      List<String[]> batches, float[] grads, long[] step) throws Exception {
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    Thread writer = new Thread(() -> {
      int i = 0;
      long t0 = System.nanoTime();
      while (!stop.get()) {
        String[] k = batches.get(i++ % batches.size());
        t.findOrInsert(k, true);
        t.applyGradients(k, grads, 0f, step[0]++);
        if (disruptionRate > 0) { // the batch's slot at the rate asked for
          long due = t0 + (long) (i * 1e9 / disruptionRate);
          long wait = due - System.nanoTime();
          if (wait > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(wait);
          }
        }
      }
    }, "restart-writer");
    writer.start();
    try {
      for (int f = 0; f < followerRestarts; f++) {
        procs.awaitGroups(Duration.ofSeconds(120));
        Thread.sleep(3000);
        int kind = f % 3; // 0 paused, 1 killed, 2 killed with its disk
        int shard = f / 3 % shards;
        int k = procs.followerOf(shard);
        Path log = procs.logOfProcess(k);
        long before = Files.size(log);
        Path primaryLog = procs.logOfProcess(procs.primaryOf(shard));
        long primaryBefore = Files.size(primaryLog);
        long[] killed = {System.nanoTime()};
        if (kind == 0) {
          String pid = String.valueOf(procs.pidOf(k));
          new ProcessBuilder("kill", "-STOP", pid).start().waitFor();
          Thread.sleep(2000); // past the primary's --replication-timeout-ms (1 s): cut off
          new ProcessBuilder("kill", "-CONT", pid).start().waitFor();
          killed[0] = System.nanoTime(); // from the resume on
        } else {
          killed[0] = procs.killProcess(k, kind == 2);
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (!procs.status().groups().get(shard).inSync().isEmpty()
            && System.nanoTime() < deadline) {
          Thread.sleep(5); // the primary drops it once its stream breaks
        }
        while (procs.status().groups().get(shard).inSync().isEmpty()) {
          Thread.sleep(5);
        }
        double secs = (System.nanoTime() - killed[0]) / 1e9;
        String said;
        try (java.io.RandomAccessFile r = new java.io.RandomAccessFile(log.toFile(), "r")) {
          byte[] tail = new byte[(int) (r.length() - before)];
          r.seek(before);
          r.readFully(tail);
          said = new String(tail, java.nio.charset.StandardCharsets.UTF_8);
        }
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(
            "rejoined from its own log after record (\\d+)|loaded its snapshot at record (\\d+)")
            .matcher(said);
        String how = !m.find() ? "?" : m.group(1) != null
            ? "rejoined from its log after record " + m.group(1)
            : "loaded a snapshot at record " + m.group(2);
        java.util.regex.Matcher rec = java.util.regex.Pattern.compile("ready: (\\d+) tables from"
            + " snapshot at log record (\\d+) \\+ (\\d+) records replayed in ([0-9.]+) s")
            .matcher(said);
        if (rec.find()) { // the restarted process's own recovery, before it followed
          how += String.format(Locale.ROOT, "; its own recovery first: %s records of its log"
              + " replayed in %s s", rec.group(3), rec.group(4));
        }
        String primarySaid = Files.readString(primaryLog).substring((int) primaryBefore);
        for (String line : primarySaid.split("\n")) {
          if (line.contains("rejoin")) { // how the primary chose: records from its log, or not
            System.out.println("  primary: " + line.replaceFirst("^table-server ", ""));
          }
        }
        System.out.printf(Locale.ROOT, "follower disruption %d: shard %d's follower %s: in sync"
            + " again after %.2f s (%s)%n", f + 1, shard, kind == 0 ? "paused 2 s (SIGSTOP)"
            : kind == 1 ? "SIGKILLed (its disk kept)" : "SIGKILLed with its state directory",
            secs, how);
      }
    } finally {
      stop.set(true);
      writer.join(60_000);
    }
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
