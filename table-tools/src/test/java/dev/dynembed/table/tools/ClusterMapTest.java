package dev.dynembed.table.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.job.LocalEtcd;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.cluster.ClusterAddress;
import dev.dynembed.table.cluster.ClusterException;
import dev.dynembed.table.cluster.ClusterStatus;
import dev.dynembed.table.cluster.ShardRegistration;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shard map in etcd (issue 30, part 1; docs/design/0019-cluster-map.md), against a real etcd
 * and real shard processes: shards register under a lease, clients of {@code etcd://} find them
 * and follow a shard that comes back on another port, with every row exact (the oracle of the
 * chaos test), and misconfigured shards and clients are refused by name.
 */
class ClusterMapTest {
  private static final Pattern REGISTERED = Pattern.compile("registered in cluster \\S+ as (\\S+)");

  @TempDir Path dir;
  private final List<Process> processes = new ArrayList<>();

  @AfterEach
  void stop() {
    for (Process p : processes) {
      p.destroyForcibly();
    }
  }

  /** A table-server process, its output in {@code dir/NAME.log}. */
  private Process start(String name, List<String> args) throws IOException {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m",
        "--add-modules", "jdk.incubator.vector", "-cp", System.getProperty("java.class.path"),
        "dev.dynembed.table.server.TableServerMain", "--port", "0", "--no-snapshot-on-exit",
        "--exit-with", String.valueOf(ProcessHandle.current().pid())));
    cmd.addAll(args);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(name + ".log").toFile()))
        .start();
    processes.add(p);
    return p;
  }

  /** Waits for the {@code n}-th registration line of {@code name}'s log; its endpoint. */
  private String registered(String name, Process p, int n) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      Path log = dir.resolve(name + ".log");
      String out = Files.exists(log) ? Files.readString(log, StandardCharsets.UTF_8) : "";
      Matcher m = REGISTERED.matcher(out);
      int seen = 0;
      String ep = null;
      while (m.find()) {
        seen++;
        ep = m.group(1);
      }
      if (seen >= n) {
        return ep;
      }
      if (!p.isAlive() || System.nanoTime() > deadline) {
        throw new AssertionError(name + " did not register:\n" + out);
      }
      Thread.sleep(50);
    }
  }

  private List<String> shardArgs(String cluster, int index, int n, String state) {
    return List.of("--shard-index", String.valueOf(index), "--num-shards", String.valueOf(n),
        "--data-dir", dir.toString(), "--state-dir", dir.resolve(state).toString(),
        "--cluster", cluster, "--cluster-lease-s", "2");
  }

  @Test
  void clientsOfEtcd_followShardsRestartedOnOtherPorts_everyRowExact() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/train";
      Process[] shard = new Process[2];
      String[] endpoint = new String[2];
      int[] starts = new int[2];
      for (int i = 0; i < 2; i++) {
        shard[i] = start("shard-" + i, shardArgs(cluster, i, 2, "state"));
      }
      for (int i = 0; i < 2; i++) {
        endpoint[i] = registered("shard-" + i, shard[i], ++starts[i]);
      }
      ExactOracle oracle = new ExactOracle(300, 4);
      try (TableClient c = TableClients.open(cluster, ClientOptions.builder()
          .retryFor(Duration.ofSeconds(60)).deadline(Duration.ofSeconds(10)).build())) {
        assertEquals(2, c.numShards());
        EmbeddingTable t = c.createTable(ExactOracle.config("moving", 4).build());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(14);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<Integer> mover = pool.submit(() -> {
          int moves = 0;
          for (int round = 0; round < 3; round++) {
            Thread.sleep(2000);
            int i = round % 2 == 0 ? 1 : 0;
            // SIGKILL, then the same shard (same state directory) on a new free port: only the
            // map can tell the clients where it went
            shard[i].destroyForcibly().waitFor();
            shard[i] = start("shard-" + i, shardArgs(cluster, i, 2, "state"));
            String now = registered("shard-" + i, shard[i], ++starts[i]);
            assertNotEquals(endpoint[i], now, "the restarted shard bound the same port");
            endpoint[i] = now;
            moves++;
          }
          return moves;
        });
        oracle.run(t, 2, end); // a trainer that saw an error fails the test here
        assertEquals(3, mover.get());
        pool.shutdown();
        assertTrue(oracle.steps > 50, "only " + oracle.steps + " steps");
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
      }
      ClusterStatus status = ClusterStatus.read(ClusterAddress.parse(cluster));
      assertEquals(2, status.numShards());
      String table = status.format();
      assertTrue(table.contains(endpoint[0]) && table.contains(endpoint[1]), table);
      System.out.printf("cluster map: %d steps of 2 trainers while the shards moved 3 times,"
          + " every row exact%n%s", oracle.steps, table);
    }
  }

  @Test
  void misconfiguredShardsAndClients_areRefusedByName() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/strict";
      Process first = start("first", shardArgs(cluster, 0, 2, "a"));
      registered("first", first, 1);

      // a second process for a held index (its own state directory: another member) waits for
      // the holder's lease, which a live process keeps renewing, then gives up naming it
      Process twin = start("twin", shardArgs(cluster, 0, 2, "b"));
      assertTrue(twin.waitFor(30, TimeUnit.SECONDS), "the second shard 0 kept running");
      assertEquals(2, twin.exitValue());
      String twinLog = Files.readString(dir.resolve("twin.log"));
      assertTrue(twinLog.contains("shard index 0 of cluster strict is held by")
          && twinLog.contains("two processes cannot serve one shard index"), twinLog);

      // another shard count
      Process wrong = start("wrong", shardArgs(cluster, 1, 3, "c"));
      assertTrue(wrong.waitFor(30, TimeUnit.SECONDS));
      assertEquals(2, wrong.exitValue());
      String wrongLog = Files.readString(dir.resolve("wrong.log"));
      assertTrue(wrongLog.contains("cluster strict has 2 shards")
          && wrongLog.contains("--num-shards 3"), wrongLog);

      // a wildcard address without --advertise, a bad URI
      Process wild = start("wild", List.of("--host", "0.0.0.0", "--insecure", "--cluster",
          cluster, "--data-dir", dir.toString(), "--wal", "off"));
      assertTrue(wild.waitFor(30, TimeUnit.SECONDS));
      assertEquals(2, wild.exitValue());
      assertTrue(Files.readString(dir.resolve("wild.log")).contains("give --advertise HOST"));
      IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
          () -> ClusterAddress.parse("etcd://" + etcd.endpoint()));
      assertTrue(bad.getMessage().contains("names no cluster"), bad.getMessage());

      // a client of a cluster nobody registered in, and of an etcd that is not there
      ClientOptions quick = ClientOptions.builder().retryFor(Duration.ofSeconds(1)).build();
      ClusterException empty = assertThrows(ClusterException.class, () -> TableClients.open(
          "etcd://" + etcd.endpoint() + "/nobody", quick));
      assertTrue(empty.getMessage().contains("no shard of cluster nobody is registered"),
          empty.getMessage());
      int closedPort;
      try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
        closedPort = s.getLocalPort();
      }
      ClusterException gone = assertThrows(ClusterException.class, () -> ShardRegistration
          .register(ClusterAddress.parse("etcd://127.0.0.1:" + closedPort + "/x"),
              dev.dynembed.table.cluster.ClusterMember.of(0, 1, "127.0.0.1:1", -1, "m"),
              Duration.ofSeconds(2), m -> { }));
      assertTrue(gone.getMessage().contains("etcd at 127.0.0.1:" + closedPort),
          gone.getMessage());

      // a replicated process of another shard count than the cluster's live shards
      Process replica = start("replica", List.of("--shard-index", "0", "--num-shards", "3",
          "--data-dir", dir.toString(), "--state-dir", dir.resolve("r").toString(), "--cluster",
          cluster, "--replication", "sync"));
      assertTrue(replica.waitFor(30, TimeUnit.SECONDS));
      assertEquals(2, replica.exitValue());
      String replicaLog = Files.readString(dir.resolve("replica.log"));
      assertTrue(replicaLog.contains("cluster strict has 2 shards")
          && replicaLog.contains("--num-shards 3"), replicaLog);

      // the first shard is still the only one in the map
      ClusterStatus status = ClusterStatus.read(ClusterAddress.parse(cluster));
      assertEquals(1, status.shards().size());
      assertEquals(first.pid(), status.shards().get(0).member().pid());
    }
  }
}
