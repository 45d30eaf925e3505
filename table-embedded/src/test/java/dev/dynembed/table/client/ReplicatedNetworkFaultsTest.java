package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.tools.ExactOracle;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.tools.NetworkNamespaces;
import dev.dynembed.table.tools.NetworkNamespaces.Fault;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Network faults against replicated shards (issue 50): 2 shard groups of a primary and a
 * follower (sync replication), each of the 4 processes in a network namespace of its own on one
 * bridge ({@link NetworkNamespaces#bridged}) with the etcd on this side of it, trained by 2
 * trainers of the exact oracle while a schedule partitions
 * <ul>
 *   <li>a primary from its follower (writes wait for the follower, which is dropped from the
 *       in-sync record or catches up once the cut heals),
 *   <li>a primary from etcd (its lease lapses: it answers nothing, its follower takes over, and
 *       it comes back as a follower once it reaches etcd again),
 *   <li>the trainers from a primary (etcd and the follower still reach it: no failover),
 *   <li>the group in two: the primary with the trainers, the follower with etcd (the follower
 *       leads; the old primary, cut from it and from etcd, must acknowledge nothing it alone
 *       holds),
 *   <li>a primary from everyone, paused (SIGSTOP) for the cut's length and resumed after it.
 * </ul>
 * Judged by the exact oracle (no trainer sees an error, and at the end every row and count is
 * exact: every acknowledged update applied exactly once, nothing answered by a deposed primary
 * lost) and by the processes' logs: no primary answered a write after its successor began to
 * lead (two primaries of one group never serve writes at once). Each fault runs at least once
 * per run; {@code -Dfaults.seconds=N} runs a longer random schedule. Needs root.
 */
@Tag("faults")
class ReplicatedNetworkFaultsTest {
  @TempDir Path dir;

  private static final int KEYS = 300;
  private static final int DIM = 4;
  private static final int SHARDS = 2;

  private enum Kind { PRIMARY_FROM_FOLLOWER, PRIMARY_FROM_ETCD, TRAINERS_FROM_PRIMARY,
    SPLIT_GROUP, PRIMARY_CUT_AND_PAUSED }

  @Test
  void partitionsOfReplicatedGroups_loseNothingAcknowledged_andNeverServeTwoPrimaries()
      throws Exception {
    long seconds = Long.getLong("faults.seconds", 75);
    try (NetworkNamespaces net = NetworkNamespaces.bridged(SHARDS * 2);
        LocalShardProcesses procs = LocalShardProcesses.replicated(SHARDS, 1, "sync",
            NetworkNamespaces.HOST, dir, "256m", "", net.launcher("{process}"),
            List.of("--host", "10.79.{process}.2", "--insecure", "--cluster-lease-s", "2",
                "--replication-timeout-ms", "2000"));
        TableClient c = TableClients.open(procs.spec(), ClientOptions.builder()
            .retryFor(Duration.ofSeconds(120)).deadline(Duration.ofSeconds(3)).build())) {
      EmbeddingTable t = c.createTable(ExactOracle.config("rfaults", DIM).build());
      // rows nobody trains, so that a snapshot outweighs the seconds of log a process misses
      // while a fault lasts: a deposed primary then rejoins from its own log (cut first)
      for (int b = 0; b < 10; b++) {
        String[] filler = new String[10_000];
        for (int i = 0; i < filler.length; i++) {
          filler[i] = "filler-" + b + "-" + i;
        }
        t.findOrInsert(filler, false);
      }
      // the trainers' cut from a primary must make the probe's calls fail
      FaultProbe probe = new FaultProbe(procs.spec(), "rfaults", SHARDS);
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      Map<Kind, Integer> injected = new EnumMap<>(Kind.class);
      List<String> failovers = new ArrayList<>();
      ExecutorService pool = Executors.newSingleThreadExecutor();
      Future<?> faults = pool.submit(() -> {
        Random r = new Random(Long.getLong("faults.seed", 50));
        Kind[] kinds = Kind.values();
        int k = 0;
        Thread.sleep(2000);
        // every kind once, however long the heals take on a loaded machine (4 of 5 fit in a
        // CI run once), then random ones while time is left
        while (k < kinds.length || System.nanoTime() < end - TimeUnit.SECONDS.toNanos(20)) {
          Kind kind = k < kinds.length ? kinds[k] : kinds[r.nextInt(kinds.length)];
          int shard = k % SHARDS;
          k++;
          int primary = procs.primaryOf(shard);
          int follower = procs.followerOf(shard);
          long pid = procs.pidOf(primary);
          int dropsBefore = drops(procs, primary);
          injected.merge(kind, 1, Integer::sum);
          try {
            switch (kind) {
              case PRIMARY_FROM_FOLLOWER -> net.cut(primary, follower);
              case PRIMARY_FROM_ETCD -> net.cutFromHost(primary, procs.etcdPort(), true);
              case TRAINERS_FROM_PRIMARY -> net.cutFromHost(primary, procs.etcdPort(), false);
              case SPLIT_GROUP -> {
                net.cut(primary, follower);
                net.cutFromHost(primary, procs.etcdPort(), true);
              }
              case PRIMARY_CUT_AND_PAUSED -> {
                net.inject(primary, Fault.BLACKHOLE);
                FaultProbe.signal("STOP", pid);
              }
              default -> throw new AssertionError(kind);
            }
            Thread.sleep(2500);
            if (kind == Kind.TRAINERS_FROM_PRIMARY) { // the fault bites: the primary is cut off
              probe.assertCut(shard, kind.name());
            }
            Thread.sleep(2500 + r.nextInt(2000)); // past the 2 s lease: failovers happen
            if (kind == Kind.PRIMARY_FROM_FOLLOWER) { // it bites: writes wait, the follower lags
              assertTrue(drops(procs, primary) > dropsBefore, kind + ": primary " + primary
                  + " never dropped its follower " + follower);
            }
          } finally { // a failed check heals too: the trainers go on, the test reports it
            if (kind == Kind.PRIMARY_CUT_AND_PAUSED) {
              FaultProbe.signal("CONT", pid);
            }
            net.healAll();
          }
          // the group heals: a primary and a follower in sync again (a deposed primary exits
          // and is restarted as a follower), then training goes on for a while
          procs.awaitGroups(Duration.ofSeconds(90));
          int now = procs.primaryOf(shard);
          boolean failover = kind == Kind.PRIMARY_FROM_ETCD || kind == Kind.SPLIT_GROUP
              || kind == Kind.PRIMARY_CUT_AND_PAUSED;
          assertTrue(failover == (now != primary), kind + " on shard " + shard + ": primary "
              + primary + " -> " + now + (failover ? ": its follower never took over"
              : ": a failover that the fault should not cause"));
          failovers.add(kind + ": shard " + shard + " primary " + primary + " -> " + now);
          Thread.sleep(2000 + r.nextInt(1000));
        }
        return null;
      });
      ExactOracle oracle = new ExactOracle(KEYS, DIM);
      try {
        // a trainer that saw an error fails the test here; past the end (no more faults) the
        // trainers go on, at most 60 s, until they made the steps asked below
        oracle.run(t, 2, end, 51, end + TimeUnit.SECONDS.toNanos(60));
        while (!faults.isDone()) { // the trainers write through the last faults too
          oracle.run(t, 2, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
        }
        faults.get();
      } catch (Exception | AssertionError e) {
        keepLogs(); // the temporary directory goes with the test
        throw e;
      } finally {
        pool.shutdownNow();
        net.healAll();
        probe.close();
      }
      for (Kind kind : Kind.values()) {
        assertTrue(injected.getOrDefault(kind, 0) > 0, "no " + kind + " fault: " + injected);
      }
      assertTrue(oracle.steps > 50, "only " + oracle.steps + " steps");
      procs.awaitGroups(Duration.ofSeconds(90));
      String[] keys = oracle.keys();
      try (TableClient plain = TableClients.open(procs.spec(),
          ClientOptions.builder().build())) { // the primaries' rows
        EmbeddingTable p = plain.openTable("rfaults");
        assertArrayEquals(oracle.rows, p.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, p.count(keys, false).frequencies());
      }
      int epochs = checkOnePrimaryAtATime(procs);
      int[] rejoins = rejoinsAcrossFailovers(procs);
      keepLogs();
      assertTrue(rejoins[0] + rejoins[1] > 0, "no member of a replaced epoch rejoined from its"
          + " own log (cut or resumed): every failover cost a snapshot");
      System.out.printf("replicated network faults: %d s, %d steps, faults %s, %d epochs"
          + " checked, %d diverged tails cut, %d rejoins from the log across a failover, %d"
          + " snapshots sent, %s: every row and count exact (%d rows of %d floats, %d counts)%n",
          seconds, oracle.steps, injected, epochs, rejoins[0], rejoins[1], rejoins[2], failovers,
          KEYS, DIM, KEYS);
    }
  }

  private static final Pattern LEADS = Pattern.compile(
      "table-server shard (\\d+) leads its replicated group \\(epoch (\\d+),.* from (\\d+)");
  private static final Pattern ANSWERED = Pattern.compile(
      "table-server shard (\\d+) epoch (\\d+): answered (\\d+) writes as primary, the last at"
          + " (\\d+)");

  /**
   * From every process's output: for each shard, each epoch that a later one replaced answered
   * its last write before the later one began to lead, and said so (a superseded primary prints
   * what it answered when its lease lapses or it is deposed).
   *
   * @return how many superseded epochs were checked
   */
  private static int checkOnePrimaryAtATime(LocalShardProcesses procs) throws Exception {
    Map<Integer, TreeMap<Long, Long>> leadFrom = new TreeMap<>();
    Map<Integer, Map<Long, Long>> lastAnswer = new TreeMap<>();
    StringBuilder all = new StringBuilder();
    for (int k = 0; k < SHARDS * 2; k++) {
      String out = Files.readString(procs.logOfProcess(k), StandardCharsets.UTF_8);
      all.append(out);
      Matcher m = LEADS.matcher(out);
      while (m.find()) {
        leadFrom.computeIfAbsent(Integer.parseInt(m.group(1)), s -> new TreeMap<>())
            .put(Long.parseLong(m.group(2)), Long.parseLong(m.group(3)));
      }
      m = ANSWERED.matcher(out);
      while (m.find()) {
        lastAnswer.computeIfAbsent(Integer.parseInt(m.group(1)), s -> new TreeMap<>())
            .merge(Long.parseLong(m.group(2)), Long.parseLong(m.group(4)), Math::max);
      }
    }
    int checked = 0;
    for (var e : leadFrom.entrySet()) {
      TreeMap<Long, Long> epochs = e.getValue();
      for (long epoch : epochs.keySet()) {
        Long next = epochs.higherKey(epoch);
        if (next == null) {
          continue; // the serving primary
        }
        Long last = lastAnswer.getOrDefault(e.getKey(), Map.of()).get(epoch);
        assertTrue(last != null, "shard " + e.getKey() + " epoch " + epoch + " was replaced by"
            + " epoch " + next + " but never said what it answered:\n" + tail(all));
        assertTrue(last <= epochs.get(next), "shard " + e.getKey() + " epoch " + epoch
            + " answered a write at " + last + ", after epoch " + next + " began to lead at "
            + epochs.get(next) + ": two primaries served writes at once");
        checked++;
      }
    }
    assertTrue(checked > 0, "no failover happened: " + leadFrom);
    return checked;
  }

  /** How often process k, as primary, dropped a follower (its stream ended or fell behind). */
  private static int drops(LocalShardProcesses procs, int k) throws java.io.IOException {
    String out = Files.readString(procs.logOfProcess(k), StandardCharsets.UTF_8);
    return (int) out.lines().filter(l -> l.contains(": follower ") && l.contains(" dropped: "))
        .count();
  }



  /** Copies the processes' output to target/replicated-faults-logs (a failed run's, or the last). */
  private void keepLogs() throws java.io.IOException {
    Path to = Path.of("target", "replicated-faults-logs");
    Files.createDirectories(to);
    try (var files = Files.list(dir)) {
      for (Path f : files.filter(f -> f.toString().endsWith(".log")).toList()) {
        Files.copy(f, to.resolve(f.getFileName()),
            java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      }
    }
  }

  private static final Pattern CROSS_EPOCH = Pattern.compile(
      "rejoins from its own log after record \\d+: .*its log followed epoch (\\d+), this is"
          + " epoch (\\d+)\\)");

  /**
   * From every process's output: {diverged tails cut, rejoins from the log by a member of the
   * epoch before (a deposed primary, or a follower of it), snapshots sent to followers}.
   */
  private static int[] rejoinsAcrossFailovers(LocalShardProcesses procs) throws Exception {
    int[] n = new int[3];
    for (int k = 0; k < SHARDS * 2; k++) {
      String out = Files.readString(procs.logOfProcess(k), StandardCharsets.UTF_8);
      n[0] += out.split("cut its log after record", -1).length - 1;
      Matcher m = CROSS_EPOCH.matcher(out);
      while (m.find()) {
        n[1] += m.group(1).equals(m.group(2)) ? 0 : 1;
      }
      n[2] += out.split("gets the log from record", -1).length - 1;
    }
    return n;
  }

  private static String tail(StringBuilder s) {
    return s.length() > 8000 ? s.substring(s.length() - 8000) : s.toString();
  }

}
