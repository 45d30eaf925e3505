package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RetryAndConcurrencyTest {
  /**
   * The faults are injected by a gRPC server interceptor, so the data calls go through gRPC
   * here; the native data plane's resends are exercised by killing shards (ChaosTest).
   */
  private static final ClientOptions GRPC_DATA_CALLS =
      ClientOptions.builder().dataPlane(ClientOptions.DataPlane.GRPC).build();

  @TempDir Path dir;

  /** Fails the first call of every method with UNAVAILABLE, before the handler runs. */
  static final class FailFirstCall implements ServerInterceptor {
    final Set<String> seen = ConcurrentHashMap.newKeySet();
    final AtomicInteger rejected = new AtomicInteger();

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
        ServerCallHandler<Q, R> next) {
      if (seen.add(call.getMethodDescriptor().getBareMethodName())) {
        rejected.incrementAndGet();
        call.close(Status.UNAVAILABLE.withDescription("injected fault"), new Metadata());
        return new ServerCall.Listener<>() {};
      }
      return next.startCall(call, headers);
    }
  }

  /**
   * Lets the first call of every method run on the shard, then loses its reply (the client
   * sees UNAVAILABLE): the worst case for a resend, which must not apply the call twice.
   */
  static final class LoseFirstReply implements ServerInterceptor {
    final Set<String> seen = ConcurrentHashMap.newKeySet();

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
        ServerCallHandler<Q, R> next) {
      if (!seen.add(call.getMethodDescriptor().getBareMethodName())) {
        return next.startCall(call, headers);
      }
      return next.startCall(new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
        @Override
        public void sendMessage(R message) {} // lost on the way

        @Override
        public void close(Status status, Metadata trailers) {
          super.close(Status.UNAVAILABLE.withDescription("injected: reply lost"), trailers);
        }
      }, headers);
    }
  }

  @Test
  void unavailable_everyCallResent_writesAppliedOnce() throws Exception {
    FailFirstCall faults = new FailFirstCall();
    try (TableServer server = new TableServer(new ShardEngine(0, 1, dir), "127.0.0.1", 0, 2,
            List.of(faults));
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()),
            GRPC_DATA_CALLS)) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4)
          .setOptimizer(TableConfigs.sgd(1f)).build()); // Stats, CreateTable: resent
      float[] before = t.findOrInsert("a", "b");         // Read (findOrInsert): resent
      assertArrayEquals(before, t.find("a", "b").rows());
      float[] g = {1, 1, 1, 1, 1, 1, 1, 1};
      assertEquals(2, t.applyGradients(new String[] {"a", "b"}, g, 0f, 1)); // Write: resent
      float[] after = t.find("a", "b").rows();
      for (int i = 0; i < after.length; i++) {
        assertEquals(before[i] - 1f, after[i], 0f); // applied exactly once
      }
      assertEquals(Set.of("Stats", "CreateTable", "Read", "Write"), faults.seen);
      assertEquals(4, faults.rejected.get());
    }
  }

  @Test
  void lostReplies_resentWritesAndCountsApplyOnce() throws Exception {
    LoseFirstReply faults = new LoseFirstReply();
    try (TableServer server = new TableServer(new ShardEngine(0, 1, dir), "127.0.0.1", 0, 2,
            List.of(faults));
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()),
            GRPC_DATA_CALLS)) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4)
          .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
      t.findOrInsert("a", "a", "b"); // counted by the lost first call, not by its resend
      TableStoreView v = new TableStoreView(server.engine().get("emb"));
      assertEquals(2, v.frequency("a"));
      assertEquals(1, v.frequency("b"));
      float[] g = {0.5f, 0.5f, 0.5f, 0.5f, 0.25f, 0.25f, 0.25f, 0.25f};
      assertEquals(2, t.applyGradients(new String[] {"a", "b"}, g, 0f, 1)); // the first answer
      assertArrayEquals(new float[] {-0.5f, -0.5f, -0.5f, -0.5f, -0.25f, -0.25f, -0.25f, -0.25f},
          t.find("a", "b").rows(), 0f); // applied once, though the shard saw it twice
      assertEquals(1, v.updates("a"));
      assertEquals(Set.of("Stats", "CreateTable", "Read", "Write"), faults.seen);
    }
  }

  /** A store's per-key metadata, read in the test. */
  record TableStoreView(dev.dynembed.table.engine.TableStore store) {
    long frequency(String key) {
      return store.record(key).frequency();
    }

    long updates(String key) {
      return store.record(key).updates();
    }
  }

  @Test
  void manyClients_concurrentTraining_countsAndUpdatesAreExact() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir)) {
      try (TableClient setup = cluster.client()) {
        setup.createTable(TableConfigs.builder("emb", 8).setOptimizer(TableConfigs.sgd(1f))
            .setInitializer(TableConfigs.zeros()).build());
      }
      int clients = 4;
      int steps = 50;
      String[] keys = new String[200];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "k" + (i % 100); // every key twice per batch
      }
      float[] g = new float[keys.length * 8];
      java.util.Arrays.fill(g, 1f / 64);
      ExecutorService pool = Executors.newFixedThreadPool(clients);
      List<Future<?>> done = new ArrayList<>();
      for (int c = 0; c < clients; c++) {
        done.add(pool.submit(() -> {
          try (TableClient client = cluster.client()) { // each worker its own connections
            EmbeddingTable t = client.openTable("emb");
            for (int s = 0; s < steps; s++) {
              t.findOrInsert(keys);
              t.applyGradients(keys, g, 0f, s);
            }
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
      pool.shutdown();
      try (TableClient check = cluster.client()) {
        EmbeddingTable t = check.openTable("emb");
        assertEquals(100, t.describe().getCounters().getKeys());
        assertEquals((long) clients * steps * keys.length, t.describe().getCounters().getTotalFrequency());
        // each key: clients*steps updates of 2 * (1/64) per column, from 0, with SGD lr 1
        float expected = -clients * steps * 2f / 64;
        for (float v : t.find("k0", "k99").rows()) {
          assertEquals(expected, v, 1e-4);
        }
        long updates = cluster.engine(0).get("emb").record(cluster.engine(0).get("emb").keys()
            .get(0)).updates();
        assertEquals((long) clients * steps, updates);
      }
    }
  }
}
