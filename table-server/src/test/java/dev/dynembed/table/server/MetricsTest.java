package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CreateTableRequest;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.WriteRequest;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The shard's HTTP probes and Prometheus metrics, scraped over HTTP from a real server. */
class MetricsTest {
  @TempDir Path dir;

  private static HttpResponse<String> get(int port, String path) throws Exception {
    return HttpClient.newHttpClient().send(HttpRequest.newBuilder(
        URI.create("http://127.0.0.1:" + port + path)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The value of the first sample line of {@code metric} whose labels contain all of {@code labels}. */
  private static double value(String text, String metric, String... labels) {
    Matcher m = Pattern.compile("(?m)^" + Pattern.quote(metric) + "\\{([^}]*)\\} (\\S+)$")
        .matcher(text);
    while (m.find()) {
      boolean all = true;
      for (String l : labels) {
        all &= m.group(1).contains(l);
      }
      if (all) {
        return Double.parseDouble(m.group(2));
      }
    }
    throw new AssertionError("no sample of " + metric + " with " + List.of(labels) + " in:\n"
        + text);
  }

  @Test
  void probesAndMetrics_reflectCallsTablesAndTheLog() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    engine.setReady(false); // as table-server does before its recovery
    try (ShardMetrics metrics = new ShardMetrics(engine);
        TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(metrics))) {
      metrics.serve("127.0.0.1", 0, server::serving);
      int port = metrics.port();
      assertEquals(200, get(port, "/live").statusCode());
      assertEquals(503, get(port, "/ready").statusCode()); // recovering: not ready, but live
      ShardState state = ShardState.recover(engine, dir.resolve("state"), ShardLog.Fsync.NO, 1L << 40, e -> {});
      server.markServing();
      assertEquals(200, get(port, "/ready").statusCode());

      ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", server.port())
          .usePlaintext().build();
      try {
        var stub = EmbeddingTableServiceGrpc.newBlockingStub(ch);
        stub.createTable(CreateTableRequest.newBuilder().setConfig(TableConfigs.builder("emb", 4)
            .setOptimizer(TableConfigs.sgd(1f)).build()).build());
        String[] keys = {"a", "b", "c"};
        for (int i = 0; i < 3; i++) {
          stub.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
              .setTable("emb").setKeys(PackedKeys.of(keys).toProto())
              .setGradients(Rows.encode(new float[12]))).build());
        }
        // a key policy's statistics: |g| = 2, frozen at its second update (mean 2 < 5)
        stub.createTable(CreateTableRequest.newBuilder().setConfig(TableConfigs.builder("pol", 4)
            .setOptimizer(TableConfigs.sgd(1f).toBuilder().setKeyPolicy(
                dev.dynembed.table.v1.KeyPolicy.newBuilder().setFreezeBelow(5f)
                    .setFreezeAfter(1))).build()).build());
        for (int i = 0; i < 2; i++) {
          stub.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
              .setTable("pol").setKeys(PackedKeys.of("a").toProto())
              .setGradients(Rows.encode(new float[] {1, 1, 1, 1}))).build());
        }
        assertThrows(StatusRuntimeException.class, () -> stub.find(
            FindRequest.newBuilder().setTable("missing").setKeys(PackedKeys.of("a").toProto())
                .build()));
      } finally {
        ch.shutdownNow();
      }
      HttpResponse<String> r = get(port, "/metrics");
      assertEquals(200, r.statusCode());
      String text = r.body();
      assertEquals(5, value(text, "dynembed_rpc_seconds_count", "method=\"Write\"",
          "code=\"OK\""));
      assertEquals(1, value(text, "dynembed_rpc_seconds_count", "method=\"Find\"",
          "code=\"NOT_FOUND\""));
      assertTrue(text.contains("dynembed_rpc_seconds_bucket{"), "latency histogram buckets");
      assertEquals(3, value(text, "dynembed_table_keys", "table=\"emb\""));
      assertEquals(9, value(text, "dynembed_table_updates", "table=\"emb\""));
      assertTrue(value(text, "dynembed_table_bytes", "table=\"emb\"") > 0);
      assertEquals(1, value(text, "dynembed_table_frozen_keys", "table=\"pol\""));
      assertEquals(2, value(text, "dynembed_table_gradient_norm_mean", "table=\"pol\""));
      assertEquals(7, value(text, "dynembed_log_last_record", "shard=\"0\"")); // 2 tables, 5 writes
      assertTrue(value(text, "dynembed_log_bytes_since_snapshot_bytes", "shard=\"0\"") > 100);
      assertEquals(1, value(text, "dynembed_ready", "shard=\"0\""));
      assertEquals(engine.bytesInUse(), value(text, "dynembed_memory_used_bytes", "shard=\"0\""));
      assertTrue(text.contains("jvm_memory_used_bytes{"), "JVM metrics");
      // what one caller may take (issue 49): the reply budget and the data plane's connections
      assertEquals(engine.replies().capacity(), value(text, "dynembed_reply_budget_bytes",
          "shard=\"0\""));
      assertEquals(0, value(text, "dynembed_reply_budget_used_bytes", "shard=\"0\""));
      assertEquals(0, value(text, "dynembed_reply_budget_refused_total", "shard=\"0\""));
      assertEquals(0, value(text, "dynembed_dataplane_connections", "state=\"before_hello\""));
      for (String reason : List.of("connection_cap", "hello_timeout", "frame_before_hello",
          "idle")) {
        assertEquals(0, value(text, "dynembed_dataplane_refused_total",
            "reason=\"" + reason + "\""), reason);
      }
      state.close();
    }
  }
}
