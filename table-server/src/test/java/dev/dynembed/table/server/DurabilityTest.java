package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.WriteRequest;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The write-ahead log, snapshots and recovery of one shard, in process: a "crash" abandons an
 * engine without closing anything (its log was written, not necessarily fsynced), a new engine
 * recovers from the same directory and must hold bit-identical tables.
 */
class DurabilityTest {
  @TempDir Path dir;

  private static final long CLIENT = 0x5EEDL;

  private ShardEngine engine;
  private ShardState state;
  private TableGrpcService service;
  private long seq;

  private void start(ShardLog.Fsync policy, long snapshotBytes) throws IOException {
    engine = new ShardEngine(0, 1, dir);
    state = ShardState.recover(engine, dir.resolve("state"), policy, snapshotBytes, e -> {
      throw new AssertionError("log failed", e);
    });
    service = new TableGrpcService(engine);
  }

  /** Abandons the running engine as a kill -9 would (nothing closed or flushed), recovers. */
  private Map<String, Map<String, TableStore.Record>> crashAndRecover() throws IOException {
    Map<String, Map<String, TableStore.Record>> before = contents(engine);
    try {
      state.crash();
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
    start(ShardLog.Fsync.NO, 1L << 40);
    return before;
  }

  private static Map<String, Map<String, TableStore.Record>> contents(ShardEngine e) {
    Map<String, Map<String, TableStore.Record>> m = new HashMap<>();
    for (TableStore t : e.tables()) {
      m.put(t.name(), Fixtures.snapshot(t));
    }
    return m;
  }

  private CallId nextId() {
    seq++;
    return CallId.newBuilder().setClient(CLIENT).setSeq(seq).setLowWater(1).build();
  }

  private int[] write(String table, String[] keys, float[] grads, long step, CallId id) {
    return engine.write(WriteRequest.newBuilder().setCallId(id).addItems(
        ApplyGradientsRequest.newBuilder().setTable(table).setKeys(PackedKeys.of(keys).toProto())
            .setGradients(Rows.encode(grads)).setStep(step)).build(), ShardState::checkWrite);
  }

  private void count(String table, String[] keys, CallId id) {
    engine.read(ReadRequest.newBuilder().setCallId(id).addItems(ReadItem.newBuilder()
        .setFindOrInsert(FindOrInsertRequest.newBuilder().setTable(table)
            .setKeys(PackedKeys.of(keys).toProto()).setOmitRows(true))).build(),
        service::runItem);
  }

  private static TableConfig adagrad(String name, int dim, int minCount) {
    return TableConfigs.normalize(TableConfigs.builder(name, dim)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f)).setMinCount(minCount)
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 7)).build());
  }

  /** Random steps over two tables: counting reads and gradient writes. */
  private void train(Random r, int steps, int dim) {
    for (int s = 0; s < steps; s++) {
      String[] keys = new String[16];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = i % 4 == 0 ? "rare" + r.nextInt(1_000_000) : "w" + r.nextInt(60);
      }
      count("emb", keys, nextId());
      count("adm", keys, nextId());
      float[] g = new float[keys.length * dim];
      for (int i = 0; i < g.length; i++) {
        g[i] = (float) r.nextGaussian();
      }
      write("emb", keys, g, s, nextId());
      write("adm", keys, g, s, nextId());
    }
  }

  @Test
  void crash_recoversEveryAcknowledgedChange_bitForBit() throws Exception {
    start(ShardLog.Fsync.EVERYSEC, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3)); // admission: pending counts are state too
    train(new Random(1), 40, 8);
    Map<Long, Long> pending = new HashMap<>(engine.get("adm").pendingCounts());
    assertTrue(!pending.isEmpty());
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    assertEquals(pending, new HashMap<>(engine.get("adm").pendingCounts()));
    assertEquals(2 + 40 * 4, state.recovery().replayedRecords()); // 2 creates, 4 per step
  }

  /**
   * Pooled calls are logged as what they changed: a pooled read's counts (one per bag entry of
   * each key) and a pooled write's bags, spread the same way on replay.
   */
  @Test
  void pooledReadsAndWrites_recoverBitForBit() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(adagrad("emb", 4, 1));
    engine.create(adagrad("adm", 4, 2));
    Random r = new Random(5);
    for (int s = 0; s < 20; s++) {
      String[] keys = {"a", "b" + r.nextInt(5), "c" + r.nextInt(50)};
      dev.dynembed.table.common.KeyBags bags = dev.dynembed.table.common.KeyBags.of(
          new int[] {2, 3}, new int[] {0, 1, 0, 2, 2}, null, new float[] {0.5f, 1f / 3}, 3);
      for (String table : new String[] {"emb", "adm"}) {
        engine.read(ReadRequest.newBuilder().setCallId(nextId()).addItems(ReadItem.newBuilder()
            .setFindOrInsert(FindOrInsertRequest.newBuilder().setTable(table)
                .setKeys(PackedKeys.of(keys).toProto()).setPool(bags.toProto()))).build(),
            service::runItem);
        float[] g = new float[2 * 4];
        for (int i = 0; i < g.length; i++) {
          g[i] = (float) r.nextGaussian();
        }
        engine.write(WriteRequest.newBuilder().setCallId(nextId()).addItems(
            ApplyGradientsRequest.newBuilder().setTable(table)
                .setKeys(PackedKeys.of(keys).toProto()).setGradients(Rows.encode(g)).setStep(s)
                .setPool(bags.toProto())).build(), ShardState::checkWrite);
      }
    }
    assertEquals(20 * 5, engine.get("emb").counters().getTotalFrequency()); // once per entry
    Map<Long, Long> pending = new HashMap<>(engine.get("adm").pendingCounts());
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    assertEquals(pending, new HashMap<>(engine.get("adm").pendingCounts()));
  }

  /** An admission sketch is rebuilt by replay, and restored from snapshots, counter for counter. */
  @org.junit.jupiter.params.ParameterizedTest(name = "snapshot every {0} bytes")
  @org.junit.jupiter.params.provider.ValueSource(longs = {1L << 40, 2048})
  void admissionSketch_recoversCounterForCounter(long snapshotBytes) throws Exception {
    start(ShardLog.Fsync.NO, snapshotBytes);
    engine.create(TableConfigs.normalize(adagrad("skt", 4, 4).toBuilder()
        .setAdmissionSketchKib(1).build()));
    Random r = new Random(9);
    for (int s = 0; s < 60; s++) {
      String[] keys = new String[20];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "w" + r.nextInt(r.nextBoolean() ? 30 : 3000);
      }
      count("skt", keys, nextId());
    }
    int[] sketch = engine.get("skt").admissionSketch().counters();
    assertTrue(java.util.Arrays.stream(sketch).anyMatch(c -> c > 0));
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    org.junit.jupiter.api.Assertions.assertArrayEquals(sketch,
        engine.get("skt").admissionSketch().counters());
  }

  /** An eviction is logged with its resolved step and replayed: the same rows go. */
  @org.junit.jupiter.params.ParameterizedTest(name = "snapshot every {0} bytes")
  @org.junit.jupiter.params.provider.ValueSource(longs = {1L << 40, 4096})
  void evictions_replayToTheSameRows(long snapshotBytes) throws Exception {
    start(ShardLog.Fsync.NO, snapshotBytes);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3));
    Random r = new Random(4);
    train(r, 20, 8);
    for (String t : new String[] {"emb", "adm"}) {
      engine.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable(t).setTtlSteps(10)
          .setMaxKeys(40).setPolicy(dev.dynembed.table.v1.EvictionPolicy.LRU).build());
    }
    assertTrue(engine.get("emb").size() <= 40);
    train(r, 10, 8);
    engine.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable("emb")
        .setKeys(PackedKeys.of("w1", "w2", "w3").toProto()).build());
    Map<Long, Long> pending = new HashMap<>(engine.get("adm").pendingCounts());
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    assertEquals(pending, new HashMap<>(engine.get("adm").pendingCounts()));
  }

  /**
   * The replay of a disk-tier table's eviction demotes its victims again, as the eviction did:
   * every row is found after recovery (the replay used to drop them).
   */
  @Test
  void diskTierEvictions_replayDemotingTheirVictims() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(TableConfigs.normalize(TableConfigs.builder("cold", 8)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f))
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 7)).setDiskTier(true)
        .setMaxKeys(1_000_000).build()));
    Random r = new Random(5);
    String[] all = new String[300];
    for (int i = 0; i < all.length; i++) {
      all[i] = "k" + i;
    }
    for (int s = 0; s < 30; s++) {
      String[] keys = new String[16];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = all[(s * 16 + i) % all.length];
      }
      count("cold", keys, nextId());
      float[] g = new float[keys.length * 8];
      for (int i = 0; i < g.length; i++) {
        g[i] = (float) r.nextGaussian();
      }
      write("cold", keys, g, s, nextId());
      if (s % 10 == 9) {
        engine.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable("cold")
            .setMaxKeys(40).build());
      }
    }
    float[] before = new float[all.length * 8];
    byte[] found = new byte[(all.length + 7) / 8];
    engine.get("cold").find(PackedKeys.of(all), before, found);
    crashAndRecover();
    assertTrue(engine.get("cold").size() <= 40, "the replay kept the victims in memory");
    float[] after = new float[all.length * 8];
    byte[] foundAfter = new byte[(all.length + 7) / 8];
    engine.get("cold").find(PackedKeys.of(all), after, foundAfter);
    assertArrayEquals(found, foundAfter, "keys found before and after recovery");
    assertArrayEquals(before, after);
    assertEquals(all.length, countBits(foundAfter), "keys found after recovery");
  }

  private static int countBits(byte[] b) {
    int n = 0;
    for (byte x : b) {
      n += Integer.bitCount(x & 0xFF);
    }
    return n;
  }

  /**
   * An eviction that arrives while a snapshot is between its log rotation and its table copies
   * waits for the snapshot: otherwise the snapshot skips the replaced store and the evicted
   * table is lost to the next recovery (the log holds the eviction, not the rows it kept).
   */
  @Test
  void evictionDuringASnapshot_waitsForIt_andNothingIsLost() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3));
    train(new Random(6), 20, 8);
    java.util.concurrent.CountDownLatch rotated = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch evicted = new java.util.concurrent.CountDownLatch(1);
    state.onStep(step -> {
      if (step.equals("rotated")) {
        rotated.countDown();
        try { // an eviction that does not wait would finish meanwhile
          evicted.await(1, java.util.concurrent.TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
    Thread snapshot = new Thread(() -> {
      try {
        state.snapshot();
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    snapshot.start();
    rotated.await();
    engine.evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable("emb")
        .setMaxKeys(10).build());
    evicted.countDown();
    snapshot.join();
    state.onStep(step -> {});
    assertEquals(10, engine.get("emb").size());
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
  }

  @Test
  void resentCallAfterRecovery_answersAsBefore_andChangesNothing() throws Exception {
    start(ShardLog.Fsync.ALWAYS, 1L << 40);
    engine.create(TableConfigs.normalize(TableConfigs.builder("emb", 4)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build()));
    CallId countId = nextId();
    count("emb", new String[] {"a", "a", "b"}, countId);
    CallId writeId = nextId();
    int[] first = write("emb", new String[] {"a", "b"}, new float[] {1, 1, 1, 1, 2, 2, 2, 2}, 1,
        writeId);
    crashAndRecover();
    Map<String, Map<String, TableStore.Record>> recovered = contents(engine);
    // the reply was lost in the crash: the client resends both calls with their ids
    count("emb", new String[] {"a", "a", "b"}, countId);
    assertArrayEquals(first, write("emb", new String[] {"a", "b"},
        new float[] {1, 1, 1, 1, 2, 2, 2, 2}, 1, writeId));
    assertEquals(recovered, contents(engine));
    assertEquals(2, engine.get("emb").record("a").frequency());
    assertArrayEquals(new float[] {-2, -2, -2, -2}, engine.get("emb").record("b").weights(), 0f);
    // a new call is applied
    write("emb", new String[] {"b"}, new float[] {2, 2, 2, 2}, 2, nextId());
    assertArrayEquals(new float[] {-4, -4, -4, -4}, engine.get("emb").record("b").weights(), 0f);
  }

  /**
   * An assign (an import) is logged and replayed as the write it is: rows, fresh slots, reset
   * update counts, set frequencies and the dropped admission count all come back bit for bit,
   * and its resend after the crash changes nothing (the later training of the keys stays).
   */
  @Test
  void assign_recoversBitForBit_andItsResendChangesNothing() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3));
    Random r = new Random(11);
    train(r, 10, 8);
    String[] keys = {"w1", "w2", "fresh", "rare5"};
    float[] rows = new float[keys.length * 8];
    for (int i = 0; i < rows.length; i++) {
      rows[i] = (float) r.nextGaussian();
    }
    count("adm", new String[] {"rare5"}, nextId()); // pending: the assign drops its count
    CallId assignId = nextId();
    assertArrayEquals(new int[] {4}, assign("emb", keys, rows, null, assignId));
    assertArrayEquals(new int[] {4}, assign("adm", keys, rows, new long[] {7, 8, 9, 10},
        nextId()));
    assertArrayEquals(java.util.Arrays.copyOfRange(rows, 8, 16),
        engine.get("adm").record("w2").weights(), 0f);
    assertEquals(8, engine.get("adm").record("w2").frequency());
    train(r, 5, 8); // training goes on over the imported rows
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    // the import's reply was lost: its resend is answered as before and changes nothing
    assertArrayEquals(new int[] {4}, assign("emb", keys, rows, null, assignId));
    assertEquals(before, contents(engine));
    // frequencies to assign without rows (beside gradients) are refused by name
    dev.dynembed.table.common.TableException e = org.junit.jupiter.api.Assertions.assertThrows(
        dev.dynembed.table.common.TableException.class,
        () -> engine.write(WriteRequest.newBuilder().setCallId(nextId()).addItems(
            ApplyGradientsRequest.newBuilder().setTable("emb")
                .setKeys(PackedKeys.of("a").toProto()).addAssignFrequencies(1)
                .setGradients(Rows.encode(new float[8]))).build(), ShardState::checkWrite));
    assertTrue(e.getMessage().contains("assign_frequencies without assign_values"),
        e.getMessage());
  }

  /** An assign of {@code rows} (and {@code frequencies}, null: none) at step 50. */
  private int[] assign(String table, String[] keys, float[] rows, long[] frequencies, CallId id) {
    ApplyGradientsRequest.Builder a = ApplyGradientsRequest.newBuilder().setTable(table)
        .setKeys(PackedKeys.of(keys).toProto()).setAssignValues(Rows.encode(rows)).setStep(50);
    for (int i = 0; frequencies != null && i < frequencies.length; i++) {
      a.addAssignFrequencies(frequencies[i]);
    }
    return engine.write(WriteRequest.newBuilder().setCallId(id).addItems(a).build(),
        ShardState::checkWrite);
  }

  @Test
  void snapshots_truncateTheLog_andRecoveryReplaysOnlyTheRest() throws Exception {
    start(ShardLog.Fsync.EVERYSEC, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3));
    Random r = new Random(2);
    train(r, 20, 8);
    state.snapshot();
    long segmentsAfterSnapshot = ShardLog.segmentStarts(walDir()).size();
    assertEquals(1, segmentsAfterSnapshot); // the log before the snapshot is gone
    train(r, 10, 8);
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    assertEquals(40, state.recovery().replayedRecords()); // only the 10 steps after it
  }

  @Test
  void snapshotsWhileTraining_concurrently_loseAndRepeatNothing() throws Exception {
    // SGD with learning rate 1 and gradients that are multiples of 1/4: every sum is exact in
    // any order, so the expected rows are known whatever the interleaving
    start(ShardLog.Fsync.NO, 64 << 10); // a snapshot every 64 KiB of log
    engine.create(TableConfigs.normalize(TableConfigs.builder("a", 4)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build()));
    engine.create(TableConfigs.normalize(TableConfigs.builder("b", 4)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build()));
    int threads = 4;
    int steps = 300;
    ExecutorService pool = Executors.newFixedThreadPool(threads + 1);
    AtomicBoolean stop = new AtomicBoolean();
    Future<?> snapshots = pool.submit(() -> {
      while (!stop.get()) {
        state.snapshot();
      }
      return null;
    });
    List<Future<float[]>> sums = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int id = t;
      sums.add(pool.submit(() -> {
        Random r = new Random(id);
        float[] expected = new float[20 * 4];
        for (int s = 0; s < steps; s++) {
          String[] keys = new String[8];
          float[] g = new float[keys.length * 4];
          for (int i = 0; i < keys.length; i++) {
            int k = r.nextInt(20);
            keys[i] = "k" + k;
            for (int j = 0; j < 4; j++) {
              g[i * 4 + j] = (r.nextInt(9) - 4) / 4f;
              expected[k * 4 + j] -= g[i * 4 + j];
            }
          }
          // one call, two tables: both or neither survive
          engine.write(WriteRequest.newBuilder()
              .setCallId(CallId.newBuilder().setClient(100 + id).setSeq(s + 1).setLowWater(s + 1))
              .addItems(item("a", keys, g, s)).addItems(item("b", keys, g, s)).build(),
              ShardState::checkWrite);
        }
        return expected;
      }));
    }
    float[] expected = new float[20 * 4];
    for (Future<float[]> f : sums) {
      float[] e = f.get();
      for (int i = 0; i < e.length; i++) {
        expected[i] += e[i];
      }
    }
    stop.set(true);
    snapshots.get();
    pool.shutdown();
    crashAndRecover();
    assertTrue(state.recovery().snapshotLsn() > 1, "no snapshot was taken");
    for (String table : List.of("a", "b")) {
      TableStore t = engine.get(table);
      for (int k = 0; k < 20; k++) {
        assertArrayEquals(java.util.Arrays.copyOfRange(expected, k * 4, k * 4 + 4),
            t.record("k" + k).weights(), 0f, table + " k" + k);
      }
    }
  }

  @Test
  void aFrozenCopy_isNotChangedByLaterWrites() throws Exception {
    // what a save or a snapshot writes outside the lock: the cut, not what came after it
    TableStore t = new TableStore(adagrad("emb", 8, 3), 0, 1);
    PackedKeys keys = PackedKeys.of("a", "b", "c", "d", "e");
    t.findOrInsert(keys, new int[] {3, 3, 3, 1, 1}, null);
    Map<String, TableStore.Record> before = Fixtures.snapshot(t);
    Map<Long, Long> pendingBefore = new HashMap<>(t.pendingCounts());
    TableStore.Frozen f = t.freeze();
    t.applyGradients(PackedKeys.of("a", "b"), new float[16], 0f, 9); // slots and metadata change
    t.applyGradients(PackedKeys.of("a"), new float[] {1, 2, 3, 4, 5, 6, 7, 8}, 0f, 10);
    t.findOrInsert(PackedKeys.of("d", "d", "z"), null, null); // d admitted, z pending
    Path d = Files.createDirectories(dir.resolve("frozen"));
    CheckpointFile file = CheckpointIo.write(f, d, 1);
    TableStore back = CheckpointIo.read(d, List.of(file), "emb", 0, 1);
    assertEquals(before, Fixtures.snapshot(back));
    assertEquals(pendingBefore, new HashMap<>(back.pendingCounts()));
  }

  private static ApplyGradientsRequest item(String table, String[] keys, float[] g, long step) {
    return ApplyGradientsRequest.newBuilder().setTable(table)
        .setKeys(PackedKeys.of(keys).toProto()).setGradients(Rows.encode(g)).setStep(step)
        .build();
  }

  /** A crash at each step of a snapshot recovers the state before it, and snapshots again. */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(strings = {"rotated", "table written",
      "manifest written", "renamed", "current written", "log truncated", "old snapshot deleted"})
  void crashAtEachStepOfASnapshot_recoversTheSameTables(String step) throws Exception {
    start(ShardLog.Fsync.EVERYSEC, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 3));
    Random r = new Random(6);
    train(r, 8, 8);
    state.snapshot(); // an older snapshot, so that "old snapshot deleted" happens
    train(r, 8, 8);
    class Crash extends IOException {
      Crash() {
        super("crash at " + step);
      }
    }
    state.onStep(s -> {
      if (s.equals(step)) {
        throw new Crash();
      }
    });
    org.junit.jupiter.api.Assertions.assertThrows(Crash.class, state::snapshot);
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine), "after a crash at " + step);
    train(r, 4, 8); // and it goes on: another snapshot, another recovery
    state.snapshot();
    before = crashAndRecover();
    assertEquals(before, contents(engine));
  }

  @Test
  void dropCreateAndRestore_replayInOrder() throws Exception {
    start(ShardLog.Fsync.EVERYSEC, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 1));
    Random r = new Random(3);
    train(r, 5, 8);
    CheckpointFile saved = engine.save("emb", "user-ckpt", 5);
    Map<String, TableStore.Record> atSave = Fixtures.snapshot(engine.get("emb"));
    train(r, 5, 8);
    engine.drop("adm");
    engine.create(adagrad("adm", 4, 1)); // same name, another table
    count("adm", new String[] {"x", "y"}, nextId());
    engine.restore("emb", "user-ckpt", List.of(saved));
    assertEquals(atSave, Fixtures.snapshot(engine.get("emb")));
    write("emb", new String[] {"w1"}, new float[] {1, 2, 3, 4, 5, 6, 7, 8}, 11, nextId());
    Files.delete(dir.resolve("user-ckpt").resolve(saved.getName())); // recovery needs no user file
    Map<String, Map<String, TableStore.Record>> before = crashAndRecover();
    assertEquals(before, contents(engine));
    assertEquals(4, engine.get("adm").dim());
  }

  @Test
  void tornTail_isCut_butDamageBeforeLaterRecordsIsRefused() throws Exception {
    start(ShardLog.Fsync.EVERYSEC, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    engine.create(adagrad("adm", 8, 1));
    train(new Random(4), 10, 8);
    Map<String, Map<String, TableStore.Record>> good = contents(engine);
    try (FileChannel ch = FileChannel.open(lastSegment(), StandardOpenOption.WRITE,
        StandardOpenOption.READ)) {
      // the start of a record whose body never made it, where the next record goes (the log
      // allocates its file ahead in zeros): what a kill -9 mid-write leaves
      ch.write(ByteBuffer.wrap(new byte[] {(byte) 200, 0, 0, 0, 1, 2, 3, 4, 9, 9}),
          recordsEnd(ch));
    }
    crashAndRecover();
    assertEquals(good, contents(engine));
    assertEquals(2 + 10 * 4, state.recovery().replayedRecords());

    // damage inside a record that has records after it: not a torn end, refused
    train(new Random(5), 3, 8);
    state.close();
    Path seg = lastSegment();
    byte[] bytes = Files.readAllBytes(seg);
    assertTrue(bytes.length > 1000);
    bytes[40] ^= 1;
    Files.write(seg, bytes);
    Fixtures.assertError(ErrorCode.DATA_LOSS, "checksum does not match) and records follow",
        () -> ShardState.recover(new ShardEngine(0, 1, dir), dir.resolve("state"), ShardLog.Fsync.NO, 1L << 40,
            e -> {}));
  }

  /** Where a log segment's records end: the first record length that is zero, or the end. */
  private static long recordsEnd(FileChannel ch) throws IOException {
    ByteBuffer len = ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    long pos = 0;
    while (pos + 4 <= ch.size()) {
      len.clear();
      ch.read(len, pos);
      int n = len.getInt(0);
      if (n == 0) {
        return pos;
      }
      pos += 8 + n;
    }
    return pos;
  }

  @Test
  void aSecondProcessOnTheSameState_isRefused() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    Fixtures.assertError(ErrorCode.FAILED_PRECONDITION, "in use by another table-server",
        () -> ShardState.recover(new ShardEngine(0, 1, dir), dir.resolve("state"), ShardLog.Fsync.NO, 1L << 40,
            e -> {}));
    state.close();
  }

  @Test
  void startingAsAnotherShard_isRefused() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    state.close();
    Fixtures.assertError(ErrorCode.FAILED_PRECONDITION, "holds the state of shard 0 of 1, but"
        + " this is shard 0 of 3", () -> ShardState.recover(new ShardEngine(0, 3, dir), dir.resolve("state"),
        ShardLog.Fsync.NO, 1L << 40, e -> {}));
  }

  @Test
  void aCallOnADroppedTable_failsInsteadOfAcknowledging() throws Exception {
    start(ShardLog.Fsync.NO, 1L << 40);
    engine.create(adagrad("emb", 8, 1));
    TableStore old = engine.get("emb");
    old.quiesce.readLock().lock(); // a write in flight holds the table
    Thread dropper = new Thread(() -> engine.drop("emb"));
    dropper.start();
    while (!old.quiesce.hasQueuedThreads()) {
      Thread.onSpinWait();
    }
    old.quiesce.readLock().unlock();
    dropper.join();
    assertTrue(old.retired);
    Fixtures.assertError(ErrorCode.NOT_FOUND, "does not exist", () ->
        write("emb", new String[] {"a"}, new float[8], 1, nextId()));
  }

  private Path walDir() {
    return ShardState.root(dir.resolve("state"), 0).resolve("wal");
  }

  private Path lastSegment() throws IOException {
    List<Long> starts = ShardLog.segmentStarts(walDir());
    return walDir().resolve(ShardLog.segmentName(starts.get(starts.size() - 1)));
  }
}
