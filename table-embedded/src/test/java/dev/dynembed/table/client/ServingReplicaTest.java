package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.tools.ExactOracle;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Serving replicas (docs/design/0024-vectors-in.md): two training shard processes take an exact
 * oracle's trainers while a serving replica of each ({@code table-server --serve-from}) answers a
 * reader. Checked: every answer the reader gets is fresh within the lag bound (a ticker's rows,
 * one per shard, count the ticks acknowledged: an answer must hold every tick acknowledged more
 * than the bound before the read began), writes and inserting reads on a replica are refused by
 * name, a training shard killed with SIGKILL (and restarted) and a replica killed (and restarted)
 * are ridden through, and at the end the replicas hold every row exactly as the training shards.
 */
@Tag("processes")
class ServingReplicaTest {
  @TempDir Path dir;

  private static final int KEYS = 200;
  private static final int DIM = 4;
  private static final long BOUND_MS = 3000;

  /** A key of each shard (of 2) for the ticker. */
  private static String[] tickKeys() {
    String[] t = new String[2];
    for (int i = 0; t[0] == null || t[1] == null; i++) {
      String k = "tick" + i;
      int s = KeyHashing.shardOf(k, 2);
      if (t[s] == null) {
        t[s] = k;
      }
    }
    return t;
  }

  @Test
  void replicasFollowTraining_withinTheLagBound_refuseWrites_andRideThroughRestarts()
      throws Exception {
    try (LocalShardProcesses training = new LocalShardProcesses(2, 0, dir.resolve("t"), "256m",
            "");
        LocalShardProcesses serving = LocalShardProcesses.servingReplicas(training.endpoints(),
            dir.resolve("s"), "256m", BOUND_MS)) {
      follow(String.join(",", training.endpoints()), training, serving,
          trainer -> training.kill(0)); // SIGKILL; restarted, it recovers from its log
    }
  }

  /**
   * The same with replicated training shards in etcd (a primary and a sync follower each): the
   * replicas follow each shard's primary through the cluster map ({@code --serve-from
   * etcd://...}), and through a failover (the primary of shard 0 killed with SIGKILL).
   */
  @Test
  @Tag("etcd")
  void replicasOfReplicatedShards_followAFailover() throws Exception {
    try (LocalShardProcesses training = LocalShardProcesses.replicated(2, 1, "sync",
            dir.resolve("t"), "256m", "", List.of(), List.of());
        LocalShardProcesses serving = LocalShardProcesses.servingReplicas(training.spec(), 2,
            dir.resolve("s"), "256m", BOUND_MS)) {
      follow(training.spec(), training, serving, trainer -> training.killPrimary(0, false));
    }
  }

  /**
   * Issue 54 item 4: replicas started from a checkpoint ({@code --start-from}) answer its rows
   * while their training shards do not answer (stopped with SIGSTOP), then, once the shards
   * answer again, load their tables and follow them.
   */
  @Test
  void replicasStartedFromACheckpoint_serveItWhileTrainingIsStopped_thenFollow()
      throws Exception {
    ClientOptions patient = ClientOptions.builder().retryFor(Duration.ofSeconds(60))
        .deadline(Duration.ofSeconds(10)).build();
    try (LocalShardProcesses training = new LocalShardProcesses(2, 0, dir.resolve("t"), "256m",
            "");
        TableClient trainer = TableClients.connect(training.endpoints(), patient)) {
      EmbeddingTable t = trainer.createTable(ExactOracle.config("ck", DIM).build());
      ExactOracle oracle = new ExactOracle(KEYS, DIM);
      oracle.run(t, 2, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
      String[] keys = oracle.keys();
      Path saved = dir.resolve("t").resolve("ckpt");
      t.save(saved, oracle.steps);
      float[] atSave = t.find(keys).rows();
      assertArrayEquals(oracle.rows, atSave, 0f);
      oracle.run(t, 2, System.nanoTime() + TimeUnit.SECONDS.toNanos(2)); // training goes on
      float[] later = t.find(keys).rows();
      assertTrue(!java.util.Arrays.equals(atSave, later), "training changed no row");
      Path copy = dir.resolve("s").resolve("ckpt"); // copied to the replicas' data directory
      java.nio.file.Files.createDirectories(copy);
      try (var files = java.nio.file.Files.list(saved)) {
        for (Path f : files.toList()) {
          java.nio.file.Files.copy(f, copy.resolve(f.getFileName()));
        }
      }
      for (long pid : training.pids()) {
        FaultProbe.signal("STOP", pid);
      }
      try (LocalShardProcesses serving = LocalShardProcesses.servingReplicas(
              training.endpoints(), dir.resolve("s"), "256m", BOUND_MS,
              List.of("--start-from", copy.toString()));
          TableClient reader = TableClients.connect(serving.endpoints(), patient)) {
        try {
          fromCheckpoint(reader, t, oracle, atSave, later, training);
        } catch (Exception | AssertionError e) {
          throw new AssertionError("the replicas' logs:\n"
              + java.nio.file.Files.readString(serving.logOfProcess(0))
              + java.nio.file.Files.readString(serving.logOfProcess(1)), e);
        }
        for (int i = 0; i < 2; i++) {
          String log = java.nio.file.Files.readString(serving.logOfProcess(i));
          assertTrue(log.contains("started from checkpoint") && log.contains("loaded its"
              + " snapshot"), log);
        }
        System.out.printf("serving replicas started from a checkpoint: its rows served while the"
            + " training shards were stopped, then followed them (%d trainer steps)%n",
            oracle.steps);
      }
    }
  }

  /** The checkpoint start's checks: its rows while training is stopped, then following. */
  private static void fromCheckpoint(TableClient reader, EmbeddingTable t, ExactOracle oracle,
      float[] atSave, float[] later, LocalShardProcesses training) throws Exception {
    String[] keys = oracle.keys();
    EmbeddingTable r = reader.openTable("ck");
    // the checkpoint's rows, although the training shards have not answered
    assertArrayEquals(atSave, r.find(keys).rows(), 0f);
    TableException refused = assertThrows(TableException.class,
        () -> r.applyGradients(new String[] {"key1"}, new float[DIM], 0f, 1));
    assertTrue(refused.getMessage().contains("serving replica"), refused.getMessage());
    for (long pid : training.pids()) {
      FaultProbe.signal("CONT", pid);
    }
    // then they load the training shards' tables and follow them
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!java.util.Arrays.equals(later, r.find(keys).rows())
        && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    assertArrayEquals(later, r.find(keys).rows(), 0f);
    oracle.run(t, 2, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
    assertArrayEquals(oracle.rows, t.find(keys).rows(), 0f);
    while (!java.util.Arrays.equals(oracle.rows, r.find(keys).rows())
        && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    assertArrayEquals(oracle.rows, r.find(keys).rows(), 0f);
  }

  /**
   * The same while slots move between the training shards (a quarter of the slots to shard 1,
   * then spread evenly again): the replicas follow each shard's moves in its log (rows staged,
   * the new map, rows dropped), and their clients follow the maps as a training client does
   * (MOVED from a replica with a newer map, UNAVAILABLE and a resend from one that lags).
   */
  @Test
  void replicasFollowTraining_throughSlotMoves() throws Exception {
    try (LocalShardProcesses training = new LocalShardProcesses(2, 0, dir.resolve("t"), "256m",
            "");
        LocalShardProcesses serving = LocalShardProcesses.servingReplicas(training.endpoints(),
            dir.resolve("s"), "256m", BOUND_MS)) {
      follow(String.join(",", training.endpoints()), training, serving, trainer -> {
        SlotMap now = SlotMap.implicit(2);
        Resharding.Result moved = Resharding.reshard(trainer,
            now.withOwner(0, now.slots() / 4, 1, 1), p -> {});
        Thread.sleep(1000);
        Resharding.Result back = Resharding.rebalance(trainer, 2, p -> {});
        System.out.printf("slot moves while replicas serve: %d rows moved to shard 1, %d moved"
            + " back (map epoch %d)%n", moved.rowsMoved(), back.rowsMoved(), back.map().epoch());
        assertTrue(moved.rowsMoved() > 0 && back.rowsMoved() > 0, "no row moved");
      });
    }
  }

  interface Fault {
    void inject(TableClient trainer) throws Exception;
  }

  private void follow(String trainingSpec, LocalShardProcesses training,
      LocalShardProcesses serving, Fault trainingFault) throws Exception {
    ClientOptions patient = ClientOptions.builder().retryFor(Duration.ofSeconds(60))
        .deadline(Duration.ofSeconds(10)).build();
    try (TableClient trainer = TableClients.open(trainingSpec, patient);
        TableClient reader = TableClients.connect(serving.endpoints(), patient)) {
      EmbeddingTable t = trainer.createTable(ExactOracle.config("srv", DIM).build());
      String[] ticks = tickKeys();
      t.findOrInsert(ticks, true);
      // the replicas have the table once they applied its creation (within the bound)
      long ready = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (true) {
        try {
          reader.openTable("srv").find(ticks);
          break;
        } catch (TableException e) {
          if (System.nanoTime() > ready) {
            throw e;
          }
          Thread.sleep(100);
        }
      }
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(16);
      ExecutorService pool = Executors.newFixedThreadPool(3);
      // the ticker: tick n acknowledged at acked[n] (nanoTime); its rows then hold n
      List<Long> acked = java.util.Collections.synchronizedList(new ArrayList<>());
      Future<?> ticker = pool.submit(() -> {
        while (System.nanoTime() < end) {
          t.applyGradients(ticks, new float[] {-1, 0, 0, 0, -1, 0, 0, 0}, 0f, 0);
          acked.add(System.nanoTime());
          Thread.sleep(20);
        }
        return null;
      });
      // the reader: (read began, tick values seen) for every answer
      ConcurrentLinkedQueue<long[]> answers = new ConcurrentLinkedQueue<>();
      AtomicLong refusedOnce = new AtomicLong();
      Future<?> readerLoop = pool.submit(() -> {
        EmbeddingTable r = null;
        while (System.nanoTime() < end) {
          long began = System.nanoTime();
          try {
            if (r == null) {
              r = reader.openTable("srv");
            }
            float[] rows = r.find(ticks).rows();
            answers.add(new long[] {began, (long) rows[0], (long) rows[DIM]});
          } catch (TableException e) {
            if (!e.getMessage().contains("serving replica")) {
              throw e;
            }
            refusedOnce.incrementAndGet(); // lagging or loading past the client's retries
          }
          Thread.sleep(50);
        }
        return null;
      });
      Future<?> killer = pool.submit(() -> {
        Thread.sleep(5000);
        trainingFault.inject(trainer);
        Thread.sleep(5000);
        serving.kill(1); // a replica: restarted, it rejoins
        return null;
      });
      ExactOracle oracle = new ExactOracle(KEYS, DIM);
      oracle.run(t, 2, end);
      ticker.get();
      readerLoop.get();
      killer.get();
      pool.shutdown();
      assertTrue(serving.restarts() >= 1,
          training.restarts() + " training and " + serving.restarts() + " replica restarts");

      // every answer holds every tick acknowledged more than the bound before it was asked
      long[] ackedAt = acked.stream().mapToLong(Long::longValue).toArray();
      long bound = TimeUnit.MILLISECONDS.toNanos(BOUND_MS);
      int checked = 0;
      long worst = 0;
      for (long[] a : answers) {
        long due = 0; // ticks acknowledged before began - bound
        while (due < ackedAt.length && ackedAt[(int) due] < a[0] - bound) {
          due++;
        }
        assertTrue(a[1] >= due && a[2] >= due, "an answer asked at +" + (a[0] - ackedAt[0])
            / 1_000_000 + " ms held ticks " + a[1] + "/" + a[2] + " but " + due + " were"
            + " acknowledged more than " + BOUND_MS + " ms before");
        checked++;
        long seen = Math.min(a[1], a[2]); // the first tick it lacks, acknowledged when?
        if (seen < ackedAt.length && ackedAt[(int) seen] < a[0]) {
          worst = Math.max(worst, a[0] - ackedAt[(int) seen]);
        }
      }
      assertTrue(checked > 50, "only " + checked + " answers");

      // writes on a replica are refused by name
      EmbeddingTable r = reader.openTable("srv");
      for (Runnable write : List.<Runnable>of(
          () -> r.applyGradients(new String[] {"key1"}, new float[DIM], 0f, 1),
          () -> r.findOrInsert("key1"),
          () -> r.assign(new String[] {"key1"}, new float[DIM], null, 1),
          () -> reader.createTable(ExactOracle.config("other", DIM).build()))) {
        TableException e = assertThrows(TableException.class, write::run);
        assertTrue(e.getMessage().contains("serving replica"), e.getMessage());
      }

      // caught up: every row and count as the training shards hold them (and the oracle says)
      String[] keys = oracle.keys();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      float[] want = t.find(keys).rows();
      assertArrayEquals(oracle.rows, want, 0f);
      while (!java.util.Arrays.equals(want, r.find(keys).rows())
          && System.nanoTime() < deadline) {
        Thread.sleep(100);
      }
      assertArrayEquals(want, r.find(keys).rows(), 0f);
      assertEquals(t.describe().getCounters().getTotalFrequency(),
          r.describe().getCounters().getTotalFrequency(), "the counts too");
      // top-k on the replicas: the training shards' answer (an exact scan of the same rows)
      float[] q = {1, -1, 0.5f, 0};
      TopKResult a = t.topK(q, 1, 5, TopKOptions.COSINE);
      TopKResult b = r.topK(q, 1, 5, TopKOptions.COSINE);
      assertArrayEquals(a.keys()[0], b.keys()[0]);
      assertEquals(5, b.keys()[0].length);
      System.out.printf("serving replicas: %d answers within the %d ms bound (the stalest lacked"
          + " a tick acknowledged %d ms before it was asked; %d refused past the client's"
          + " retries), %d trainer steps, %d ticks, training and replica restarts %d and %d;"
          + " every row exact after%n", checked, BOUND_MS, worst / 1_000_000, refusedOnce.get(),
          oracle.steps, ackedAt.length, training.restarts(), serving.restarts());
      assertEquals(2, ticks.length);
    }
  }
}
