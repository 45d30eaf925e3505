package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.TableReads;
import dev.dynembed.table.v1.RowEncoding;
import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.TableCounters;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.MemcachedClient;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import dev.dynembed.table.redis.RedisTables;
import redis.clients.jedis.Jedis;

/**
 * End-to-end rows/s of find, findOrInsert, applyGradients and lookup+update (findOrInsert then
 * applyGradients, Adagrad) for the in-process table and 1..N loopback shard processes, side by
 * side with Redis (MGET of binary rows) and memcached (multi-get), and the "storage doesn't
 * optimize" path on each: get rows and Adagrad slots, compute Adagrad in the client, set them
 * back. Every system sees the same pre-generated Zipf batches; rows/s counts requested keys
 * (duplicates included), the same unit everywhere.
 *
 * <p>One file of ~650 lines on purpose: the measuring loop, our systems and the two baselines'
 * clients side by side, so that a reader can check that every system is measured the same way.
 */
@Command(name = "table-bench", mixinStandardHelpOptions = true)
public final class TableBench implements Callable<Integer> {
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per call (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--keys", defaultValue = "1000000", description = "key space") int numKeys;
  @Option(names = "--zipf", defaultValue = "1.0", description = "Zipf exponent") double zipf;
  @Option(names = "--seconds", defaultValue = "6", description = "measured seconds per case") double seconds;
  @Option(names = "--warmup", defaultValue = "2", description = "warm-up seconds per case") double warmup;
  @Option(names = "--system-warmup", defaultValue = "20",
      description = "seconds of all ops, round-robin, before any case of a system is measured"
          + " (fresh shard processes need their JIT warm)")
  double systemWarmup;
  @Option(names = "--shards", defaultValue = "1,2", split = ",", description = "loopback shard counts") int[] shardCounts;
  @Option(names = "--redis", description = "host:port of a throw-away Redis server (omit to"
      + " skip; flushed, and its append-only file turned on for the durable cases, then off)")
  String redis;
  @Option(names = "--shards-over-redis", defaultValue = "2", description = "with --redis: this"
      + " many loopback shards whose table keeps its rows in that Redis too (redis_tier: written"
      + " behind every --redis-tier-flush-ms; 0 = skip)") int shardsOverRedis;
  @Option(names = "--redis-tier-flush-ms", defaultValue = "1000", description = "the shards'"
      + " write-behind period over Redis (default ${DEFAULT-VALUE})") long redisTierFlushMs;
  /** Whether {@link #ours} creates its table with redis_tier. */
  private boolean redisTierTable;
  @Option(names = "--memcached", description = "host:port of a memcached server (omit to skip)") String memcached;
  @Option(names = "--base-port", defaultValue = "17100",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;
  @Option(names = "--server-heap", defaultValue = "6g",
      description = "heap of each shard process (default ${DEFAULT-VALUE})") String serverHeap;
  @Option(names = "--server-java-opts", defaultValue = "",
      description = "extra JVM options of the shard processes ({shard} = shard index)")
  String serverJavaOpts;
  @Option(names = "--ops", defaultValue = "find,findOrInsert,applyGradients,lookup+update",
      split = ",", description = "which of our ops to run")
  List<String> ops;
  @Option(names = "--skip-in-process", defaultValue = "false",
      description = "leave out the in-process table (default ${DEFAULT-VALUE})")
  boolean skipInProcess;
  @Option(names = "--server-cpus", description = "run the shard processes on these CPUs"
      + " (taskset -c LIST), e.g. 1 while this driver runs on core 0 (the pinned pair)")
  String serverCpus;
  @Option(names = "--wire-rows", defaultValue = "FLOAT32", description = "encoding of rows in"
      + " the shards' replies: ${COMPLETION-CANDIDATES}")
  RowEncoding wireRows;
  @Option(names = "--in-flight", defaultValue = "2", description = "also measure find with this"
      + " many batches in flight (the next batch's read sent before this one's rows are used, as"
      + " a pipelined trainer reads); 1 to skip")
  int inFlight;
  @Option(names = "--shard-wal", defaultValue = "everysec", split = ",", description = "the"
      + " shards' write-ahead log, one run per value: off, or its fsync policy no, everysec"
      + " (the table-server default) or always (default ${DEFAULT-VALUE})")
  List<String> shardWal;
  @Option(names = "--shard-security", defaultValue = "plain", split = ",", description = "one"
      + " run per value: plain, metrics (the metrics interceptor), mtls (mutual TLS and the"
      + " access-control interceptor, certificates from a throw-away CA), mtls+metrics"
      + " (default ${DEFAULT-VALUE})")
  List<String> shardSecurity;
  @Option(names = "--shard-args", defaultValue = "", description = "extra table-server options"
      + " of every shard, space-separated (e.g. \"--snapshot-every-mb 8192\")")
  String shardArgs;
  @Option(names = "--data-plane", defaultValue = "native", split = ",", description = "transport"
      + " of the shards' Read and Write calls, one run per value on the same shard processes:"
      + " native (binary frames, docs/design/0015-data-plane.md) or grpc (default ${DEFAULT-VALUE})")
  List<ClientOptions.DataPlane> dataPlanes;
  @Option(names = "--out", description = "also write the results table (markdown) here") Path out;

  private String[] keys;
  private List<String[]> batches;
  private float[] gradients;
  private final Map<String, Double> results = new LinkedHashMap<>();
  private final List<String> lines = new ArrayList<>();
  /** The shard processes of the system being measured (their CPU is reported), or null. */
  private LocalShardProcesses shardProcesses;

  public static void main(String[] args) {
    System.exit(new CommandLine(new TableBench()).setCaseInsensitiveEnumValuesAllowed(true)
        .execute(args));
  }

  @Override
  public Integer call() throws Exception {
    keys = new String[numKeys];
    for (int i = 0; i < numKeys; i++) {
      keys[i] = "key:" + i;
    }
    Zipf z = new Zipf(numKeys, zipf);
    SplittableRandom rnd = new SplittableRandom(42);
    batches = new ArrayList<>();
    long distinct = 0;
    for (int b = 0; b < 64; b++) {
      String[] k = new String[batch];
      for (int i = 0; i < batch; i++) {
        k[i] = keys[z.next(rnd)];
      }
      batches.add(k);
      distinct += BatchDedup.of(PackedKeys.of(k)).uniqueCount();
    }
    gradients = new float[batch * dim];
    for (int i = 0; i < gradients.length; i++) {
      gradients[i] = (float) (rnd.nextGaussian() * 1e-3);
    }
    header(String.format(Locale.ROOT, "dim %d, batch %d, Zipf s=%.2f over %,d keys (%.0f distinct"
        + " keys per batch), %s s measured after %s s warm-up per case (%s s per system),"
        + " 1 client thread;"
        + " JDK %s, %d cores; rows on the wire %s%s", dim, batch, zipf, numKeys,
        (double) distinct / batches.size(), seconds, warmup, systemWarmup,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(), wireRows,
        serverCpus == null ? "" : "; shards on CPUs " + serverCpus + " (taskset)"));
    // CPU ms per batch (user + system, from /proc): this process's, and the shard processes'
    header("| system | op | rows/s | ms/batch | client CPU ms/batch | shards CPU ms/batch |");
    header("|---|---|---:|---:|---:|---:|");

    if (!skipInProcess) {
      try (TableClient c = TableClients.inProcess(Files.createTempDirectory("bench"))) {
        ours("in-process", c);
      }
    }
    for (int n : shardCounts) {
      for (String security : shardSecurity) {
      for (String wal : shardWal) {
        Path data = Files.createTempDirectory("bench-shards");
        List<String> launcher = serverCpus == null ? List.of()
            : List.of("taskset", "-c", serverCpus);
        List<String> serverArgs = new ArrayList<>(wal.equals("off") ? List.of("--wal", "off")
            : List.of("--fsync", wal));
        for (String a : shardArgs.trim().split("\\s+")) {
          if (!a.isEmpty()) {
            serverArgs.add(a);
          }
        }
        ClientOptions.Builder options = ClientOptions.builder().rowEncoding(wireRows);
        if (security.contains("metrics")) {
          serverArgs.addAll(List.of("--metrics-port", "0"));
        }
        if (security.startsWith("mtls")) {
          dev.dynembed.table.tools.DevCertificates ca =
              new dev.dynembed.table.tools.DevCertificates(data.resolve("certs"));
          var shard = ca.issue("shard", true);
          var admin = ca.issue("bench", false);
          serverArgs.addAll(List.of("--tls-cert", shard.chain().toString(), "--tls-key",
              shard.key().toString(), "--tls-client-ca", ca.caPem.toString(),
              "--admin-clients", "bench"));
          options.tls(new ClientOptions.Tls(ca.caPem, admin.chain(), admin.key()));
        } else if (!security.equals("plain") && !security.equals("metrics")) {
          throw new IllegalArgumentException("--shard-security: unknown value " + security);
        }
        String label = n + " shard" + (n > 1 ? "s" : "") + " (loopback"
            + (shardWal.size() > 1 || !wal.equals("everysec") ? ", wal " + wal : "")
            + (security.equals("plain") ? "" : ", " + security) + ")";
        try (LocalShardProcesses s = new LocalShardProcesses(n, basePort, data, serverHeap,
            serverJavaOpts, launcher, serverArgs)) {
          for (ClientOptions.DataPlane dp : dataPlanes) {
            try (TableClient c = TableClients.connect(s.endpoints().stream()
                .map(e -> e.replace("127.0.0.1", "localhost")).toList(),
                options.dataPlane(dp).build())) {
              shardProcesses = s;
              ours(dataPlanes.size() > 1 ? label.replace(")", ", " + dp.name().toLowerCase(
                  Locale.ROOT) + ")") : label, c);
              shardProcesses = null;
            }
          }
          lines.add(String.format(Locale.ROOT, "  server RSS with %d shard(s), wal %s: %,d MB",
              n, wal, s.rssBytes() >> 20));
          lines.add(String.format(Locale.ROOT, "  log + snapshots on disk: %,d MB",
              du(data.resolve("state")) >> 20));
        }
      }
      }
    }
    if (redis != null) {
      redis();
    }
    if (memcached != null) {
      memcached();
    }
    summary();
    if (out != null) {
      Files.write(out, lines, StandardCharsets.UTF_8);
    }
    return 0;
  }

  /** Bytes of the files under a directory (0 if it does not exist). */
  private static long du(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return 0;
    }
    try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
      return s.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
    }
  }

  private void header(String s) {
    System.out.println(s);
    lines.add(s);
  }

  interface Step {
    void run(String[] batch) throws Exception;
  }

  /** Runs a step over the batches for warm-up then measured time; records rows/s. */
  private double measure(String system, String op, Step step) throws Exception {
    long self = ProcessHandle.current().pid();
    double[] cpu0 = new double[2];
    Timed.Run run = Timed.run(warmup, seconds, i -> step.run(batches.get(i % batches.size())),
        () -> {
          cpu0[0] = LocalShardProcesses.cpuSeconds(self);
          cpu0[1] = shardProcesses == null ? 0 : shardProcesses.cpuSeconds();
        });
    long n = run.steps();
    double clientCpu = (LocalShardProcesses.cpuSeconds(self) - cpu0[0]) * 1e3 / n;
    String serverCpu = shardProcesses == null ? "" : String.format(Locale.ROOT, "%.2f",
        (shardProcesses.cpuSeconds() - cpu0[1]) * 1e3 / n);
    double rowsPerSec = n * (double) batch / run.seconds();
    double msPerBatch = run.seconds() * 1e3 / n;
    results.put(system + "|" + op, rowsPerSec);
    String line = String.format(Locale.ROOT, "| %-22s | %-26s | %,14.0f | %8.2f | %6.2f | %6s |",
        system, op, rowsPerSec, msPerBatch, clientCpu, serverCpu);
    System.out.println(line);
    lines.add(line);
    return rowsPerSec;
  }

  private void ours(String system, TableClient c) throws Exception {
    EmbeddingTable t = c.createTable(TableConfigs.builder("bench", dim)
        .setOptimizer(TableConfigs.adagrad(0.05f, 0f, 0f)).setRedisTier(redisTierTable).build());
    for (int i = 0; i < numKeys; i += 65536) {
      t.findOrInsert(Arrays.copyOfRange(keys, i, Math.min(numKeys, i + 65536)));
    }
    long[] step = {0};
    long until = System.nanoTime() + (long) (systemWarmup * 1e9);
    for (int b = 0; System.nanoTime() < until; b++) { // warm every path of client and servers
      String[] k = batches.get(b % batches.size());
      t.find(k);
      t.findOrInsert(k);
      t.applyGradients(k, gradients, 0f, ++step[0]);
    }
    if (ops.contains("find")) {
      measure(system, "find", t::find);
      if (inFlight > 1) {
        ArrayDeque<CompletableFuture<FindResult>> pending = new ArrayDeque<>();
        measure(system, "find, " + inFlight + " batches in flight", k -> {
          TableReads r = new TableReads();
          pending.add(r.find(t, k));
          r.submit();
          if (pending.size() >= inFlight) {
            TableReads.join(pending.poll());
          }
        });
        while (!pending.isEmpty()) {
          TableReads.join(pending.poll());
        }
      }
    }
    if (ops.contains("findOrInsert")) {
      measure(system, "findOrInsert", t::findOrInsert);
    }
    if (ops.contains("applyGradients")) {
      measure(system, "applyGradients (Adagrad)",
          k -> t.applyGradients(k, gradients, 0f, ++step[0]));
    }
    if (ops.contains("lookup+update")) {
      measure(system, "lookup+update", k -> {
        t.findOrInsert(k);
        t.applyGradients(k, gradients, 0f, ++step[0]);
      });
    }
    TableCounters counters = t.describe().getCounters();
    if (counters.getBytesUsed() == 0) {
      return; // a backend that does not report its memory (Redis: see redis())
    }
    String mem = String.format(Locale.ROOT, "  %s: %,d keys, %.1f bytes/key stored vs %.1f raw"
        + " weight+slot floats (%.3fx)", system, counters.getKeys(),
        (double) counters.getBytesUsed() / counters.getKeys(),
        (double) counters.getBytesRaw() / counters.getKeys(),
        (double) counters.getBytesUsed() / counters.getBytesRaw());
    System.out.println(mem);
    lines.add(mem);
  }

  /** Warms the client library of a baseline as long as ours get (a few seconds suffice). */
  private void warmupBaseline(Runnable call) {
    long until = System.nanoTime() + (long) (Math.min(systemWarmup, 5) * 1e9);
    while (System.nanoTime() < until) {
      call.run();
    }
  }

  // ------------------------------------------------------------ the "storage doesn't optimize" path

  /** Adagrad in the client on a value of [weights | accumulator] floats, little-endian. */
  private void adagrad(byte[] value, float[] g, int gOff) {
    ByteBuffer b = ByteBuffer.wrap(value).order(ByteOrder.LITTLE_ENDIAN);
    for (int j = 0; j < dim; j++) {
      float w = b.getFloat(4 * j);
      float a = b.getFloat(4 * (dim + j)) + g[gOff + j] * g[gOff + j];
      b.putFloat(4 * (dim + j), a);
      b.putFloat(4 * j, w - 0.05f * g[gOff + j] / ((float) Math.sqrt(a) + 1e-7f));
    }
  }

  private byte[] initialValue(int floats) {
    byte[] v = new byte[4 * floats];
    ByteBuffer b = ByteBuffer.wrap(v).order(ByteOrder.LITTLE_ENDIAN);
    for (int j = 0; j < dim; j++) {
      b.putFloat(4 * j, 0.01f);
    }
    for (int j = dim; j < floats; j++) {
      b.putFloat(4 * j, 0.1f);
    }
    return v;
  }

  /** Distinct keys of a batch and their summed gradients, as the client of a KV store must. */
  private record Distinct(String[] keys, float[] grads) {}

  private Distinct distinct(String[] batchKeys) {
    Map<String, Integer> pos = new HashMap<>();
    List<String> ks = new ArrayList<>();
    float[] g = new float[batchKeys.length * dim];
    for (int i = 0; i < batchKeys.length; i++) {
      Integer p = pos.putIfAbsent(batchKeys[i], ks.size());
      if (p == null) {
        p = ks.size();
        ks.add(batchKeys[i]);
      }
      for (int j = 0; j < dim; j++) {
        g[p * dim + j] += gradients[i * dim + j];
      }
    }
    return new Distinct(ks.toArray(new String[0]), g);
  }

  private static void decodeInto(byte[] v, float[] out, int off, int dim) {
    if (v != null) {
      ByteBuffer.wrap(v).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out, off, dim);
    }
  }

  /** Redis's MGET and get-compute-set (Adagrad in this client), measured as {@code system}. */
  private void redisOps(Jedis j, String system) throws Exception {
    float[] out = new float[batch * dim];
    measure(system, "find (MGET)", k -> {
      byte[][] ks = new byte[k.length][];
      for (int i = 0; i < k.length; i++) {
        ks[i] = ("w:" + k[i]).getBytes(StandardCharsets.UTF_8);
      }
      List<byte[]> vs = j.mget(ks);
      for (int i = 0; i < k.length; i++) {
        decodeInto(vs.get(i), out, i * dim, dim);
      }
    });
    measure(system, "get-compute-set (Adagrad)", k -> {
      Distinct d = distinct(k);
      byte[][] ks = new byte[d.keys().length][];
      for (int i = 0; i < ks.length; i++) {
        ks[i] = ("ws:" + d.keys()[i]).getBytes(StandardCharsets.UTF_8);
      }
      List<byte[]> vs = j.mget(ks);
      byte[][] kv = new byte[2 * ks.length][];
      for (int i = 0; i < ks.length; i++) {
        byte[] v = vs.get(i) != null ? vs.get(i) : initialValue(2 * dim);
        adagrad(v, d.grads(), i * dim);
        kv[2 * i] = ks[i];
        kv[2 * i + 1] = v;
      }
      j.mset(kv);
    });
  }

  private void redis() throws Exception {
    String[] hp = redis.split(":");
    try (Jedis j = new Jedis(hp[0], Integer.parseInt(hp[1]), 60_000)) {
      j.flushAll();
      byte[] row = initialValue(dim);
      byte[] rowSlots = initialValue(2 * dim);
      for (int i = 0; i < numKeys; i += 2000) {
        List<byte[]> kv = new ArrayList<>();
        List<byte[]> kv2 = new ArrayList<>();
        for (int k = i; k < Math.min(numKeys, i + 2000); k++) {
          kv.add(("w:" + keys[k]).getBytes(StandardCharsets.UTF_8));
          kv.add(row);
          kv2.add(("ws:" + keys[k]).getBytes(StandardCharsets.UTF_8));
          kv2.add(rowSlots);
        }
        j.mset(kv.toArray(new byte[0][]));
        j.mset(kv2.toArray(new byte[0][]));
      }
      warmupBaseline(() -> j.mget(("w:" + keys[0]).getBytes(StandardCharsets.UTF_8)));
      redisOps(j, "Redis");
      // the same with Redis as durable as the shards' default (--fsync everysec): an append-only
      // file fsynced every second, as our write-ahead log is; turned on at run time, measured
      // once its first rewrite is done, turned off again
      j.configSet("appendfsync", "everysec");
      j.configSet("appendonly", "yes");
      long until = System.nanoTime() + 120_000_000_000L;
      for (String p = j.info("persistence"); p.contains("aof_rewrite_in_progress:1")
          || p.contains("aof_rewrite_scheduled:1"); p = j.info("persistence")) {
        if (System.nanoTime() > until) {
          throw new IllegalStateException("Redis did not finish its AOF rewrite in 120 s");
        }
        Thread.sleep(100);
      }
      redisOps(j, "Redis (AOF everysec)");
      j.configSet("appendonly", "no");
      String info = j.info("memory");
      for (String line : info.split("\r?\n")) {
        if (line.startsWith("used_memory:")) {
          long used = Long.parseLong(line.substring("used_memory:".length()).trim());
          String mem = String.format(Locale.ROOT, "  Redis: %.1f bytes/key over %,d keys"
              + " (half 64-float rows, half 128-float rows+slots)", (double) used / j.dbSize(),
              j.dbSize());
          System.out.println(mem);
          lines.add(mem);
        }
      }
      j.flushAll();
    }
    // the same ops through the EmbeddingTable API over Redis (redis-table: rows in Redis, the
    // optimizer in this client), beside our shards in one run
    try (TableClient c = RedisTables.connect("redis://" + redis);
        Jedis j = new Jedis(hp[0], Integer.parseInt(hp[1]), 60_000)) {
      ours("Redis backend (redis-table)", c);
      long keysStored = c.openTable("bench").describe().getCounters().getKeys();
      for (String line : j.info("memory").split("\\r?\\n")) {
        if (line.startsWith("used_memory:")) {
          long used = Long.parseLong(line.substring("used_memory:".length()).trim());
          String mem = String.format(Locale.ROOT, "  Redis backend: %.1f bytes/key over %,d keys"
              + " (record: 64 floats + 64 Adagrad slots + step and update count; and a count"
              + " key)", (double) used / keysStored, keysStored);
          System.out.println(mem);
          lines.add(mem);
        }
      }
    }
    if (shardsOverRedis > 0) {
      shardsOverRedis();
    }
  }

  /**
   * Our shards with the table's rows in Redis too (redis_tier, issue 33): the shards run the
   * optimizer, Redis gets every changed row each flush period.
   */
  private void shardsOverRedis() throws Exception {
    String[] hp = redis.split(":");
    try (Jedis j = new Jedis(hp[0], Integer.parseInt(hp[1]), 60_000)) {
      j.flushAll();
    }
    Path data = Files.createTempDirectory("bench-shards-redis");
    List<String> launcher = serverCpus == null ? List.of() : List.of("taskset", "-c", serverCpus);
    List<String> serverArgs = new ArrayList<>(List.of("--fsync", "everysec", "--redis-tier",
        "redis://" + redis, "--redis-tier-flush-ms", String.valueOf(redisTierFlushMs)));
    String label = shardsOverRedis + " shards over Redis";
    try (LocalShardProcesses s = new LocalShardProcesses(shardsOverRedis, basePort, data,
        serverHeap, serverJavaOpts, launcher, serverArgs);
        TableClient c = TableClients.connect(s.endpoints(), ClientOptions.builder()
            .rowEncoding(wireRows).build())) {
      shardProcesses = s;
      redisTierTable = true;
      try {
        ours(label, c);
      } finally {
        redisTierTable = false;
        shardProcesses = null;
      }
      dev.dynembed.table.v1.TableCounters tc = c.openTable("bench").describe().getCounters();
      String w = String.format(Locale.ROOT, "  %s: %,d rows written behind (flush every %d ms;"
          + " %,d rows in the last flush), server RSS %,d MB", label, tc.getWrittenBehind(),
          redisTierFlushMs, tc.getLastFlushKeys(), s.rssBytes() >> 20);
      System.out.println(w);
      lines.add(w);
      // shard 0 loses its process and its disk: how long until it serves again from Redis
      Thread.sleep(2 * redisTierFlushMs + 500); // every change written behind
      Dirs.deleteTree(data.resolve("state").resolve("shard-0"));
      long t0 = System.nanoTime();
      s.kill(0);
      while (s.restarts() < 1) {
        Thread.sleep(5);
      }
      long keysBack;
      try (TableClient again = TableClients.connect(s.endpoints(), ClientOptions.builder()
          .retryFor(java.time.Duration.ofMinutes(10)).build())) {
        keysBack = again.openTable("bench").describe().getCounters().getKeys();
      }
      w = String.format(Locale.ROOT, "  %s: shard 0 SIGKILLed with its state directory deleted:"
          + " serving again %.1f s later (JVM start + its tables and cold keys loaded from Redis;"
          + " %,d keys in the table after)", label, (System.nanoTime() - t0) / 1e9, keysBack);
      System.out.println(w);
      lines.add(w);
    }
  }

  private void memcached() throws Exception {
    MemcachedClient mc = new MemcachedClient(new ConnectionFactoryBuilder()
        .setProtocol(ConnectionFactoryBuilder.Protocol.BINARY)
        .setOpTimeout(60_000).setOpQueueMaxBlockTime(60_000).build(),
        AddrUtil.getAddresses(memcached));
    try {
      mc.flush().get();
      byte[] row = initialValue(dim);
      byte[] rowSlots = initialValue(2 * dim);
      List<Future<Boolean>> pending = new ArrayList<>();
      for (int i = 0; i < numKeys; i++) {
        pending.add(mc.set("w:" + keys[i], 0, row));
        pending.add(mc.set("ws:" + keys[i], 0, rowSlots));
        if (pending.size() >= 20_000) {
          for (Future<Boolean> f : pending) {
            f.get();
          }
          pending.clear();
        }
      }
      for (Future<Boolean> f : pending) {
        f.get();
      }
      float[] out = new float[batch * dim];
      warmupBaseline(() -> mc.getBulk(List.of("w:" + keys[0])));
      measure("memcached", "find (multi-get)", k -> {
        List<String> ks = new ArrayList<>(k.length);
        for (String s : k) {
          ks.add("w:" + s);
        }
        Map<String, Object> vs = mc.getBulk(ks);
        for (int i = 0; i < k.length; i++) {
          decodeInto((byte[]) vs.get(ks.get(i)), out, i * dim, dim);
        }
      });
      measure("memcached", "get-compute-set (Adagrad)", k -> {
        Distinct d = distinct(k);
        List<String> ks = new ArrayList<>(d.keys().length);
        for (String s : d.keys()) {
          ks.add("ws:" + s);
        }
        Map<String, Object> vs = mc.getBulk(ks);
        List<Future<Boolean>> sets = new ArrayList<>(ks.size());
        for (int i = 0; i < ks.size(); i++) {
          byte[] v = (byte[]) vs.get(ks.get(i));
          if (v == null) {
            v = initialValue(2 * dim);
          }
          adagrad(v, d.grads(), i * dim);
          sets.add(mc.set(ks.get(i), 0, v));
        }
        for (Future<Boolean> f : sets) {
          f.get();
        }
      });
    } finally {
      mc.shutdown();
    }
  }

  private void summary() {
    lines.add("");
    System.out.println();
    Double redisFind = results.get("Redis|find (MGET)");
    Double redisGcs = results.get("Redis|get-compute-set (Adagrad)");
    Double aofFind = results.get("Redis (AOF everysec)|find (MGET)");
    Double aofGcs = results.get("Redis (AOF everysec)|get-compute-set (Adagrad)");
    Double mcFind = results.get("memcached|find (multi-get)");
    Double mcGcs = results.get("memcached|get-compute-set (Adagrad)");
    Double backendLu = results.get("Redis backend (redis-table)|lookup+update");
    for (Map.Entry<String, Double> e : results.entrySet()) {
      String[] p = e.getKey().split("\\|");
      if (!p[0].contains("shard")) {
        continue;
      }
      if (p[1].startsWith("find") && !p[1].startsWith("findOrInsert")) {
        ratio(p[0] + " " + p[1] + " vs Redis MGET", e.getValue(), redisFind, 3);
        ratio(p[0] + " " + p[1] + " vs Redis (AOF everysec) MGET", e.getValue(), aofFind, 3);
        ratio(p[0] + " " + p[1] + " vs memcached multi-get", e.getValue(), mcFind, 3);
        ratio(p[0] + " " + p[1] + " vs in-process find", e.getValue(),
            results.get("in-process|find"), 0.8);
      }
      if (p[1].equals("lookup+update")) {
        ratio(p[0] + " lookup+update vs Redis get-compute-set", e.getValue(), redisGcs, 10);
        ratio(p[0] + " lookup+update vs Redis (AOF everysec) get-compute-set", e.getValue(),
            aofGcs, 10);
        ratio(p[0] + " lookup+update vs memcached get-compute-set", e.getValue(), mcGcs, 10);
        ratio(p[0] + " lookup+update vs the Redis backend's", e.getValue(), backendLu, 1);
      }
    }
  }

  private void ratio(String what, double ours, Double theirs, double target) {
    if (theirs == null) {
      return;
    }
    String s = String.format(Locale.ROOT, "  %-72s %6.2fx (target >= %.1fx: %s)", what,
        ours / theirs, target, ours / theirs >= target ? "met" : "NOT met");
    System.out.println(s);
    lines.add(s);
  }
}
