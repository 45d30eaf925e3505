package dev.dynembed.table.bench;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Issue 54's serving benchmark: a trainer's lookup+update loop (Zipf keys, Adagrad) on 2
 * training shard processes, without and with a serving replica of each ({@code table-server
 * --serve-from}) that a reader queries meanwhile: the trainer's keys/s (the cost of the
 * replicas to training), the replicas' lag behind the training shards (a ticker's rows: how
 * long before a read the first tick it lacked was acknowledged), and the reader's finds/s.
 */
@Command(name = "table-bench serving-replicas", mixinStandardHelpOptions = true)
public final class ServingReplicaBench implements Callable<Integer> {
  @Option(names = "--keys", defaultValue = "1000000",
      description = "key space (default ${DEFAULT-VALUE})") int numKeys;
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per lookup+update (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--read-keys", defaultValue = "256",
      description = "keys per find of the reader (default ${DEFAULT-VALUE})") int readKeys;
  @Option(names = "--seconds", defaultValue = "20",
      description = "measured seconds per case, after --warmup (default ${DEFAULT-VALUE})")
  double seconds;
  @Option(names = "--warmup", defaultValue = "10",
      description = "seconds of each case not measured (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--shard-java-opts", defaultValue = "", description = "JVM options of the"
      + " training shard processes ({shard}: its index)") String shardJavaOpts;
  @Option(names = "--max-lag-ms", defaultValue = "5000",
      description = "the replicas' bound (default ${DEFAULT-VALUE})") long maxLagMs;
  @Option(names = "--load-command", paramLabel = "CMD", description = "instead of the"
      + " lookup+update loop, run this shell command as the training load ({endpoints}: the"
      + " training shards' endpoints; {data-dir}: their data directory, where a model's"
      + " checkpoints must go), e.g. a word2vec run with --endpoints {endpoints}; the"
      + " case lasts as long as it runs (measured after --warmup), its output's last lines"
      + " printed") String loadCommand;

  public static void main(String[] args) {
    System.exit(new CommandLine(new ServingReplicaBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "lookup+update on 2 training shard processes, with and without"
        + " a serving replica of each: %,d keys, Zipf 1.0, batch %,d, dim %d, Adagrad; a reader of"
        + " %d keys per find on the replicas; %s s measured after %s s; JDK %s, %d cores%n",
        numKeys, batch, dim, readKeys, seconds, warmup, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors());
    System.out.println("| replicas | trainer keys/s | CPU s: training shards / replicas /"
        + " trainer+reader | replica lag p50 / p99 / max | reader finds/s | reads refused |");
    System.out.println("|---|---:|---:|---:|---:|---:|");
    for (boolean replicas : new boolean[] {false, true}) {
      Path dir = Files.createTempDirectory("serving-bench");
      try (LocalShardProcesses training = new LocalShardProcesses(2, 0, dir.resolve("t"), "2g",
              shardJavaOpts);
          LocalShardProcesses serving = replicas ? LocalShardProcesses.servingReplicas(
              training.endpoints(), dir.resolve("s"), "2g", maxLagMs) : null;
          TableClient trainer = TableClients.connect(training.endpoints());
          TableClient reader = serving == null ? null : TableClients.connect(serving.endpoints(),
              ClientOptions.builder().retryFor(Duration.ofSeconds(30)).build())) {
        run(training, serving, trainer, reader, replicas, dir.resolve("t"));
        if (serving != null) {
          for (int i = 0; i < 2; i++) {
            for (String line : Files.readAllLines(LocalShardProcesses.logOf(dir.resolve("s"),
                i))) {
              if (line.contains("follows") || line.contains("lags") || line.contains("ended")) {
                System.out.println("  replica " + i + ": " + line);
              }
            }
          }
        }
      } finally {
        try (var s = Files.walk(dir)) {
          s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
      }
    }
    return 0;
  }

  private void run(LocalShardProcesses training, LocalShardProcesses serving,
      TableClient trainer, TableClient reader, boolean replicas, Path dataDir) throws Exception {
    EmbeddingTable t = trainer.createTable(TableConfigs.builder("sv", dim)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f)).build());
    String[] ticks = new String[2];
    for (int i = 0; ticks[0] == null || ticks[1] == null; i++) {
      int s = KeyHashing.shardOf("tick" + i, 2);
      if (ticks[s] == null) {
        ticks[s] = "tick" + i;
      }
    }
    EmbeddingTable tickTable = trainer.createTable(TableConfigs.builder("ticks", 1)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
    tickTable.findOrInsert(ticks, true);
    long start = System.nanoTime();
    long from = start + (long) (warmup * 1e9);
    // a command's case ends when it exits
    java.util.concurrent.atomic.AtomicLong endAt = new java.util.concurrent.atomic.AtomicLong(
        loadCommand != null ? Long.MAX_VALUE : from + (long) (seconds * 1e9));
    ExecutorService pool = Executors.newFixedThreadPool(3);
    List<Long> acked = java.util.Collections.synchronizedList(new ArrayList<>());
    Future<?> ticker = pool.submit(() -> {
      while (System.nanoTime() < endAt.get()) {
        tickTable.applyGradients(ticks, new float[] {-1, -1}, 0f, 0);
        acked.add(System.nanoTime());
        Thread.sleep(20);
      }
      return null;
    });
    List<Long> lags = java.util.Collections.synchronizedList(new ArrayList<>());
    long[] reads = {0, 0};
    Future<?> readerLoop = reader == null ? null : pool.submit(() -> {
      EmbeddingTable r = null;
      EmbeddingTable rt = null;
      SplittableRandom rnd = new SplittableRandom(9);
      Zipf zipf = new Zipf(numKeys, 1.0);
      String[] keys = new String[readKeys];
      while (System.nanoTime() < endAt.get()) {
        long began = System.nanoTime();
        try {
          if (r == null) {
            r = reader.openTable("sv");
            rt = reader.openTable("ticks");
          }
          float[] tk = rt.find(ticks).rows();
          for (int i = 0; i < keys.length; i++) {
            keys[i] = "k" + zipf.next(rnd);
          }
          r.find(keys);
          if (began > from) {
            long seen = (long) Math.min(tk[0], tk[1]);
            long lag = 0;
            synchronized (acked) {
              if (seen < acked.size() && acked.get((int) seen) < began) {
                lag = began - acked.get((int) seen);
              }
            }
            lags.add(lag);
            reads[0]++;
          }
        } catch (dev.dynembed.table.common.TableException e) {
          reads[1]++;
        }
      }
      return null;
    });
    SplittableRandom rnd = new SplittableRandom(1);
    Zipf zipf = new Zipf(numKeys, 1.0);
    long keysDone = 0;
    double cpu0 = Double.NaN;
    double rcpu0 = 0;
    double me0 = 0;
    String[] batchKeys = new String[batch];
    float[] g = new float[batch * dim];
    Arrays.fill(g, 0.01f);
    long step = 0;
    double measured = seconds;
    if (loadCommand != null) {
      Thread.sleep((long) (warmup * 1000));
      cpu0 = training.cpuSeconds();
      rcpu0 = serving == null ? 0 : serving.cpuSeconds();
      me0 = LocalShardProcesses.cpuSeconds(ProcessHandle.current().pid());
      measured = runLoad(String.join(",", training.endpoints()), dataDir, from);
      endAt.set(System.nanoTime());
    }
    while (System.nanoTime() < endAt.get()) {
      if (Double.isNaN(cpu0) && System.nanoTime() >= from) {
        cpu0 = training.cpuSeconds();
        rcpu0 = serving == null ? 0 : serving.cpuSeconds();
        me0 = LocalShardProcesses.cpuSeconds(ProcessHandle.current().pid());
      }
      for (int i = 0; i < batch; i++) {
        batchKeys[i] = "k" + zipf.next(rnd);
      }
      t.findOrInsert(batchKeys, true);
      t.applyGradients(batchKeys, g, 0f, step++);
      if (System.nanoTime() >= from) {
        keysDone += batch;
      }
    }
    double cpu = training.cpuSeconds() - cpu0;
    double rcpu = serving == null ? 0 : serving.cpuSeconds() - rcpu0;
    double me = LocalShardProcesses.cpuSeconds(ProcessHandle.current().pid()) - me0;
    ticker.get();
    if (readerLoop != null) {
      readerLoop.get();
    }
    pool.shutdown();
    long[] l = lags.stream().mapToLong(Long::longValue).sorted().toArray();
    String lag = l.length == 0 ? "-" : String.format(Locale.ROOT, "%.0f / %.0f / %.0f ms",
        l[l.length / 2] / 1e6, l[(int) (l.length * 0.99)] / 1e6, l[l.length - 1] / 1e6);
    System.out.printf(Locale.ROOT, "| %s | %s | %.1f / %.1f / %.1f | %s | %s | %s |%n",
        replicas ? "a serving replica per shard" : "none", loadCommand != null
            ? String.format(Locale.ROOT, "(command) %.1f s", measured)
            : String.format(Locale.ROOT, "%,.0f", keysDone / seconds), cpu, rcpu, me, lag,
        replicas ? String.format(Locale.ROOT, "%,.0f", reads[0] / measured) : "-",
        replicas ? String.valueOf(reads[1]) : "-");
  }

  /**
   * Runs --load-command to its end (its output in a temporary file, whose last lines are
   * printed); returns the seconds from {@code from} (the warm-up's end) to its exit.
   */
  private double runLoad(String endpoints, Path dataDir, long from) throws Exception {
    Path out = Files.createTempFile("serving-load", ".log");
    try {
      Process p = new ProcessBuilder("bash", "-c", loadCommand
          .replace("{endpoints}", endpoints).replace("{data-dir}", dataDir.toString()))
          .redirectErrorStream(true).redirectOutput(out.toFile()).start();
      int code = p.waitFor();
      double secs = (System.nanoTime() - from) / 1e9;
      List<String> lines = Files.readAllLines(out);
      for (String line : lines.subList(Math.max(0, lines.size() - 8), lines.size())) {
        System.out.println("  load: " + line);
      }
      if (code != 0) {
        throw new IllegalStateException("--load-command exited with " + code);
      }
      return secs;
    } finally {
      Files.deleteIfExists(out);
    }
  }
}
