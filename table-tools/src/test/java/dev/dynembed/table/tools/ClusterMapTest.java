package dev.dynembed.table.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.job.LocalEtcd;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.Resharding;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shard map in etcd (issue 30, part 1; docs/design/0019-cluster-map.md), against a real etcd
 * and real shard processes: shards register under a lease, clients of {@code etcd://} find them
 * and follow a shard that comes back on another port, with every row exact (the oracle of the
 * chaos test), and misconfigured shards and clients are refused by name.
 */
@Tag("etcd")
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
        // a trainer that saw an error fails the test here; past the end (no more faults) the
        // trainers go on, at most 60 s, until they made the steps asked below
        oracle.run(t, 2, end, 51, end + TimeUnit.SECONDS.toNanos(60));
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

  /**
   * Live resharding of a cluster in etcd (issue 31): a shard added at index 2 registers beside
   * shards 0 and 1 of 2, {@code Resharding} (what {@code table-cli reshard} runs) gives it a
   * third of the slots while two trainers write through one {@code etcd://} client, which opens
   * the new shard when the shards' map gives it slots; shard 0 restarts with its original
   * {@code --num-shards 2} (refused before slots moved, accepted once the map in etcd says they
   * did); the slots go back to 2 shards and shard 2 stops. Every row and count exact, no trainer
   * error, the slot map published in etcd, and a client opened afterwards reaches the two
   * shards that own slots without the stopped one.
   */
  @Test
  void clientsOfEtcd_followAClusterThatGrowsAndShrinksLive_everyRowExact() throws Exception {
    try (LocalEtcd etcd = new LocalEtcd()) {
      String cluster = "etcd://" + etcd.endpoint() + "/elastic";
      ClusterAddress address = ClusterAddress.parse(cluster);
      Process[] shard = new Process[3];
      int[] starts = new int[3];
      for (int i = 0; i < 2; i++) {
        shard[i] = start("shard-" + i, shardArgs(cluster, i, 2, "state"));
      }
      for (int i = 0; i < 2; i++) {
        registered("shard-" + i, shard[i], ++starts[i]);
      }
      ClientOptions options = ClientOptions.builder().retryFor(Duration.ofSeconds(60))
          .deadline(Duration.ofSeconds(10)).build();
      ExactOracle oracle = new ExactOracle(300, 4);
      List<String> progress = java.util.Collections.synchronizedList(new ArrayList<>());
      try (TableClient c = TableClients.open(cluster, options)) {
        assertEquals(2, c.numShards());
        EmbeddingTable t = c.createTable(ExactOracle.config("grow", 4).build());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        long[] moverDone = new long[1];
        Future<long[]> mover = pool.submit(() -> {
          Thread.sleep(1500);
          shard[2] = start("shard-2", shardArgs(cluster, 2, 3, "state"));
          registered("shard-2", shard[2], ++starts[2]);
          long[] epochs = new long[2];
          try (TableClient admin = TableClients.open(cluster, options)) {
            Resharding.Result up = Resharding.rebalance(admin, 3, progress::add);
            assertTrue(up.rowsMoved() > 0, "nothing moved to shard 2: " + progress);
            epochs[0] = up.map().epoch();
            assertEquals(3, up.map().shardsInUse());
            awaitPublished(address, epochs[0]);

            // shard 0 again, with the count it was first started with: the map in etcd says
            // slots moved, so its count no longer has to match shard 2's
            shard[0].destroyForcibly().waitFor();
            shard[0] = start("shard-0", shardArgs(cluster, 0, 2, "state"));
            registered("shard-0", shard[0], ++starts[0]);
            Thread.sleep(2000); // the trainers resend to it and write again before the next move

            Resharding.Result down = Resharding.rebalance(admin, 2, progress::add);
            epochs[1] = down.map().epoch();
            assertEquals(2, down.map().shardsInUse());
            assertEquals(0, down.map().slotsOf(2));
            awaitPublished(address, epochs[1]);
          }
          moverDone[0] = System.nanoTime();
          return epochs;
        });
        // a trainer that saw an error fails the test here; past the end (no more faults) the
        // trainers go on, at most 60 s, until they made the steps asked below
        oracle.run(t, 2, end, 51, end + TimeUnit.SECONDS.toNanos(60));
        long[] epochs = mover.get();
        pool.shutdown();
        assertTrue(moverDone[0] < end, "the moves ended after the trainers stopped");
        assertTrue(oracle.steps > 50, "only " + oracle.steps + " steps");
        assertEquals(3, ((dev.dynembed.table.client.spi.ShardedTableClient) c).shards().size(),
            "the trainers' client did not open the added shard");
        assertEquals(epochs[1], ((dev.dynembed.table.client.spi.ShardedTableClient) c).router()
            .map().epoch());
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
      }
      // shard 2 owns nothing now: stopped, a new client does not need it
      shard[2].destroy();
      assertTrue(shard[2].waitFor(30, TimeUnit.SECONDS));
      try (TableClient fresh = TableClients.open(cluster, options)) {
        assertEquals(2, fresh.numShards());
        EmbeddingTable t = fresh.openTable("grow");
        String[] keys = oracle.keys();
        assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
        assertArrayEquals(oracle.counts, t.count(keys, false).frequencies());
      }
      ClusterStatus status = ClusterStatus.read(address);
      String table = status.format();
      assertTrue(table.contains("slot map epoch "), table);
      assertEquals(3, status.numShards(), table);
      System.out.printf("elastic cluster: %d steps of 2 trainers while the cluster went 2 -> 3 ->"
          + " 2 shards, every row exact%n%s%n%s", oracle.steps, String.join("\n", progress),
          table);
    }
  }

  /** Waits until the cluster's slot map in etcd is at {@code epoch} (shards publish it). */
  /** Waits until etcd holds slot map {@code epoch} for the cluster (ReplicationTest too). */
  static void awaitPublished(ClusterAddress address, long epoch) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (true) {
      dev.dynembed.table.common.SlotMap m = ClusterStatus.read(address).slotMap();
      if (m != null && m.epoch() >= epoch) {
        assertEquals(epoch, m.epoch());
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("etcd holds slot map " + m + ", not epoch " + epoch);
      }
      Thread.sleep(100);
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
