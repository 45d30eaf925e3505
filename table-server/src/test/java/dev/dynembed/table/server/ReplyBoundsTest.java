package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SamplerKind;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Replies are sized in {@code long} before anything is allocated: a small request that asks for
 * a huge reply gets RESOURCE_EXHAUSTED (it used to overflow an {@code int} and fail as an
 * internal error, or allocate hundreds of MB), and the shard keeps serving.
 */
class ReplyBoundsTest {
  @TempDir Path dir;

  private static String[] keys(int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = Integer.toString(i, 36);
    }
    return k;
  }

  @Test
  void hugeReplies_areResourceExhausted_overTheWire() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    engine.create(TableConfigs.builder("wide", Limits.MAX_DIM)
        .setOptimizer(TableConfigs.adam(0.1f, 0f, 0f, 0f)).build());
    engine.create(TableConfigs.builder("small", 4).build());
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2)) {
      ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", server.port())
          .usePlaintext().maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES).build();
      try {
        var stub = EmbeddingTableServiceGrpc.newBlockingStub(ch);
        // 600,000 keys x 4096 floats = 2.46G floats: an int product wraps to a negative size
        var many = PackedKeys.of(keys(600_000)).toProto();
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
            () -> stub.find(FindRequest.newBuilder().setTable("wide").setKeys(many).build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        assertTrue(e.getStatus().getDescription()
            .contains("one reply holds at most 536870912 bytes"),
            e.getStatus().getDescription());
        // optimizer slots count too: 20,000 keys x (4096 + 2 x 4096 Adam slots) floats
        var some = PackedKeys.of(keys(20_000)).toProto();
        e = assertThrows(StatusRuntimeException.class, () -> stub.findOrInsert(
            FindOrInsertRequest.newBuilder().setTable("wide").setKeys(some).setWithSlots(true)
                .build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        assertTrue(e.getStatus().getDescription()
            .contains("one reply holds at most 536870912 bytes"),
            e.getStatus().getDescription()); // refused before the reply buffer is allocated
        // 4M distinct draws with their rows at dim 4096
        e = assertThrows(StatusRuntimeException.class, () -> stub.sample(SampleRequest
            .newBuilder().setTable("wide").setNumSampled(Limits.MAX_NUM_SAMPLED)
            .setSampler(SamplerKind.UNIFORM_SAMPLER).setDistinctWithRows(true).build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        assertEquals(0, engine.get("wide").size(), "nothing was inserted");
        // the shard keeps serving a well-behaved caller
        var ok = stub.findOrInsert(FindOrInsertRequest.newBuilder().setTable("small")
            .setKeys(PackedKeys.of("a", "b").toProto()).build());
        assertEquals(8, Rows.decode(ok.getRows()).length);
      } finally {
        ch.shutdownNow();
      }
    }
  }

  @Test
  void topK_largeKOnASmallTable_allocatesForItsRowsOnly() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableStore t = engine.create(TableConfigs.builder("t", 4).build());
    Fixtures.rows(t, "a", "b", "c");
    float[] queries = new float[Limits.MAX_TOP_K_QUERIES * 4];
    java.util.Arrays.fill(queries, 1f);
    com.sun.management.ThreadMXBean mx =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long before = mx.getThreadAllocatedBytes(Thread.currentThread().getId());
    TopKHits hits = engine.topK("t", queries, Limits.MAX_TOP_K_QUERIES, Limits.MAX_TOP_K, false,
        Metric.DOT, PackedKeys.of(new String[0]));
    long allocated = mx.getThreadAllocatedBytes(Thread.currentThread().getId()) - before;
    assertEquals(3, hits.counts()[0]);
    // it was 4,096 x 10,000 x (4 + 4) bytes = 328 MB before k was clamped to the rows
    assertTrue(allocated < 16L << 20, "allocated " + allocated + " bytes");
  }

  @Test
  void topK_tooManyHits_isResourceExhausted() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableStore t = engine.create(TableConfigs.builder("t", 4).build());
    Fixtures.rows(t, keys(2_000));
    float[] queries = new float[Limits.MAX_TOP_K_QUERIES * 4];
    Fixtures.assertError(ErrorCode.RESOURCE_EXHAUSTED, "hits on this shard exceed",
        () -> engine.topK("t", queries, Limits.MAX_TOP_K_QUERIES, Limits.MAX_TOP_K, false,
            Metric.DOT, PackedKeys.of(new String[0])));
  }
}
