package dev.dynembed.table.server;

import static dev.dynembed.table.server.HostileRequests.call;
import static dev.dynembed.table.server.HostileRequests.find;
import static dev.dynembed.table.server.HostileRequests.floats;
import static dev.dynembed.table.server.HostileRequests.keys;
import static dev.dynembed.table.server.HostileRequests.write;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindResponse;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import dev.dynembed.table.v1.SaveRequest;
import dev.dynembed.table.v1.TopKRequest;
import dev.dynembed.table.v1.TopKResponse;
import dev.dynembed.table.v1.WriteResponse;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The defects an outside client found (issue 49), each replayed as it was found: a raw-socket
 * client of the data plane ({@link RawDataPlane}) and a raw gRPC client (the generated stub), no
 * project client class. The shard runs in this JVM with small connection limits so that the
 * timeouts are short; {@link HostileShardProcessTest} takes the memory attacks to a shard
 * process, where running out of memory shows as the process gone.
 */
class HostileClientTest {
  @TempDir Path dir;
  private final List<AutoCloseable> open = new ArrayList<>();
  private TableServer server;
  private ShardEngine engine;
  private EmbeddingTableServiceGrpc.EmbeddingTableServiceBlockingStub grpc;
  private ManagedChannel grpcChannel;

  private static final DataPlaneServer.ConnectionLimits SMALL = new DataPlaneServer
      .ConnectionLimits(12, 4, Duration.ofMillis(3000), Duration.ofMillis(1500));

  private void start(DataPlaneServer.ConnectionLimits limits) throws IOException {
    engine = new ShardEngine(0, 1, dir);
    server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(), null, 0, List.of(), limits);
    open.add(server);
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", server.port())
        .usePlaintext().maxInboundMessageSize(512 << 20).build();
    open.add(() -> ch.shutdownNow());
    grpcChannel = ch;
    grpc = EmbeddingTableServiceGrpc.newBlockingStub(ch);
  }

  private RawDataPlane connect() throws IOException {
    RawDataPlane c = RawDataPlane.open(server.dataPort(), null);
    open.add(c);
    return c;
  }

  private RawDataPlane raw() throws IOException {
    RawDataPlane c = new RawDataPlane("127.0.0.1", server.dataPort());
    open.add(c);
    return c;
  }

  @AfterEach
  void closeAll() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) {
      open.get(i).close();
    }
  }

  /** The shard answers gRPC (another client, another port): it was never made unreachable. */
  private void grpcServes() {
    grpc.describeTable(dev.dynembed.table.v1.DescribeTableRequest.newBuilder().setTable("t")
        .build());
  }

  /** Waits up to 5 s for what the shard does after its answer (closing, counting). */
  static void eventually(java.util.function.BooleanSupplier condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "not within 5 s");
      Thread.sleep(10);
    }
  }

  private void assertError(RawDataPlane.Frame f, String code, long call, String words) {
    assertNotNull(f, "the shard closed the connection without an answer");
    assertEquals(RawDataPlane.ERROR, f.kind(), f.toString());
    assertEquals(code, f.code(), f.toString());
    assertEquals(call, f.call(), f.toString());
    assertTrue(f.description().contains(words), f.toString());
  }

  // ------------------------------------------------------------------ D3: connections

  @Test
  void d3_silentConnections_areCappedAndClosedAfterTheHelloDeadline_andIdleOnesAfterTheirs()
      throws Exception {
    start(SMALL);
    engine.create(TableConfigs.builder("t", 4).build());
    List<RawDataPlane> silent = new ArrayList<>();
    for (int i = 0; i < SMALL.maxUnauthenticated(); i++) {
      silent.add(raw());
      int counted = i + 1; // one at a time: "oldest" is the order the shard took them in
      eventually(() -> server.dataPlaneCounters().unauthenticated.get() == counted);
    }
    // one more: the oldest silent one makes room (a client that says HELLO at once gets in)
    RawDataPlane newer = raw();
    assertError(silent.get(0).read(), "RESOURCE_EXHAUSTED", 0,
        "waiting for their HELLO than its limit (4), or more connections than 12; the oldest"
            + " waiting ones are closed");
    assertTrue(silent.get(0).closedWithin(2_000));
    silent.set(0, newer);
    eventually(() -> server.dataPlaneCounters().unauthenticated.get() == 4);
    RawDataPlane quick = raw();
    quick.hello(null);
    assertEquals(RawDataPlane.HELLO_OK, quick.read().kind(), "a client saying HELLO got in");
    quick.close();
    assertError(silent.get(1).read(), "RESOURCE_EXHAUSTED", 0, "the oldest waiting ones are"
        + " closed");
    grpcServes();
    for (RawDataPlane s : silent.subList(2, silent.size())) { // the HELLO deadline closes each
      assertError(s.read(), "DEADLINE_EXCEEDED", 0, "no HELLO within 3000 ms");
      assertTrue(s.closedWithin(2_000));
    }
    eventually(() -> server.dataPlaneCounters().unauthenticated.get() == 0);
    // gRPC's port: a connection that never says a word is closed after the same deadline
    try (RawDataPlane silentGrpc = new RawDataPlane("127.0.0.1", server.port())) {
      assertTrue(silentGrpc.closedWithin(3_000), "a silent gRPC connection stayed open");
    }
    // an authenticated connection that sends nothing is closed once idle
    RawDataPlane idle = connect();
    assertError(idle.read(), "UNAVAILABLE", 0, "idle for 1 s");
    assertTrue(idle.closedWithin(2_000));
    // and the total is capped: 12 open, the 13th refused, gRPC served throughout
    List<RawDataPlane> many = new ArrayList<>();
    for (int i = 0; i < SMALL.maxConnections(); i++) {
      many.add(connect());
    }
    RawDataPlane over = raw();
    assertError(over.read(), "RESOURCE_EXHAUSTED", 0, "data-plane connections open, its limit");
    grpcServes();
    eventually(() -> server.dataPlaneCounters().refusedConnections.get() == 3);
    assertEquals(3, server.dataPlaneCounters().helloTimeouts.get());
  }

  // ------------------------------------------------------------------ D4: before HELLO

  @Test
  void d4_aHugeFrameBeforeHello_isRefusedAtItsHeader_notRead() throws Exception {
    start(SMALL);
    RawDataPlane c = raw();
    java.nio.ByteBuffer header = java.nio.ByteBuffer.allocate(16).putInt(512 << 20)
        .put((byte) RawDataPlane.READ).put((byte) 0).putShort((short) 0).putLong(7);
    c.sendRaw(header.array());
    assertError(c.read(), "RESOURCE_EXHAUSTED", 0, "before HELLO; until a HELLO is accepted a"
        + " frame holds at most 4112 bytes");
    try { // what follows is not read: the connection is gone
      for (int i = 0; i < 64; i++) {
        c.sendRaw(new byte[1 << 20]);
      }
    } catch (IOException expected) {
      // broken pipe or reset
    }
    assertTrue(c.closedWithin(2_000));
    eventually(() -> server.dataPlaneCounters().preHelloDrops.get() == 1);
    // a HELLO's own size is what a frame may be before one: the longest token still fits
    RawDataPlane t = raw();
    t.hello("x".repeat(4097));
    assertError(t.read(), "RESOURCE_EXHAUSTED", 0, "a token of at most 4096 bytes");
  }

  // ------------------------------------------------------------------ D5: applied once

  @Test
  void d5_refusedWritesOfFreshClients_doNotPushAnAppliedCallOutOfTheLedger() throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.sgd(1f))
        .setInitializer(TableConfigs.zeros()).build());
    RawDataPlane c = connect();
    var victim = write("t", keys("k"), floats(1, 1, 1, 1), 0f, call(0x5EED, 1));
    c.send(RawDataPlane.WRITE, 1, victim.toByteArray());
    RawDataPlane.Frame ok = c.read();
    assertEquals(RawDataPlane.WRITE_OK, ok.kind(), ok.toString());
    // 65,636 writes to a missing table from fresh client ids, pipelined, all refused
    int refused = 65_636;
    for (int i = 0; i < refused; i++) {
      c.send(RawDataPlane.WRITE, 0, 0, 10 + i, write("missing", keys("k"), floats(1, 1, 1, 1),
          0f, call(1_000_000L + i, 1)).toByteArray());
      if (i % 4096 == 4095) {
        c.flush();
      }
    }
    c.flush();
    for (int i = 0; i < refused; i++) {
      RawDataPlane.Frame f = c.read();
      assertEquals("NOT_FOUND", f.code(), f.toString());
    }
    // the victim's resend (its reply was lost, say) is answered as the first time
    c.send(RawDataPlane.WRITE, 2, victim.toByteArray());
    RawDataPlane.Frame again = c.read();
    assertEquals(RawDataPlane.WRITE_OK, again.kind(), again.toString());
    c.send(RawDataPlane.READ, 3, find("t", keys("k"), 1).toByteArray());
    FindResponse row = ReadResponse.parseFrom(c.read().body()).getResults(0).getRows();
    assertArrayEquals(new float[] {-1, -1, -1, -1}, floats(row.getRows()), 0f,
        "the victim's gradient was applied more than once");
    assertArrayEquals(ok.body(), again.body());
    assertTrue(engine.ledger().clients() <= 1, "refused calls took room in the ledger: "
        + engine.ledger().clients() + " clients");
  }

  @Test
  void d5_overGrpc_refusedWritesOfFreshClients_doNotPushAnAppliedCallOutOfTheLedger()
      throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.sgd(1f))
        .setInitializer(TableConfigs.zeros()).build());
    var victim = write("t", keys("k"), floats(1, 1, 1, 1), 0f, call(0x5EED, 1));
    WriteResponse first = grpc.write(victim);
    var async = EmbeddingTableServiceGrpc.newStub(grpcChannel);
    int calls = 65_636;
    java.util.concurrent.Semaphore window = new java.util.concurrent.Semaphore(4096);
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(calls);
    java.util.concurrent.atomic.AtomicInteger notFound =
        new java.util.concurrent.atomic.AtomicInteger();
    for (int i = 0; i < calls; i++) {
      window.acquire();
      async.write(write("missing", keys("k"), floats(1, 1, 1, 1), 0f, call(1_000_000L + i, 1)),
          new io.grpc.stub.StreamObserver<>() {
            @Override
            public void onNext(WriteResponse r) {}

            @Override
            public void onError(Throwable t) {
              if (Status.fromThrowable(t).getCode() == Status.Code.NOT_FOUND) {
                notFound.incrementAndGet();
              }
              window.release();
              done.countDown();
            }

            @Override
            public void onCompleted() {
              window.release();
              done.countDown();
            }
          });
    }
    assertTrue(done.await(120, java.util.concurrent.TimeUnit.SECONDS));
    assertEquals(calls, notFound.get());
    WriteResponse again = grpc.write(victim);
    FindResponse row = grpc.find(dev.dynembed.table.v1.FindRequest.newBuilder().setTable("t")
        .setKeys(keys("k")).build());
    assertArrayEquals(new float[] {-1, -1, -1, -1}, floats(row.getRows()), 0f,
        "the victim's gradient was applied more than once");
    assertEquals(first, again, "the resend is answered as the first time");
    assertTrue(engine.ledger().clients() <= 1);
    // every reply's reservation is given back once gRPC has sent it
    eventually(() -> engine.replies().used() == 0);
  }

  @Test
  void d6_overGrpc_nonFiniteSumsAndRatesAreRefused_andOutOfRangeRowsKeptAsTheyWere()
      throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("sgd", 4).setOptimizer(TableConfigs.sgd(1f)).build());
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> grpc.write(
        write("sgd", keys("p", "p"), floats(3e38f, 0, 0, 0, 3e38f, 0, 0, 0), 0f, call(9, 1))));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
    assertTrue(e.getStatus().getDescription().contains("sum to Infinity"), e.toString());
    e = assertThrows(StatusRuntimeException.class, () -> grpc.applyGradients(
        dev.dynembed.table.v1.ApplyGradientsRequest.newBuilder().setTable("sgd")
            .setKeys(keys("p")).setGradients(floats(1e30f, 0, 0, 0)).setLearningRate(1e30f)
            .build()));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
    for (int i = 0; i < 3; i++) { // 1e14 a step: the fourth would pass 1e15... and so on
      grpc.write(write("sgd", keys("p"), floats(1e30f, 0, 0, 0), 1e6f, call(9, 2 + i)));
    }
    FindResponse p = grpc.find(dev.dynembed.table.v1.FindRequest.newBuilder().setTable("sgd")
        .setKeys(keys("p")).build());
    for (float v : floats(p.getRows())) {
      assertTrue(Math.abs(v) <= dev.dynembed.table.common.Limits.MAX_ROW_VALUE, "row " + v);
    }
    assertEquals(3, engine.get("sgd").refusedUpdates());
  }

  // ------------------------------------------------------------------ D6: finite rows

  @Test
  void d6_finiteGradients_neverMakeARowNonFinite_andTopKScoresStayFinite() throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("sgd", 4).setOptimizer(TableConfigs.sgd(1f)).build());
    engine.create(TableConfigs.builder("ada", 4).setOptimizer(TableConfigs.adagrad(1f, 0.1f,
        1e-7f)).build());
    RawDataPlane c = connect();
    long n = 1;
    // two finite gradients of one key that sum to infinity
    c.send(RawDataPlane.WRITE, n++, write("sgd", keys("p", "p"),
        floats(3e38f, 0, 0, 0, 3e38f, 0, 0, 0), 0f, call(9, 1)).toByteArray());
    assertError(c.read(), "INVALID_ARGUMENT", 1, "the gradients of key 'p' column 0 sum to"
        + " Infinity");
    // an unbounded learning rate
    c.send(RawDataPlane.WRITE, n++, write("sgd", keys("p"), floats(1e30f, 0, 0, 0), 1e30f,
        call(9, 2)).toByteArray());
    assertError(c.read(), "INVALID_ARGUMENT", 2, "learning_rate must be in [0, 1000000.0]");
    // a gradient times a bounded rate past float
    c.send(RawDataPlane.WRITE, n++, write("sgd", keys("p"), floats(1e33f, 0, 0, 0), 1e6f,
        call(9, 3)).toByteArray());
    assertError(c.read(), "INVALID_ARGUMENT", 3, "times the learning rate");
    // updates that would take a row's weight past the bound, or a slot to infinity, leave the
    // row as it was (and are not counted)
    FindResponse before = findRows(c, n++, "sgd", "p", "q");
    c.send(RawDataPlane.WRITE, n++, write("sgd", keys("p", "q"),
        floats(1e30f, 0, 0, 0, 1, 1, 1, 1), 1e6f, call(9, 4)).toByteArray());
    WriteResponse w = WriteResponse.parseFrom(c.read().body());
    assertEquals(1, w.getRowsUpdated(0), "only q's update is applied");
    FindResponse after = findRows(c, n++, "sgd", "p", "q");
    float[] b = floats(before.getRows());
    float[] a = floats(after.getRows());
    for (int j = 0; j < 4; j++) {
      assertEquals(b[j], a[j], 0f, "p's row is unchanged");
      assertEquals(b[4 + j] - 1e6f, a[4 + j], 1f, "q's row took its update");
    }
    c.send(RawDataPlane.WRITE, n++, write("ada", keys("p"), floats(1e20f, 1, 1, 1), 0f,
        call(9, 5)).toByteArray());
    assertEquals(0, WriteResponse.parseFrom(c.read().body()).getRowsUpdated(0),
        "an accumulator of 1e40 is not finite: the update is not applied");
    assertEquals(1, engine.get("sgd").refusedUpdates());
    assertEquals(1, engine.get("ada").refusedUpdates());
    eventually(() -> engine.replies().used() == 0); // given back as each reply was written
    for (String table : List.of("sgd", "ada")) {
      for (int metric = 1; metric <= 2; metric++) {
        c.send(RawDataPlane.TOPK, n, TopKRequest.newBuilder().setTable(table)
            .setQueries(floats(1e15f, -1e15f, 1e15f, 1e15f)).setNumQueries(1).setK(5)
            .setMetricValue(metric).build().toByteArray());
        RawDataPlane.Frame f = c.read();
        assertEquals(RawDataPlane.TOPK_OK, f.kind(), f.toString());
        for (float s : TopKResponse.parseFrom(f.body()).getScoresList()) {
          assertTrue(Float.isFinite(s), table + " answered a score of " + s);
        }
        n++;
      }
    }
  }

  private FindResponse findRows(RawDataPlane c, long call, String table, String... k)
      throws IOException {
    c.send(RawDataPlane.READ, call, ReadRequest.newBuilder().addItems(ReadItem.newBuilder()
        .setFindOrInsert(FindOrInsertRequest.newBuilder().setTable(table).setKeys(keys(k))))
        .build().toByteArray());
    RawDataPlane.Frame f = c.read();
    assertEquals(RawDataPlane.READ_OK, f.kind(), f.toString());
    return ReadResponse.parseFrom(f.body()).getResults(0).getRows();
  }

  // ------------------------------------------------------------------ D7: own state

  @Test
  void d7_aCheckpointIntoTheShardsOwnStateDirectory_isRefused() throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("t", 4).build());
    Path state = dir.resolve("state");
    java.nio.file.Files.createDirectories(state.resolve("shard-0/snapshots"));
    engine.reserveDirectory(state); // as TableServerMain does for --state-dir
    java.nio.file.Files.createSymbolicLink(dir.resolve("innocent"), state);
    for (String d : List.of("state/shard-0/snapshots/0000000000000001", "state",
        dir.resolve("state/shard-0").toString(), "innocent/x")) {
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> grpc.save(SaveRequest.newBuilder().setTable("t").setDirectory(d).build()));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), d);
      assertTrue(e.getStatus().getDescription().contains("inside this shard's own state"),
          e.getStatus().getDescription());
    }
    grpc.save(SaveRequest.newBuilder().setTable("t").setDirectory("ckpt/1").build());
  }

  // ------------------------------------------------------------------ D8: calls in flight

  @Test
  void d8_manyFramesInOneWrite_neverPutMoreThanTheCapOfCallsOffTheLoop() throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("t", 8).build());
    RawDataPlane c = connect();
    String[] k = new String[5000];
    for (int i = 0; i < k.length; i++) {
      k[i] = "k" + i;
    }
    c.send(RawDataPlane.READ, 1, ReadRequest.newBuilder().addItems(ReadItem.newBuilder()
        .setFindOrInsert(FindOrInsertRequest.newBuilder().setTable("t").setKeys(keys(k))))
        .build().toByteArray());
    assertEquals(RawDataPlane.READ_OK, c.read().kind());
    // a top-k without an index scans the table: off the event loop, each
    byte[] topk = TopKRequest.newBuilder().setTable("t").setQueries(floats(1, 0, 0, 0, 0, 0, 0,
        1)).setNumQueries(1).setK(3).build().toByteArray();
    int calls = 4000;
    for (int i = 0; i < calls; i++) {
      c.send(RawDataPlane.TOPK, 0, 0, 100 + i, topk);
    }
    c.flush();
    java.util.Set<Long> answered = new java.util.HashSet<>();
    for (int i = 0; i < calls; i++) {
      RawDataPlane.Frame f = c.read();
      assertEquals(RawDataPlane.TOPK_OK, f.kind(), f.toString());
      answered.add(f.call());
    }
    assertEquals(calls, answered.size());
    int peak = server.dataPlaneCounters().peakOffloaded.get();
    assertTrue(peak <= dev.dynembed.table.common.Limits.MAX_CALLS_PER_CONNECTION,
        "calls of one connection off its loop at once: " + peak);
  }

  // ------------------------------------------------------------------ the smaller findings

  @Test
  void alsoSeen_connectionErrorsCarryCallZero_unusedHeaderBitsAndUnknownEnumsAreRefused()
      throws Exception {
    start(DataPlaneServer.ConnectionLimits.DEFAULTS);
    engine.create(TableConfigs.builder("t", 4).build());
    // a call before HELLO: an error about the connection, call number 0, then closed
    RawDataPlane early = raw();
    early.send(RawDataPlane.READ, 99, find("t", keys("a"), 1).toByteArray());
    assertError(early.read(), "UNAUTHENTICATED", 0, "starts with HELLO");
    assertTrue(early.closedWithin(2_000));
    RawDataPlane c = connect();
    // flags and reserved bytes must be 0
    c.send(RawDataPlane.READ, 1, 0, 5, find("t", keys("a"), 1).toByteArray());
    c.send(RawDataPlane.READ, 0, 3, 6, find("t", keys("a"), 1).toByteArray());
    c.flush();
    assertError(c.read(), "INVALID_ARGUMENT", 5, "flags and reserved bytes must be 0");
    assertError(c.read(), "INVALID_ARGUMENT", 6, "flags and reserved bytes must be 0");
    // an unknown metric is refused like every other unknown enum
    c.send(RawDataPlane.TOPK, 7, TopKRequest.newBuilder().setTable("t").setQueries(
        floats(1, 0, 0, 0)).setNumQueries(1).setK(1).setMetricValue(9).build().toByteArray());
    assertError(c.read(), "INVALID_ARGUMENT", 7, "metric 9 is not one of DOT (1) and COSINE (2)");
    // map_epoch is a uint64: 2^64-1 is far ahead of the shard's map, not behind it
    c.send(RawDataPlane.READ, 8, ReadRequest.newBuilder().addItems(ReadItem.newBuilder()
        .setFind(dev.dynembed.table.v1.FindRequest.newBuilder().setTable("t")
            .setKeys(keys("a")))).setMapEpoch(-1L).build().toByteArray());
    assertError(c.read(), "UNAVAILABLE", 8, "older than the call's 18446744073709551615");
    // the connection still serves
    c.send(RawDataPlane.READ, 9, find("t", keys("a"), 1).toByteArray());
    assertEquals(RawDataPlane.READ_OK, c.read().kind());
    // an unknown frame kind ends the connection, call number 0
    c.send(0x33, 10, new byte[0]);
    assertError(c.read(), "INVALID_ARGUMENT", 0, "not unknown kind 51");
    assertNull(c.read());
  }
}
