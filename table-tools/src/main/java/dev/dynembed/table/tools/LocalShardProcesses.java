package dev.dynembed.table.tools;

import dev.dynembed.table.common.Dirs;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * N table-server shard processes on this machine (loopback), started with this JVM's class path:
 * a one-command distributed run (word2vec's {@code --shards N}, the table benchmark). Each shard
 * binds a free port, read back from its start-up line in its log ({@code DATA_DIR/shard-I.log}).
 * {@link #close} stops them; they also exit by themselves once this process is gone, even after
 * a kill -9 ({@code table-server --exit-with}).
 *
 * <p>The shards are supervised: one that exits while this object is open (a kill -9, an
 * OutOfMemoryError) is started again on its port; it recovers its tables from its write-ahead
 * log under {@code DATA_DIR/state/shard-I} and the clients' resends ride through the gap
 * (docs/design/0008-durability.md). A shard that exits more than {@value #MAX_RESTARTS} times
 * within a minute is left down, and so is every shard started with {@code --wal off} (it would
 * come back with no tables, or with a Redis tier's rows of up to a flush period ago, and answer:
 * its clients get errors instead). The state directory is emptied at start: these shards belong
 * to this process and begin with no tables.
 */
public final class LocalShardProcesses implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening on [^\\s]+:(\\d+)");

  static final int MAX_RESTARTS = 10;

  private final List<Process> processes = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final List<String> endpoints = new ArrayList<>();
  private final List<List<String>> commands = new ArrayList<>();
  private final Path dataDir;
  private volatile boolean closing;
  private final java.util.concurrent.atomic.AtomicInteger exitsHandled =
      new java.util.concurrent.atomic.AtomicInteger();
  private final java.util.concurrent.atomic.AtomicInteger restarts =
      new java.util.concurrent.atomic.AtomicInteger();
  private final java.util.Map<Integer, java.util.Deque<Long>> recentExits =
      new java.util.HashMap<>();
  /** Held while a process is killed and its disk wiped: its restart waits for both. */
  private final Object restartLock = new Object();
  /** Replicated shards: their etcd and cluster (null: plain shards, one process each). */
  private final dev.dynembed.job.LocalEtcd etcd;
  private final String cluster;
  /** Processes per shard index: 1, or 1 + followers. */
  private final int groupSize;
  private final int numShards;
  /** Whether a shard that exits is started again: not without its log ({@code --wal off}). */
  private final boolean restartable;
  /** All shards in one process ({@link #inOneProcess}): every entry of processes is it. */
  private final boolean oneProcess;

  /**
   * @param basePort port of shard 0 (shard i gets basePort + i), or 0 for any free ports
   * @param javaOpts extra JVM options, space-separated; {@code {shard}} is replaced by the index
   */
  public LocalShardProcesses(int n, int basePort, Path dataDir, String heap, String javaOpts)
      throws IOException {
    this(n, basePort, dataDir, heap, javaOpts, List.of());
  }

  /**
   * As above, each process started through {@code launcher} (a command prefix, e.g. {@code
   * taskset -c 1} to keep the shards on core 1, or {@code ip netns exec ns{shard}}: {@code
   * {shard}} is replaced by the index; empty for none).
   */
  public LocalShardProcesses(int n, int basePort, Path dataDir, String heap, String javaOpts,
      List<String> launcher) throws IOException {
    this(n, basePort, dataDir, heap, javaOpts, launcher, List.of());
  }

  /**
   * As above, with extra {@code table-server} options for every shard (e.g. {@code --fsync
   * always}, {@code --wal off}; {@code {shard}} is replaced by the index; the endpoints take a
   * {@code --host} given here).
   */
  public LocalShardProcesses(int n, int basePort, Path dataDir, String heap, String javaOpts,
      List<String> launcher, List<String> serverArgs) throws IOException {
    this(n, 0, null, null, basePort, dataDir, heap, javaOpts, launcher, serverArgs, false);
  }

  /**
   * N shards in one process ({@code ShardsInOneProcess}): each its own ports, engine, state
   * directory and log, as with a process each, but one JVM (one JIT, one collector) whose heap is
   * {@code heap} times n. Supervised as one: when it exits, all its shards restart together and
   * recover from their logs. On a machine with few cores the JVMs a process per shard adds cost
   * more than the isolation buys (docs/benchmarks.md).
   */
  public static LocalShardProcesses inOneProcess(int n, Path dataDir, String heap,
      String javaOpts, List<String> launcher, List<String> serverArgs) throws IOException {
    return new LocalShardProcesses(n, 0, null, null, 0, dataDir, heap, javaOpts, launcher,
        serverArgs, true);
  }

  /**
   * Replicated shards (docs/design/0019-cluster-map.md): n shard indexes, each a group of one
   * primary and {@code followers} followers (each process its own state directory, {@code
   * DATA_DIR/state/rR}), agreeing through an etcd started here ({@link #spec} is the cluster's
   * {@code etcd://} URI). Returns once every group has a primary and, with followers, one in sync.
   *
   * @param replication sync or async ({@code table-server --replication})
   */
  public static LocalShardProcesses replicated(int n, int followers, String replication,
      Path dataDir, String heap, String javaOpts, List<String> launcher, List<String> serverArgs)
      throws IOException {
    return replicated(n, followers, replication, "127.0.0.1", dataDir, heap, javaOpts, launcher,
        serverArgs);
  }

  /**
   * As above, with the etcd listening on {@code etcdHost} (a {@link NetworkNamespaces#bridged}
   * harness's {@link NetworkNamespaces#HOST}, so that shards inside the namespaces reach it).
   * In {@code launcher} and {@code serverArgs}, {@code {process}} stands for the process's number
   * k (shard k / (1 + followers), member k % (1 + followers)): one namespace per process.
   */
  public static LocalShardProcesses replicated(int n, int followers, String replication,
      String etcdHost, Path dataDir, String heap, String javaOpts, List<String> launcher,
      List<String> serverArgs) throws IOException {
    if (followers < 0) {
      throw new IllegalArgumentException("followers must be >= 0 but was " + followers);
    }
    LocalShardProcesses p = new LocalShardProcesses(n, followers, replication, etcdHost, 0,
        dataDir, heap, javaOpts, launcher, serverArgs, false);
    try {
      p.awaitGroups(java.time.Duration.ofSeconds(120));
    } catch (IOException | RuntimeException e) {
      p.close();
      throw e;
    }
    return p;
  }

  private LocalShardProcesses(int n, int followers, String replication, String etcdHost,
      int basePort, Path dataDir, String heap, String javaOpts, List<String> launcher,
      List<String> serverArgs, boolean oneProcess) throws IOException {
    this.dataDir = dataDir;
    this.oneProcess = oneProcess;
    this.numShards = n;
    int wal = serverArgs.indexOf("--wal");
    this.restartable = wal < 0 || wal + 1 >= serverArgs.size()
        || !serverArgs.get(wal + 1).equals("off");
    this.groupSize = replication == null ? 1 : 1 + followers;
    this.etcd = replication == null ? null : new dev.dynembed.job.LocalEtcd(etcdHost);
    this.cluster = etcd == null ? null
        : "etcd://" + etcd.endpoint() + "/local-" + ProcessHandle.current().pid();
    java.nio.file.Files.createDirectories(dataDir); // the shards' logs go there
    Dirs.deleteTree(dataDir.resolve("state")); // a fresh cluster: no tables from an earlier run
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String cp = System.getProperty("java.class.path");
    // all processes start at once (each JVM takes ~1 s to come up), then their ports are read
    for (int k = 0; k < (oneProcess ? 1 : n * groupSize); k++) {
      int i = k / groupSize;
      int port = basePort == 0 ? 0 : basePort + i;
      // the vector module: the shard's optimizer and top-k loops run on FloatKernels' SIMD path
      List<String> cmd = new ArrayList<>();
      for (String l : launcher) { // {shard}: e.g. ip netns exec ns{shard}, one namespace each
        cmd.add(placeholders(l, i, k));
      }
      // a shard that runs out of memory exits instead of limping on with half-applied state
      String h = oneProcess ? times(heap, n) : heap;
      cmd.addAll(List.of(java, "-Xms" + h, "-Xmx" + h, "-XX:+ExitOnOutOfMemoryError",
          "-XX:+UseParallelGC", "--add-modules", "jdk.incubator.vector"));
      for (String o : javaOpts.trim().split("\\s+")) {
        if (!o.isEmpty()) {
          cmd.add(o.replace("{shard}", String.valueOf(i)));
        }
      }
      cmd.addAll(List.of("-cp", cp));
      if (oneProcess) {
        cmd.addAll(List.of("dev.dynembed.table.server.ShardsInOneProcess", "--shard-indexes",
            joined(n, j -> String.valueOf(j)), "--ports", joined(n, j -> "0")));
      } else {
        cmd.addAll(List.of("dev.dynembed.table.server.TableServerMain",
            "--port", String.valueOf(port), "--shard-index", String.valueOf(i)));
      }
      cmd.addAll(List.of(
          "--num-shards", String.valueOf(n), "--data-dir", dataDir.toString(),
          // a stop means this process is done with them: nothing to save for a next start
          "--no-snapshot-on-exit",
          // shards die with this process, even when it is killed with SIGKILL
          "--exit-with", String.valueOf(ProcessHandle.current().pid())));
      for (String a : serverArgs) {
        cmd.add(placeholders(a, i, k));
      }
      if (etcd != null) {
        cmd.addAll(List.of("--cluster", cluster, "--replication", replication,
            "--state-dir",
            dataDir.resolve("state").resolve("r" + k % groupSize).toString()));
      }
      try {
        Process p = launch(cmd, log(k), false);
        for (int j = 0; j < (oneProcess ? n : 1); j++) {
          commands.add(cmd);
          processes.add(p);
        }
      } catch (IOException e) {
        close();
        throw e;
      }
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    List<String> ports = new ArrayList<>();
    for (int i = 0; i < n * groupSize; i++) {
      // one process prints every shard's line into one log: find this shard's
      Pattern listening = oneProcess
          ? Pattern.compile("shard " + i + " of " + n + " listening on [^\\s]+:(\\d+)")
          : LISTENING;
      String port = null;
      while (port == null) {
        String out = Files.readString(log(oneProcess ? 0 : i), StandardCharsets.UTF_8);
        Matcher m = listening.matcher(out);
        if (m.find()) {
          port = m.group(1);
        } else if (!processes.get(i).isAlive() || System.nanoTime() > deadline) {
          close();
          throw new IOException("table shard " + i + " of " + n + " did not start:\n" + out);
        } else {
          try {
            Thread.sleep(20);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            close();
            throw new IOException("interrupted while table shard " + i + " started", e);
          }
        }
      }
      int host = commands.get(i).indexOf("--host");
      endpoints.add((host < 0 ? "127.0.0.1" : commands.get(i).get(host + 1)) + ":" + port);
      ports.add(port);
      if (!oneProcess && etcd == null) {
        // a restart binds the port the clients know (replicated shards: clients follow the map)
        List<String> cmd = commands.get(i);
        cmd.set(cmd.indexOf("--port") + 1, port);
      }
    }
    if (oneProcess) { // a restart binds the ports the clients know (one command for all)
      List<String> cmd = commands.get(0);
      cmd.set(cmd.indexOf("--ports") + 1, String.join(",", ports));
    }
    for (int i = 0; i < (oneProcess ? 1 : n * groupSize); i++) {
      supervise(i, processes.get(i));
    }
  }

  /** {@code {shard}} replaced by shard i, {@code {process}} by process k. */
  private static String placeholders(String arg, int i, int k) {
    Matcher m = SHARD_OF.matcher(arg);
    StringBuilder b = new StringBuilder();
    while (m.find()) { // {shard-of:A,B,C}: shard i's element
      m.appendReplacement(b, Matcher.quoteReplacement(m.group(1).split(",")[i]));
    }
    m.appendTail(b);
    return b.toString().replace("{shard}", String.valueOf(i))
        .replace("{process}", String.valueOf(k));
  }

  private static final Pattern SHARD_OF = Pattern.compile("\\{shard-of:([^}]*)\\}");

  /**
   * Serving replicas of the shards of a cluster in etcd ({@code etcd://.../NAME}, a replicated
   * group's {@link #spec}): n {@code table-server --serve-from} processes, replica i following
   * shard i's primary through failovers; restarted when they exit, as shards are.
   *
   * @param maxLagMs their --max-lag-ms
   */
  public static LocalShardProcesses servingReplicas(String cluster, int n, Path dataDir,
      String heap, long maxLagMs) throws IOException {
    return new LocalShardProcesses(n, 0, dataDir, heap,
        System.getProperty("dynembed.servingJavaOpts", ""), List.of(),
        List.of("--serve-from", cluster, "--max-lag-ms", String.valueOf(maxLagMs)));
  }

  /**
   * Serving replicas (docs/design/0024-vectors-in.md): one {@code table-server --serve-from}
   * process per training shard, shard i following {@code training.get(i)}; restarted when they
   * exit, as shards are.
   *
   * @param maxLagMs their --max-lag-ms
   */
  public static LocalShardProcesses servingReplicas(List<String> training, Path dataDir,
      String heap, long maxLagMs) throws IOException {
    return servingReplicas(training, dataDir, heap, maxLagMs, List.of());
  }

  /** As above, with more {@code table-server} options (e.g. {@code --start-from DIR}). */
  public static LocalShardProcesses servingReplicas(List<String> training, Path dataDir,
      String heap, long maxLagMs, List<String> more) throws IOException {
    List<String> args = new java.util.ArrayList<>(List.of("--serve-from",
        "{shard-of:" + String.join(",", training) + "}", "--max-lag-ms",
        String.valueOf(maxLagMs)));
    args.addAll(more);
    return new LocalShardProcesses(training.size(), 0, dataDir, heap,
        System.getProperty("dynembed.servingJavaOpts", ""), List.of(), args);
  }

  /** {@code heap} (a JVM size: digits and an optional k, m or g) times n. */
  static String times(String heap, int n) {
    Matcher m = Pattern.compile("(\\d+)([kKmMgG]?)").matcher(heap);
    if (!m.matches()) {
      throw new IllegalArgumentException("a shard heap must be digits and an optional k, m or"
          + " g (as -Xmx takes it) but was '" + heap + "'");
    }
    return Long.parseLong(m.group(1)) * n + m.group(2);
  }

  private static String joined(int n, java.util.function.IntFunction<String> f) {
    return String.join(",", java.util.stream.IntStream.range(0, n).mapToObj(f).toList());
  }

  /** What exits and restarts as process k: its shard, or all shards of the one process. */
  private String what(int k) {
    return oneProcess ? "shards 0-" + (numShards - 1) + " (one process)"
        : "shard " + k / groupSize;
  }

  /**
   * What clients open ({@code TableClients.open}): the shards' endpoints in shard order, or the
   * cluster's {@code etcd://} URI for replicated shards.
   */
  public String spec() {
    return etcd == null ? String.join(",", endpoints) : cluster;
  }

  /** Waits until every shard has a primary and (with followers) a follower in sync. */
  public void awaitGroups(java.time.Duration timeout) throws IOException {
    if (etcd == null) {
      return;
    }
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      dev.dynembed.table.cluster.ClusterStatus st = status();
      boolean ok = st.shards().size() == numShards;
      for (int i = 0; i < numShards && ok; i++) {
        var g = st.groups().get(i);
        ok = g != null && (groupSize == 1 || !g.inSync().isEmpty());
      }
      // and every primary's entry is a live process's (a killed one's lingers for its lease)
      for (dev.dynembed.table.cluster.ClusterStatus.Entry e : st.shards()) {
        ok &= processes.stream().anyMatch(p -> p.pid() == e.member().pid() && p.isAlive());
      }
      if (ok) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IOException("the replicated shards did not form within " + timeout.toSeconds()
            + " s:\n" + st.format() + "(their output: " + dataDir + "/shard-*.log)");
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted", e);
      }
    }
  }

  /** The client port of replicated shards' etcd. */
  public int etcdPort() {
    if (etcd == null) {
      throw new IllegalStateException("plain shards have no etcd");
    }
    return etcd.port();
  }

  /** The cluster map of replicated shards. */
  public dev.dynembed.table.cluster.ClusterStatus status() {
    return dev.dynembed.table.cluster.ClusterStatus.read(
        dev.dynembed.table.cluster.ClusterAddress.parse(cluster));
  }

  /**
   * Replicated shards: SIGKILLs the primary of shard {@code index} and, with {@code wipe},
   * deletes its state directory (a lost disk) before it is restarted (it comes back as a
   * follower and loads the new primary's snapshot). Returns System.nanoTime of the kill.
   */
  public long killPrimary(int index, boolean wipe) throws IOException, InterruptedException {
    return killProcess(primaryOf(index), wipe);
  }

  /** The process number of the primary of replicated shard {@code index}. */
  public int primaryOf(int index) throws IOException {
    long pid = status().shards().stream().filter(e -> e.member().index() == index).findFirst()
        .orElseThrow(() -> new IOException("shard " + index + " has no primary")).member().pid();
    for (int k = index * groupSize; k < (index + 1) * groupSize; k++) {
      if (processes.get(k).pid() == pid) {
        return k;
      }
    }
    throw new IOException("the primary of shard " + index + " (pid " + pid + ") is not ours");
  }

  /**
   * The process number of a follower of replicated shard {@code index} (a process of its group
   * that is not its primary): {@link #pidOf} and {@link #logOfProcess} take it.
   */
  public int followerOf(int index) throws IOException {
    int primary = primaryOf(index);
    for (int k = index * groupSize; k < (index + 1) * groupSize; k++) {
      if (k != primary) {
        return k;
      }
    }
    throw new IOException("shard " + index + " has no follower");
  }

  /**
   * SIGKILLs process {@code k} of a replicated shard ({@link #primaryOf}, {@link #followerOf}),
   * with its state directory deleted if {@code wipe}; it is restarted, and follows: from its own
   * log or, wiped, from a snapshot. Returns the time of the kill (System.nanoTime).
   */
  public long killProcess(int k, boolean wipe) throws IOException, InterruptedException {
    synchronized (restartLock) {
      long t = System.nanoTime();
      processes.get(k).destroyForcibly().waitFor();
      if (wipe) {
        Dirs.deleteTree(dataDir.resolve("state").resolve("r" + k % groupSize)
            .resolve("shard-" + k / groupSize));
      }
      return t;
    }
  }

  /** The output log of process {@code k} (shard-I.log, or shard-I-rR.log when replicated). */
  public Path logOfProcess(int k) {
    return log(k);
  }

  /**
   * Starts a shard; it writes its output straight into DATA_DIR/shard-I.log, which outlives this
   * process (the shard's last words after a kill -9 of this one are there too).
   */
  private static Process launch(List<String> cmd, Path log, boolean append) throws IOException {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    pb.redirectOutput(append ? ProcessBuilder.Redirect.appendTo(log.toFile())
        : ProcessBuilder.Redirect.to(log.toFile()));
    return pb.start();
  }

  private void supervise(int i, Process p) {
    p.onExit().thenRun(() -> {
      try {
        onExit(i, p);
      } finally {
        exitsHandled.incrementAndGet();
      }
    });
  }

  /** A shard process ended: restarted (it recovers from its log), or left down, saying why. */
  private void onExit(int i, Process p) {
    if (closing) {
      return;
    }
    if (!restartable) {
      System.err.printf("table %s exited (code %d); left down: it ran without a"
          + " write-ahead log (--wal off), so a restart would answer with fresh rows; resume"
          + " from the last checkpoint (its output: %s)%n", what(i), p.exitValue(), log(i));
      return;
    }
    synchronized (recentExits) {
      java.util.Deque<Long> exits =
          recentExits.computeIfAbsent(i, k -> new java.util.ArrayDeque<>());
      long now = System.nanoTime();
      exits.addLast(now);
      while (now - exits.peekFirst() > TimeUnit.MINUTES.toNanos(1)) {
        exits.removeFirst();
      }
      if (exits.size() > MAX_RESTARTS) {
        System.err.printf("table %s exited (code %d); %d exits within a minute: left"
            + " down (its output: %s)%n", what(i), p.exitValue(), exits.size(), log(i));
        return;
      }
    }
    System.err.printf("table %s exited (code %d); restarting it on %s: it recovers its"
        + " tables from its write-ahead log%n", what(i), p.exitValue(),
        etcd == null ? (oneProcess ? String.join(",", endpoints) : endpoints.get(i))
            : "a free port (in the cluster map)");
    try {
      Process q;
      synchronized (restartLock) { // a wipe of its disk first
        q = launch(commands.get(i), log(i), true);
      }
      if (oneProcess) {
        for (int j = 0; j < processes.size(); j++) {
          processes.set(j, q);
        }
      } else {
        processes.set(i, q);
      }
      restarts.incrementAndGet();
      if (closing) {
        q.destroy();
      } else {
        supervise(i, q);
      }
    } catch (IOException e) {
      System.err.printf("table %s could not be restarted: %s%n", what(i), e.getMessage());
    }
  }

  /** Kills shard i with SIGKILL, as a crash would (tests and chaos runs); it is restarted. */
  public void kill(int i) {
    processes.get(i).destroyForcibly();
  }

  /** Shard processes: the shards, times 1 + followers for replicated shards. */
  public String describe() {
    return oneProcess ? numShards + " shards in one process"
        : groupSize == 1 ? numShards + " shards"
        : numShards + " shards x " + groupSize + " processes";
  }

  /** Shard restarts since start. */
  public int restarts() {
    return restarts.get();
  }

  /**
   * Process exits handled since start: each one restarted or left down (a shard without its
   * log, too many exits in a minute) by the time it is counted.
   */
  public int exitsHandled() {
    return exitsHandled.get();
  }

  /** The output log of process k: shard-I.log, or shard-I-rR.log for replicated shards. */
  private Path log(int k) {
    return groupSize == 1 ? logOf(dataDir, k)
        : dataDir.resolve("shard-" + k / groupSize + "-r" + k % groupSize + ".log");
  }

  /** The output log of shard i. */
  public static Path logOf(Path dataDir, int i) {
    return dataDir.resolve("shard-" + i + ".log");
  }

  /** host:port of every shard, in shard order. */
  public List<String> endpoints() {
    return List.copyOf(endpoints);
  }

  /** Process ids of the shard processes now, in shard order (one for shards in one process). */
  /** The pid of process {@code k} now. */
  public long pidOf(int k) {
    return processes.get(k).pid();
  }

  public List<Long> pids() {
    return distinct().stream().map(Process::pid).toList();
  }

  /** Resident set size of the shard processes, from /proc (Linux); -1 if unreadable. */
  public long rssBytes() {
    return summedStatusBytes("VmRSS");
  }

  /** Peak resident set size (VmHWM) summed over the shard processes; -1 if unreadable. */
  public long peakRssBytes() {
    return summedStatusBytes("VmHWM");
  }

  /**
   * A memory field of /proc/PID/status summed over the shard processes (exact as a double: far
   * below 2^53 bytes); -1 if any is unreadable.
   */
  private long summedStatusBytes(String field) {
    return (long) sumOverProcesses(pid -> statusBytes(pid, field));
  }

  /**
   * CPU seconds (user + system) the shard processes used so far, from /proc (Linux); -1 if
   * unreadable.
   */
  public double cpuSeconds() {
    return sumOverProcesses(LocalShardProcesses::cpuSeconds);
  }

  /** A per-process figure summed over the shard processes; -1 if any is unreadable (-1). */
  private double sumOverProcesses(java.util.function.LongToDoubleFunction ofPid) {
    double total = 0;
    for (Process p : distinct()) {
      double c = ofPid.applyAsDouble(p.pid());
      if (c < 0) {
        return -1;
      }
      total += c;
    }
    return total;
  }

  /** User + system CPU seconds of a process from {@code /proc/<pid>/stat}; -1 if unreadable. */
  public static double cpuSeconds(long pid) {
    return cpuSeconds(Path.of("/proc", String.valueOf(pid), "stat"));
  }

  /** User + system CPU seconds from a process's or a thread's stat file; -1 if unreadable. */
  private static double cpuSeconds(Path statFile) {
    try {
      String stat = Files.readString(statFile);
      // fields after the command (which may hold spaces) start after its closing parenthesis
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
      long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]); // utime, stime
      return ticks / 100.0; // USER_HZ: 100 on Linux
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /**
   * CPU seconds the shard processes' JIT compiler threads used so far (of {@link #cpuSeconds}),
   * from /proc (Linux); -1 if unreadable.
   */
  public double compilerCpuSeconds() {
    return sumOverProcesses(LocalShardProcesses::compilerCpuSeconds);
  }

  /**
   * User + system CPU seconds of a HotSpot process's JIT compiler threads (those named "C1
   * CompilerThread..." and "C2 CompilerThread...", as /proc/PID/task/TID/comm cuts them), counted
   * over the threads alive now: -1 if unreadable.
   */
  public static double compilerCpuSeconds(long pid) {
    Path tasks = Path.of("/proc", String.valueOf(pid), "task");
    double total = 0;
    try (var s = Files.list(tasks)) {
      for (Path t : (Iterable<Path>) s::iterator) {
        String comm;
        try {
          comm = Files.readString(t.resolve("comm"));
        } catch (IOException e) {
          continue; // the thread ended meanwhile
        }
        if (comm.startsWith("C1 CompilerThre") || comm.startsWith("C2 CompilerThre")) {
          double c = cpuSeconds(t.resolve("stat"));
          total += Math.max(c, 0);
        }
      }
    } catch (IOException e) {
      return -1;
    }
    return total;
  }

  /**
   * A memory field of {@code /proc/<pid>/status} (Linux; "VmRSS", "VmHWM", ...) in bytes: 0 if
   * the file lacks it (an exited process), -1 if the file cannot be read.
   */
  public static long statusBytes(long pid, String field) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "status"))) {
        if (line.startsWith(field + ":")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
    } catch (IOException | NumberFormatException e) {
      return -1;
    }
    return 0;
  }

  @Override
  public void close() {
    closing = true;
    for (Process p : distinct()) {
      p.destroy();
    }
    try {
      closeProcesses();
    } finally {
      if (etcd != null) {
        etcd.close();
      }
    }
  }

  /** The processes, each once (one process holds every shard with {@link #inOneProcess}). */
  private java.util.Collection<Process> distinct() {
    return new java.util.LinkedHashSet<>(processes);
  }

  private void closeProcesses() {
    for (Process p : distinct()) {
      try {
        if (!p.waitFor(5, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }
}
