package dev.dynembed.table.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.job.LocalEtcd;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.cluster.ClusterAddress;
import dev.dynembed.table.cluster.ClusterStatus;
import dev.dynembed.table.common.Dirs;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Replicated shards (issue 30; docs/design/0019-cluster-map.md) against a real etcd and real
 * shard processes, with the exact oracle of the chaos test (SGD rate 1, gradients in quarters:
 * every row must end at minus the sum of the acknowledged gradients, bit for bit, and every
 * count at the counted reads): primaries are SIGKILLed and their state directories deleted while
 * two trainers write; a primary paused with SIGSTOP until its follower took over acknowledges
 * nothing when it resumes. {@code -Dreplication.seconds=N} runs the chaos longer (default 25).
 */
@Tag("processes")
class ReplicationTest {
  @TempDir Path dir;

  private final Map<String, Process> running = new ConcurrentHashMap<>();
  private final Map<String, Path> stateOf = new ConcurrentHashMap<>();
  private final Map<String, List<String>> argsOf = new ConcurrentHashMap<>();
  private volatile boolean closing;
  private int generation;

  @AfterEach
  void stop(org.junit.jupiter.api.TestInfo test) throws IOException {
    stop();
    // the processes' output outlives the temporary directory (target/replication-logs/TEST)
    Path to = Path.of("target", "replication-logs", test.getTestMethod().orElseThrow().getName());
    Files.createDirectories(to);
    try (Stream<Path> files = Files.list(dir)) {
      for (Path f : files.filter(f -> f.toString().endsWith(".log")).toList()) {
        Files.copy(f, to.resolve(f.getFileName()),
            java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      }
    }
  }

  private void stop() {
    closing = true;
    for (Process p : running.values()) {
      p.destroyForcibly();
    }
  }

  /**
   * Starts process {@code name} (a shard index and a slot) on state directory {@code state}, and
   * restarts it whenever it exits (as Kubernetes would) on the state directory it then has.
   */
  private void start(String name, Path state, List<String> args) throws IOException {
    stateOf.put(name, state);
    argsOf.put(name, args);
    launch(name);
  }

  private synchronized void launch(String name) throws IOException {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-Xlog:gc", // pauses, in the logs
        "-XX:+UseSerialGC", "--add-modules", "jdk.incubator.vector", "-cp",
        System.getProperty("java.class.path"), "dev.dynembed.table.server.TableServerMain",
        "--port", "0", "--no-snapshot-on-exit", "--data-dir", dir.toString(),
        "--state-dir", stateOf.get(name).toString(),
        "--exit-with", String.valueOf(ProcessHandle.current().pid())));
    cmd.addAll(argsOf.get(name));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(name + ".log").toFile()))
        .start();
    running.put(name, p);
    p.onExit().thenRun(() -> {
      if (!closing && running.get(name) == p) {
        try {
          launch(name);
        } catch (IOException e) {
          System.err.println("restarting " + name + " failed: " + e);
        }
      }
    });
  }

  private static List<String> args(String cluster, int shard, int shards, String... more) {
    List<String> a = new ArrayList<>(List.of("--shard-index", String.valueOf(shard),
        "--num-shards", String.valueOf(shards), "--cluster", cluster, "--cluster-lease-s", "2",
        "--replication-timeout-ms", "2000"));
    a.addAll(List.of(more));
    return a;
  }

  /** Waits until every shard has a live primary and at least one follower in sync. */
  private ClusterStatus awaitRedundant(String cluster, int shards, long seconds)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (true) {
      ClusterStatus s = ClusterStatus.read(ClusterAddress.parse(cluster));
      boolean ok = s.shards().size() == shards;
      for (int i = 0; i < shards && ok; i++) {
        var g = s.groups().get(i);
        ok = g != null && !g.inSync().isEmpty();
      }
      // and every primary's entry is a live process's (a killed one's lingers for its lease)
      for (ClusterStatus.Entry e : s.shards()) {
        ok &= running.values().stream().anyMatch(p -> p.pid() == e.member().pid() && p.isAlive());
      }
      if (ok) {
        return s;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("no redundant group within " + seconds + " s:\n" + s.format()
            + logs());
      }
      Thread.sleep(100);
    }
  }

  private String logs() throws IOException {
    StringBuilder b = new StringBuilder();
    try (Stream<Path> s = Files.list(dir)) {
      for (Path p : s.filter(f -> f.toString().endsWith(".log")).sorted().toList()) {
        String text = Files.readString(p, StandardCharsets.UTF_8);
        b.append("\n--- ").append(p.getFileName()).append('\n')
            .append(text.length() > 6000 ? text.substring(text.length() - 6000) : text);
      }
    }
    return b.toString();
  }

  /** The process name whose pid registered as shard {@code index}'s primary. */
  private String primaryOf(ClusterStatus s, int index) {
    long pid = s.shards().stream().filter(e -> e.member().index() == index).findFirst()
        .orElseThrow().member().pid();
    return running.entrySet().stream().filter(e -> e.getValue().pid() == pid).map(
        Map.Entry::getKey).findFirst().orElseThrow(() -> new AssertionError("no process " + pid));
  }

  /** The Prometheus text of process {@code name} (its --metrics-port from its log). */
  private String metrics(String name) throws Exception {
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("metrics on (http://\\S+/metrics)")
        .matcher(Files.readString(dir.resolve(name + ".log")));
    String url = null;
    while (m.find()) {
      url = m.group(1);
    }
    assertTrue(url != null, "no metrics port in the log of " + name);
    return java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
        java.net.URI.create(url)).build(), java.net.http.HttpResponse.BodyHandlers.ofString())
        .body();
  }

  /**
   * SIGKILLs process {@code name} and deletes its state directory; it is restarted on a new,
   * empty one (a lost disk: a new member of the group).
   */
  private void killWithDisk(String name) throws IOException, InterruptedException {
    Path old = stateOf.get(name);
    synchronized (this) { // its restart waits for the new directory
      stateOf.put(name, dir.resolve(name + "-" + (++generation)));
      running.get(name).destroyForcibly().waitFor();
    }
    Dirs.deleteTree(old);
  }

  /** Two sync groups (processes 0a, 0b, 1a, 1b), each with its follower in sync. */
  private void startSyncGroups(String cluster) throws Exception {
    for (int s = 0; s < 2; s++) {
      for (String slot : List.of("a", "b")) {
        String name = s + slot;
        start(name, dir.resolve(name + "-0"), args(cluster, s, 2, "--replication", "sync"));
      }
    }
    awaitRedundant(cluster, 2, 90);
  }

  @Test
  void primariesKilledWithTheirDisks_loseNothingAcknowledged_withSyncReplication()
      throws Exception {
    killPrimariesWhileTrainersWrite("replicated", Long.getLong("replication.seconds", 25),
        ClientOptions.RowCaching.OFF);
  }

  /**
   * The same with the trainers' row cache on (issue 55: "caches work over replicated shards";
   * docs/design/0022-row-cache.md): a flush is an ordinary write with a call id, so it rides
   * through a failover like any other, and once the client flushed every row and count is exact
   * on the new primaries and, after they too are killed with their disks, on their followers.
   */
  @Test
  void primariesKilledWithTheirDisks_withARowCache_loseNothingAcknowledged() throws Exception {
    killPrimariesWhileTrainersWrite("cached", Long.getLong("replication.seconds", 20),
        new ClientOptions.RowCaching(8L << 20, 4));
  }

  private void killPrimariesWhileTrainersWrite(String table, long seconds,
      ClientOptions.RowCaching caching) throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/chaos";
      startSyncGroups(cluster);
      ExactOracle oracle = new ExactOracle(300, 4);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(10)).rowCache(caching)
          .build());
          TableClient plain = TableClients.open(cluster, ClientOptions.builder()
              .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(10)).build())) {
        EmbeddingTable t = c.createTable(ExactOracle.config(table, 4).build());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<Integer> killer = pool.submit(() -> {
          Random r = new Random(7);
          int kills = 0;
          Thread.sleep(2000);
          while (System.nanoTime() < end - TimeUnit.SECONDS.toNanos(4)) {
            // a group loses its primary only while a follower holds what it acknowledged: the
            // loss of both copies is a double fault no replica count of 2 survives
            ClusterStatus st = awaitRedundant(cluster, 2, 90);
            int shard = r.nextInt(2);
            killWithDisk(primaryOf(st, shard));
            kills++;
            Thread.sleep(1500 + r.nextInt(2000));
          }
          return kills;
        });
        // a trainer that saw an error fails the test here; past the kills' end the trainers
        // go on (at most 60 s) until they made the steps asked below
        oracle.run(t, 2, end, 51, end + TimeUnit.SECONDS.toNanos(60));
        int kills = killer.get();
        pool.shutdown();
        assertTrue(kills >= 3, "only " + kills + " primaries killed");
        assertTrue(oracle.steps > 50, "only " + oracle.steps + " steps");
        String[] keys = oracle.keys();
        t.flush(); // a cache's gradients and counts reach the shards (nothing without one)
        EmbeddingTable p = plain.openTable(table); // the shards' rows, never a cached copy
        assertArrayEquals(oracle.rows, p.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, p.count(keys, false).frequencies());
        ClusterStatus st = awaitRedundant(cluster, 2, 90);
        System.out.printf("replication chaos%s: %d primaries killed with their state directories"
            + " in %d s, %d steps of 2 trainers, every row and count exact%n%s",
            caching.on() ? " with a row cache (" + TableClients.traffic(t) + ")" : "", kills,
            seconds, oracle.steps, st.format());
        // the followers hold it too: kill both primaries' processes and disks once more
        for (int s = 0; s < 2; s++) {
          killWithDisk(primaryOf(st, s));
        }
        assertArrayEquals(oracle.rows, p.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, p.count(keys, false).frequencies());
      }
    }
  }

  /**
   * Issue 50, item 4: a follower killed (its disk kept) while the trainers write comes back
   * from its own log: the primary sends exactly the records it lacks, read from the primary's
   * log, and no snapshot; it is in sync again, and once the primary is killed with its disk the
   * rejoined follower leads with every row and count exact.
   */
  @Test
  void aFollowerKilledAndRestarted_rejoinsFromItsLog_withTheRecordsItLacksOnly()
      throws Exception {
    String[] logs = followerKilledAndRestarted("rejoin", List.of());
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("follower \\S+ rejoins from"
        + " its own log after record (\\d+): records (\\d+)\\.\\.(\\d+) from this log")
        .matcher(logs[0]);
    assertTrue(m.find(), "the follower did not rejoin from its log:\n" + logs());
    long resumedAfter = Long.parseLong(m.group(1));
    long to = Long.parseLong(m.group(3));
    assertTrue(logs[1].contains("rejoined from its own log after record " + resumedAfter),
        logs[1]);
    assertEquals(1, count(logs[0], "gets the log from record"), "one snapshot sent in all:"
        + " the first join's\n" + logs[0]);
    assertTrue(to > resumedAfter, "the follower missed no record while it was down");
    System.out.printf("rejoin from the log: the follower, down for records %d..%d (%d), read"
        + " those from the primary's log, no snapshot%n", resumedAfter + 1, to, to - resumedAfter);
  }

  /**
   * The same, with the primary snapshotting every MiB of log: the records the follower lacks
   * went with a snapshot while it was down, so it loads one, and is as exact.
   */
  @Test
  void aFollowerWhoseMissingRecordsWentWithASnapshot_loadsOne() throws Exception {
    String[] logs = followerKilledAndRestarted("resnapshot", List.of("--snapshot-every-mb", "1"));
    assertEquals(0, count(logs[0], "rejoins from its own log"), logs[0]);
    assertEquals(2, count(logs[0], "gets the log from record"), "a snapshot for the first join"
        + " and one for the rejoin\n" + logs[0]);
  }

  /**
   * A sync group of two processes; its follower is SIGKILLed (its disk kept, restarted on it)
   * while 2 trainers write; once it is in sync again, the primary is killed with its disk and
   * the former follower must serve every row and count exact. Returns the primary's and the
   * follower's logs from before the primary's kill.
   */
  private String[] followerKilledAndRestarted(String name, List<String> more) throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/" + name;
      for (String slot : List.of("a", "b")) {
        // answers go on while the follower is down (it leaves the in-sync set for that time)
        List<String> a = new ArrayList<>(args(cluster, 0, 1, "--replication", "sync",
            "--min-sync-replicas", "0"));
        a.addAll(more);
        start("0" + slot, dir.resolve("0" + slot), a);
      }
      ClusterStatus before = awaitRedundant(cluster, 1, 90);
      String primary = primaryOf(before, 0);
      String follower = primary.equals("0a") ? "0b" : "0a";
      ExactOracle oracle = new ExactOracle(200, 4);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(10)).build())) {
        EmbeddingTable t = c.createTable(ExactOracle.config(name, 4).build());
        // rows nobody trains, so that the table outweighs the few seconds of log the follower
        // misses (the primary sends whichever is smaller: the records, or a snapshot)
        for (int b = 0; b < 30; b++) {
          String[] filler = new String[10_000];
          for (int i = 0; i < filler.length; i++) {
            filler[i] = "filler-" + b + "-" + i;
          }
          t.findOrInsert(filler, false);
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(14);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<?> killer = pool.submit(() -> {
          Thread.sleep(3000); // training is under way
          running.get(follower).destroyForcibly().waitFor(); // restarted on the same disk
          return null;
        });
        oracle.run(t, 2, end);
        killer.get();
        pool.shutdown();
        awaitRedundant(cluster, 1, 90);
        // and still in sync a replication timeout (2 s) after the last write: it holds every
        // record (one it owed would have dropped it), so the kill below leaves a leader
        Thread.sleep(2500);
        ClusterStatus after = awaitRedundant(cluster, 1, 90);
        assertEquals(primary, primaryOf(after, 0), "the primary changed: " + after.format());
        String[] logs = {Files.readString(dir.resolve(primary + ".log")),
            Files.readString(dir.resolve(follower + ".log"))};
        // the rejoined follower holds every row: it leads once the primary and its disk are gone
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        killWithDisk(primary);
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
        ClusterStatus last = ClusterStatus.read(ClusterAddress.parse(cluster));
        assertEquals(follower, primaryOf(last, 0), last.format());
        System.out.printf("%s: %d steps of 2 trainers, the follower killed and restarted, every"
            + " row and count exact after it took over%n", name, oracle.steps);
        return logs;
      }
    }
  }

  /**
   * Issue 50, item 3: a follower whose state directory is on a full disk (a 6 MiB tmpfs; root)
   * cannot install the primary's snapshot: each try fails on ENOSPC, drops what half arrived and
   * connects again; it never counts as in sync, the primary keeps answering (no follower
   * required per answer), and nothing it half wrote is ever loaded. Once the disk grows, the same
   * process installs a snapshot, gets in sync, and leads with every row and count exact when the
   * primary is killed with its disk.
   */
  @Test
  @Tag("faults")
  void aFollowerInstallOnAFullDisk_failsWithoutJoining_andJoinsOnceSpaceIsFreed()
      throws Exception {
    Path small = dir.resolve("small");
    Files.createDirectories(small);
    sh("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", small.toString());
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/fulldisk";
      List<String> a = args(cluster, 0, 1, "--replication", "sync", "--min-sync-replicas", "0");
      start("0a", dir.resolve("0a"), a); // leads: the only process
      awaitPrimary(cluster);
      ExactOracle oracle = new ExactOracle(200, 4);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(10)).build())) {
        EmbeddingTable t = c.createTable(ExactOracle.config("fulldisk", 4).build());
        for (int b = 0; b < 30; b++) { // a snapshot of ~15 MiB: more than the small disk
          String[] filler = new String[10_000];
          for (int i = 0; i < filler.length; i++) {
            filler[i] = "filler-" + b + "-" + i;
          }
          t.findOrInsert(filler, false);
        }
        start("0b", small.resolve("state"), a); // the follower, on the full disk
        ExecutorService pool = Executors.newSingleThreadExecutor();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(16);
        Future<?> grow = pool.submit(() -> {
          // the follower starts, joins and tries to install (a loaded 2-core machine once took
          // more than 8 s, its lease lapsing on the way): wait for the full disk to bite
          long bite = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
          String log = Files.readString(dir.resolve("0b.log"));
          while (!log.contains("No space left on device") && System.nanoTime() < bite) {
            Thread.sleep(500);
            log = Files.readString(dir.resolve("0b.log"));
          }
          assertTrue(log.contains("No space left on device"), "the install did not meet the full"
              + " disk:\n" + log);
          assertFalse(log.contains("loaded its snapshot"), log);
          ClusterStatus st = ClusterStatus.read(ClusterAddress.parse(cluster));
          assertTrue(st.groups().get(0).inSync().isEmpty(), "a follower that holds nothing is"
              + " in sync: " + st.format());
          sh("mount", "-o", "remount,size=256m", small.toString()); // space freed
          return null;
        });
        oracle.run(t, 2, end); // the primary answers throughout
        grow.get();
        pool.shutdown();
        ClusterStatus after = awaitRedundant(cluster, 1, 90);
        assertEquals("0a", primaryOf(after, 0));
        assertTrue(Files.readString(dir.resolve("0b.log")).contains("loaded its snapshot"));
        killWithDisk("0a");
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
        assertEquals("0b", primaryOf(ClusterStatus.read(ClusterAddress.parse(cluster)), 0));
        int tries = count(Files.readString(dir.resolve("0b.log")), "No space left on device");
        System.out.printf("follower install on a full disk: %d failed tries, then joined once"
            + " space was freed; %d steps, every row and count exact after it took over%n",
            tries, oracle.steps);
      }
    } finally {
      stop(); // the processes first: the disk is theirs
      sh("umount", "-l", small.toString());
    }
  }

  /** Waits until shard 0 has a primary. */
  private void awaitPrimary(String cluster) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (ClusterStatus.read(ClusterAddress.parse(cluster)).shards().isEmpty()) {
      assertTrue(System.nanoTime() < deadline, "no primary within 60 s:" + logs());
      Thread.sleep(100);
    }
  }

  private static void sh(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new AssertionError(String.join(" ", cmd) + " failed (needs root): " + out);
    }
  }

  private static int count(String text, String what) {
    int n = 0;
    for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1)) {
      n++;
    }
    return n;
  }

  @Test
  void aPausedPrimary_answersNothingAfterItsFollowerTookOver() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/paused";
      for (String slot : List.of("a", "b")) {
        // no follower required per answer: only the lease fences the paused primary
        start("0" + slot, dir.resolve("0" + slot), args(cluster, 0, 1, "--replication", "sync",
            "--min-sync-replicas", "0"));
      }
      ClusterStatus before = awaitRedundant(cluster, 1, 90);
      String paused = primaryOf(before, 0);
      long pausedPid = running.get(paused).pid();
      ExactOracle oracle = new ExactOracle(200, 4);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(5)).build())) {
        EmbeddingTable t = c.createTable(ExactOracle.config("paused", 4).build());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(16);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<String> pauser = pool.submit(() -> {
          Thread.sleep(2000);
          new ProcessBuilder("kill", "-STOP", String.valueOf(pausedPid)).start().waitFor();
          // until the follower leads: the lease (2 s) expires and it wins the election
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
          String leader;
          do {
            Thread.sleep(100);
            ClusterStatus s = ClusterStatus.read(ClusterAddress.parse(cluster));
            leader = s.shards().isEmpty() ? paused : primaryOf(s, 0);
          } while (leader.equals(paused) && System.nanoTime() < deadline);
          Thread.sleep(2000); // the trainers write to the new primary meanwhile
          new ProcessBuilder("kill", "-CONT", String.valueOf(pausedPid)).start().waitFor();
          return leader;
        });
        oracle.run(t, 2, end);
        String leader = pauser.get();
        pool.shutdown();
        assertNotEquals(paused, leader, "the follower did not take over");
        // the resumed primary learns it was replaced and exits: it acknowledged nothing since
        ProcessHandle old = ProcessHandle.of(pausedPid).orElse(null);
        if (old != null) {
          old.onExit().get(30, TimeUnit.SECONDS);
        }
        String log = Files.readString(dir.resolve(paused + ".log"));
        assertTrue(log.contains("deposed"), log);
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
        // restarted, the old primary follows the new one
        ClusterStatus after = awaitRedundant(cluster, 1, 90);
        assertEquals(leader, primaryOf(after, 0));
        assertTrue(after.groups().get(0).epoch() >= 2, after.format());
        System.out.printf("split brain: %d steps; the paused primary exited on resuming, every"
            + " row exact%n%s", oracle.steps, after.format());
      }
    }
  }

  @Test
  void aSyncWrite_isAnsweredOnlyOnceAFollowerHoldsIt() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/strict";
      for (String slot : List.of("a", "b")) {
        start("0" + slot, dir.resolve("0" + slot), args(cluster, 0, 1, "--replication", "sync",
            "--metrics-port", "0"));
      }
      ClusterStatus before = awaitRedundant(cluster, 1, 90);
      String primary = primaryOf(before, 0);
      String follower = primary.equals("0a") ? "0b" : "0a";
      // the replication gauges: the primary leads epoch 1 with one follower in sync
      String metrics = metrics(primary);
      assertTrue(metrics.contains("dynembed_replication_primary{shard=\"0\"} 1.0")
          && metrics.contains("dynembed_replication_epoch{shard=\"0\"} 1.0")
          && metrics.contains("dynembed_replication_followers_in_sync{shard=\"0\"} 1.0")
          && metrics.contains("dynembed_replication_lag{shard=\"0\"}"), metrics);
      assertTrue(metrics(follower).contains("dynembed_replication_primary{shard=\"0\"} 0.0"));
      long followerPid = running.get(follower).pid();
      String[] key = {"k"};
      try (TableClient impatient = TableClients.open(cluster, ClientOptions.builder()
              .retryFor(Duration.ofSeconds(3)).deadline(Duration.ofSeconds(2)).build());
          TableClient patient = TableClients.open(cluster, ClientOptions.builder()
              .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(10)).build())) {
        EmbeddingTable t = patient.createTable(ExactOracle.config("strict", 1).build());
        t.applyGradients(key, new float[] {1f}, 0f, 0); // answered: the follower holds it
        new ProcessBuilder("kill", "-STOP", String.valueOf(followerPid)).start().waitFor();
        try {
          EmbeddingTable slow = impatient.openTable("strict");
          long t0 = System.nanoTime();
          dev.dynembed.table.common.TableException e = org.junit.jupiter.api.Assertions
              .assertThrows(dev.dynembed.table.common.TableException.class,
                  () -> slow.applyGradients(key, new float[] {2f}, 0f, 1));
          assertTrue(e.code() == dev.dynembed.table.common.ErrorCode.UNAVAILABLE
              || e.code() == dev.dynembed.table.common.ErrorCode.DEADLINE_EXCEEDED, e.toString());
          assertTrue((System.nanoTime() - t0) / 1e9 >= 2.5, "answered too early: " + e);
          // cut off after --replication-timeout-ms: etcd no longer lists it in sync
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
          while (!ClusterStatus.read(ClusterAddress.parse(cluster)).groups().get(0).inSync()
              .isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "the paused follower stayed in sync");
            Thread.sleep(100);
          }
        } finally {
          new ProcessBuilder("kill", "-CONT", String.valueOf(followerPid)).start().waitFor();
        }
        // back, the follower loads a snapshot again (which holds the unanswered write: the
        // primary applied and logged it) and the next write is answered
        t.applyGradients(key, new float[] {4f}, 0f, 2);
        awaitRedundant(cluster, 1, 90);
        // the primary and its disk go: the follower answers with all three
        killWithDisk(primary);
        assertArrayEquals(new float[] {-7f}, t.find(key).rows(), 0f);
        assertEquals(follower, primaryOf(ClusterStatus.read(ClusterAddress.parse(cluster)), 0));
      }
    }
  }

  /**
   * A group over mutual TLS: the follower streams the log with its shard certificate (CN
   * "shard", an admin client of its primary); a trainer certificate may not follow.
   */
  @Test
  void aGroupReplicatesOverMutualTls() throws Exception {
    DevCertificates ca = new DevCertificates(dir.resolve("certs"));
    DevCertificates.Identity shard = ca.issue("shard", true);
    DevCertificates.Identity admin = ca.issue("admin", false);
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/tls";
      for (String slot : List.of("a", "b")) {
        start("0" + slot, dir.resolve("0" + slot), args(cluster, 0, 1, "--replication", "sync",
            "--tls-cert", shard.chain().toString(), "--tls-key", shard.key().toString(),
            "--tls-client-ca", ca.caPem.toString(), "--admin-clients", "shard,admin"));
      }
      ClusterStatus st = awaitRedundant(cluster, 1, 90);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .tls(new ClientOptions.Tls(ca.caPem, admin.chain(), admin.key()))
          .retryFor(Duration.ofSeconds(60)).build())) {
        EmbeddingTable t = c.createTable(ExactOracle.config("tls", 2).build());
        t.applyGradients(new String[] {"k"}, new float[] {1f, 2f}, 0f, 0);
        killWithDisk(primaryOf(st, 0));
        assertArrayEquals(new float[] {-1f, -2f}, t.find(new String[] {"k"}).rows(), 0f);
      }
      String log = Files.readString(dir.resolve("0a.log")) + Files.readString(dir.resolve("0b.log"));
      assertTrue(log.contains("follows") && log.contains("loaded its snapshot"), log);
    }
  }

  /**
   * A group that lost both of its processes with their disks does not elect a fresh process
   * (it lacks every answered write) until an operator forgets the group's record.
   */
  @Test
  void aGroupThatLostEveryCopy_electsNobody_untilItsRecordIsForgotten() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/lost";
      for (String slot : List.of("a", "b")) {
        start("0" + slot, dir.resolve("0" + slot), args(cluster, 0, 1, "--replication", "sync"));
      }
      awaitRedundant(cluster, 1, 90);
      synchronized (this) { // both processes and both disks go before either restarts
        for (String slot : List.of("a", "b")) {
          killWithDisk("0" + slot);
        }
      }
      ClusterAddress address = ClusterAddress.parse(cluster);
      // the dead primary's lease (2 s) runs out; each restarted process (empty disk) finds the
      // group without a primary and refuses to lead, saying why (logged once)
      long deadline = System.nanoTime() + 60_000_000_000L;
      String refusal = "it is not in sync with the last primary";
      while (!(Files.readString(dir.resolve("0a.log")).contains(refusal)
          && Files.readString(dir.resolve("0b.log")).contains(refusal))
          && System.nanoTime() < deadline) {
        Thread.sleep(100);
      }
      String logs = Files.readString(dir.resolve("0a.log")) + Files.readString(dir.resolve("0b.log"));
      assertTrue(Files.readString(dir.resolve("0a.log")).contains(refusal)
          && Files.readString(dir.resolve("0b.log")).contains(refusal), logs);
      // and goes on refusing: several elections (each process tries every 250 ms), nobody leads
      long watched = System.nanoTime() + 2_000_000_000L;
      while (System.nanoTime() < watched) {
        assertTrue(ClusterStatus.read(address).shards().isEmpty(), "a fresh process leads");
        Thread.sleep(100);
      }
      assertTrue(ClusterStatus.forgetGroup(address, 0));
      ClusterStatus after = awaitRedundant(cluster, 1, 60);
      assertEquals(1, after.groups().get(0).epoch(), after.format()); // a new group
    }
  }

  /**
   * Live resharding of replicated shards (issue 31): two sync groups; while two trainers write,
   * every slot moves to group 0 and back, again and again, and the primary of the group that
   * received the slots is killed with its disk after each move. Every row and count exact.
   */
  @Test
  void slotsMoveBetweenSyncGroups_whileTrainersWrite_everyRowExact() throws Exception {
    long seconds = Long.getLong("replication.seconds", 25);
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/moves";
      startSyncGroups(cluster);
      ExactOracle oracle = new ExactOracle(300, 4);
      ClientOptions opts = ClientOptions.builder().retryFor(Duration.ofSeconds(120))
          .deadline(Duration.ofSeconds(10)).build();
      try (TableClient c = TableClients.open(cluster, opts);
          TableClient admin = TableClients.open(cluster, opts)) {
        EmbeddingTable t = c.createTable(ExactOracle.config("moved", 4).build());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        List<String> log = java.util.Collections.synchronizedList(new ArrayList<>());
        java.util.concurrent.atomic.AtomicInteger interrupted =
            new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<dev.dynembed.table.common.SlotMap> lastMap =
            new java.util.concurrent.atomic.AtomicReference<>();
        Future<Integer> mover = pool.submit(() -> {
          int moves = 0;
          Thread.sleep(2000);
          dev.dynembed.table.common.SlotMap two = dev.dynembed.table.common.SlotMap.implicit(2);
          boolean finished = true;
          // past the end, an interrupted resharding is still run again (until it finishes, the
          // slots of its step take no calls: the trainers wait for them), and the moves go on
          // until the slots went there and back
          while ((System.nanoTime() < end - TimeUnit.SECONDS.toNanos(6) || !finished
              || moves < 2) && System.nanoTime() < end + TimeUnit.SECONDS.toNanos(90)) {
            finished = false;
            boolean toZero = moves % 2 == 0;
            dev.dynembed.table.common.SlotMap target = toZero
                ? two.withOwner(0, two.slots(), 0, 1) : two;
            try {
              lastMap.set(dev.dynembed.table.client.Resharding.reshard(admin, target, m -> log.add(
                  String.format("%.1f s: %s", (System.nanoTime() - end) / 1e9 + seconds, m)))
                  .map());
            } catch (dev.dynembed.table.common.TableException e) {
              // a primary killed under the step: run it again, as an operator would
              log.add(String.format("%.1f s: interrupted: %s", (System.nanoTime() - end) / 1e9
                  + seconds, e.getMessage()));
              interrupted.incrementAndGet();
              continue;
            }
            finished = true;
            moves++;
          }
          return moves;
        });
        // primaries die at random moments: in a copy, a flip, a commit or between moves
        Future<Integer> killer = Executors.newSingleThreadExecutor().submit(() -> {
          Random r = new Random(11);
          int kills = 0;
          Thread.sleep(2500);
          while (System.nanoTime() < end - TimeUnit.SECONDS.toNanos(8)) {
            ClusterStatus st = awaitRedundant(cluster, 2, 90);
            String victim = primaryOf(st, r.nextInt(2));
            killWithDisk(victim);
            log.add(String.format("%.1f s: killed %s", (System.nanoTime() - end) / 1e9 + seconds,
                victim));
            kills++;
            Thread.sleep(1000 + r.nextInt(3000));
          }
          return kills;
        });
        int moves;
        int kills;
        try {
          oracle.run(t, 2, end);
          moves = mover.get();
          kills = killer.get();
        } finally {
          pool.shutdown();
          System.out.println(String.join("\n", log));
        }
        assertTrue(moves >= 2, "only " + moves + " moves");
        assertTrue(kills >= 3, "only " + kills + " primaries killed");
        String[] keys = oracle.keys();
        float[] rows = t.find(keys).rows();
        long[] counts = t.count(keys, false).frequencies();
        StringBuilder wrong = new StringBuilder();
        for (int k = 0; k < keys.length; k++) {
          for (int d = 0; d < 4; d++) {
            if (rows[k * 4 + d] != oracle.rows[k * 4 + d]) {
              wrong.append(String.format("%s[%d] %s expected %s; ", keys[k], d, rows[k * 4 + d],
                  oracle.rows[k * 4 + d]));
            }
          }
          if (counts[k] != oracle.counts[k]) {
            wrong.append(String.format("%s count %d expected %d; ", keys[k], counts[k],
                oracle.counts[k]));
          }
        }
        System.out.printf("replicated moves: %d moves (%d interrupted and run again) and %d"
            + " primaries killed with their disks in %d s, %d steps%n", moves, interrupted.get()
            + log.stream().filter(l -> l.contains("running again")).count(),
            kills, seconds, oracle.steps);
        assertEquals("", wrong.length() == 0 ? "" : (wrong.length() > 2000
            ? wrong.substring(0, 2000) : wrong.toString()) + String.join("\n", log) + logs());
        // the followers hold the moved rows too: both primaries lose their processes and disks
        ClusterStatus st = awaitRedundant(cluster, 2, 90);
        for (int s = 0; s < 2; s++) {
          killWithDisk(primaryOf(st, s));
        }
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());

        // the groups published the map they route by; a third group started with
        // --num-shards 3 joins the cluster of two, and the slots spread over the three
        ClusterMapTest.awaitPublished(ClusterAddress.parse(cluster), lastMap.get().epoch());
        for (String slot : List.of("a", "b")) {
          start("2" + slot, dir.resolve("2" + slot + "-0"), args(cluster, 2, 3, "--replication",
              "sync"));
        }
        awaitRedundant(cluster, 3, 90);
        dev.dynembed.table.client.Resharding.Result grown =
            dev.dynembed.table.client.Resharding.rebalance(admin, 3, log::add);
        assertEquals(3, grown.map().shardsInUse());
        ClusterMapTest.awaitPublished(ClusterAddress.parse(cluster), grown.map().epoch());
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f); // the trainers' client follows
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
      }
    }
  }
}
