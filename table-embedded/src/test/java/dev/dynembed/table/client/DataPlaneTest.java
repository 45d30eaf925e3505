package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.dataplane.DataPlaneFrames;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.AccessControl;
import dev.dynembed.table.server.ShardMetrics;
import dev.dynembed.table.server.TableServer;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The native data plane (docs/design/0015-data-plane.md): the same results as gRPC and as the
 * in-process table, a shard without one reached through gRPC, and frames that break the
 * protocol refused with a named error while the shard keeps serving.
 */
@Timeout(120)
class DataPlaneTest {
  @TempDir Path dir;

  private static ClientOptions options(ClientOptions.DataPlane dp) {
    return ClientOptions.builder().dataPlane(dp).deadline(Duration.ofSeconds(20))
        .retryFor(Duration.ZERO).build();
  }

  private static float[] trainAndRead(TableClient c, String table) {
    EmbeddingTable t = c.createTable(ShardedTableTest.config(TableConfigs.adagrad(0.1f, 0f, 0f))
        .toBuilder().setName(table).build());
    ShardedTableTest.train(t, 11, 30);
    String[] probe = ShardedTableTest.batch(new java.util.Random(3), 500);
    return t.find(probe).rows();
  }

  @Test
  void training_onNativeAndGrpc_matchesInProcessBitForBit() throws Exception {
    float[] local;
    try (TableClient c = TableClients.inProcess()) {
      local = trainAndRead(c, "emb");
    }
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir)) {
      float[] nativeRows;
      float[] grpcRows;
      try (TableClient c = TableClients.connect(cluster.endpoints,
          options(ClientOptions.DataPlane.NATIVE))) {
        nativeRows = trainAndRead(c, "native");
      }
      try (TableClient c = TableClients.connect(cluster.endpoints,
          options(ClientOptions.DataPlane.GRPC))) {
        grpcRows = trainAndRead(c, "grpc");
      }
      assertArrayEquals(local, nativeRows);
      assertArrayEquals(local, grpcRows);
    }
  }

  /**
   * TopK on the data plane (issue 32): the same answers as through gRPC, for a search of the
   * index (answered on the event loop) and a scan (on the server's pool, the frame held until
   * it is answered); a failure comes back by name and the connection keeps serving.
   */
  @Test
  void topK_onTheDataPlane_answersAsGrpc_searchesAndScans() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient n = TableClients.connect(cluster.endpoints,
            options(ClientOptions.DataPlane.NATIVE));
        TableClient g = TableClients.connect(cluster.endpoints,
            options(ClientOptions.DataPlane.GRPC))) {
      EmbeddingTable t = n.createTable(TableConfigs.builder("knn", 8).build());
      String[] keys = new String[3_000];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "k" + i;
      }
      t.findOrInsert(keys);
      t.buildIndex(dev.dynembed.table.v1.Metric.COSINE, false, 16, 100, true);
      EmbeddingTable viaGrpc = g.openTable("knn");
      java.util.Random r = new java.util.Random(5);
      float[] qs = new float[20 * 8];
      for (int i = 0; i < qs.length; i++) {
        qs[i] = (float) r.nextGaussian();
      }
      for (TopKOptions o : List.of(TopKOptions.COSINE, TopKOptions.COSINE.approximate(50),
          TopKOptions.DOT.excluding(List.of("k1", "k2")))) {
        TopKResult a = t.topK(qs, 20, 10, o);
        TopKResult b = viaGrpc.topK(qs, 20, 10, o);
        assertEquals(o.searchBreadth() > 0 ? 2 : 0, a.approximateShards(), o.toString());
        for (int q = 0; q < 20; q++) {
          assertArrayEquals(b.keys()[q], a.keys()[q], o + ", query " + q);
          assertArrayEquals(b.scores()[q], a.scores()[q], 0f, o + ", query " + q);
        }
      }
      EmbeddingTable gone = n.createTable(TableConfigs.builder("gone", 8).build());
      g.dropTable("gone"); // behind the native client's back: the shards answer NOT_FOUND
      TableException e = assertThrows(TableException.class,
          () -> gone.topK(qs, 20, 10, TopKOptions.COSINE));
      assertEquals(ErrorCode.NOT_FOUND, e.code(), e.getMessage());
      assertTrue(e.getMessage().contains("gone"), e.getMessage());
      assertEquals(10, t.topK(qs, 20, 10, TopKOptions.COSINE).keys()[0].length); // still serving
    }
  }

  @Test
  void fsyncAlways_callsRunOffTheEventLoop_onFramesHeldUntilAnswered() throws Exception {
    float[] local;
    try (TableClient c = TableClients.inProcess()) {
      local = trainAndRead(c, "emb");
    }
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("always"));
    dev.dynembed.table.engine.ShardState state = dev.dynembed.table.engine.ShardState.recover(
        engine, dir.resolve("always/state"), dev.dynembed.table.engine.ShardLog.Fsync.ALWAYS,
        1L << 40, e -> { });
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2);
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()),
            options(ClientOptions.DataPlane.NATIVE))) {
      assertTrue(server.dataPort() > 0);
      // requests alias their frames' memory; off the loop the frame must outlive the call
      assertArrayEquals(local, trainAndRead(c, "emb"));
    } finally {
      state.close();
    }
  }

  @Test
  void dataCalls_goOverTheDataPlane_countedInTheShardsMetrics() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("metrics"));
    ShardMetrics metrics = new ShardMetrics(engine);
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(metrics), null);
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()),
            options(ClientOptions.DataPlane.NATIVE))) {
      assertTrue(server.dataPort() > 0);
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      t.findOrInsert("a", "b");
      t.applyGradients(new String[] {"a"}, new float[4], 0f, 1);
      t.topK(new float[] {1, 0, 0, 0}, 1, 1, TopKOptions.COSINE);
      String text = metrics.scrape();
      assertTrue(text.contains("method=\"Read\",shard=\"0\",transport=\"native\""), text);
      assertTrue(text.contains("method=\"Write\",shard=\"0\",transport=\"native\""), text);
      assertTrue(text.contains("method=\"TopK\",shard=\"0\",transport=\"native\""), text);
      assertTrue(!text.contains("method=\"TopK\",shard=\"0\",transport=\"grpc\""), text);
      assertTrue(!text.contains("method=\"Read\",shard=\"0\",transport=\"grpc\""), text);
      assertTrue(text.contains("method=\"CreateTable\",shard=\"0\",transport=\"grpc\""),
          text);
    } finally {
      metrics.close();
    }
  }

  @Test
  void shardWithoutDataPlane_isReachedThroughGrpc() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("no-dp"));
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(), null, -1);
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()),
            options(ClientOptions.DataPlane.NATIVE))) {
      assertEquals(-1, server.dataPort());
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      float[] rows = t.findOrInsert("a", "b");
      assertArrayEquals(rows, t.find("a", "b").rows());
    }
  }

  // ------------------------------------------------------------------ the wire, by hand

  /** A frame as read off the socket. */
  private record Reply(byte kind, long call, byte[] body) {
    String error() {
      int n = body[0];
      return new String(body, 1, n, StandardCharsets.US_ASCII) + ": "
          + new String(body, 1 + n, body.length - 1 - n, StandardCharsets.UTF_8);
    }
  }

  private static void send(DataOutputStream out, byte kind, long call, byte[] body)
      throws IOException {
    out.writeInt(12 + body.length);
    out.writeByte(kind);
    out.writeByte(0);
    out.writeShort(0);
    out.writeLong(call);
    out.write(body);
    out.flush();
  }

  private static byte[] hello(int version, String token) {
    byte[] t = token == null ? new byte[0] : token.getBytes(StandardCharsets.UTF_8);
    byte[] b = new byte[4 + t.length];
    b[0] = (byte) (version >>> 8);
    b[1] = (byte) version;
    b[2] = (byte) (t.length >>> 8);
    b[3] = (byte) t.length;
    System.arraycopy(t, 0, b, 4, t.length);
    return b;
  }

  private static Reply receive(DataInputStream in) throws IOException {
    int len = in.readInt();
    byte kind = in.readByte();
    in.skipBytes(3);
    long call = in.readLong();
    byte[] body = new byte[len - 12];
    in.readFully(body);
    return new Reply(kind, call, body);
  }

  private static void assertClosed(DataInputStream in) {
    assertThrows(IOException.class, () -> {
      while (true) {
        in.readByte(); // EOF (or a reset) once the shard closed the connection
      }
    });
  }

  private static byte[] findRequest(String table, String... keys) {
    return ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setFind(FindRequest
        .newBuilder().setTable(table).setKeys(PackedKeys.of(keys).toProto()))).build()
        .toByteArray();
  }

  @Test
  void framesThatBreakTheProtocol_areRefusedByName_andTheShardKeepsServing() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(1, dir);
        TableClient c = TableClients.connect(cluster.endpoints,
            options(ClientOptions.DataPlane.NATIVE))) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      float[] rows = t.findOrInsert("a", "b");
      int port = cluster.servers.get(0).dataPort();
      List<String> errors = new ArrayList<>();

      try (Socket s = new Socket("127.0.0.1", port)) { // a call before HELLO
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        DataInputStream in = new DataInputStream(s.getInputStream());
        send(out, DataPlaneFrames.READ, 7, findRequest("emb", "a"));
        Reply r = receive(in);
        assertEquals(DataPlaneFrames.ERROR, r.kind());
        errors.add(r.error());
        assertTrue(r.error().startsWith("UNAUTHENTICATED: shard 0: a data-plane connection starts"
            + " with HELLO"), r.error());
        assertClosed(in);
      }
      try (Socket s = new Socket("127.0.0.1", port)) { // another version
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        DataInputStream in = new DataInputStream(s.getInputStream());
        send(out, DataPlaneFrames.HELLO, 0, hello(99, null));
        Reply r = receive(in);
        assertTrue(r.error().startsWith("FAILED_PRECONDITION: shard 0 speaks data-plane version "
            + DataPlaneFrames.VERSION + ", the client 99"), r.error());
        assertClosed(in);
      }
      try (Socket s = new Socket("127.0.0.1", port)) { // garbage, a bad kind, a huge frame
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        DataInputStream in = new DataInputStream(s.getInputStream());
        send(out, DataPlaneFrames.HELLO, 0, hello(DataPlaneFrames.VERSION, null));
        assertEquals(DataPlaneFrames.HELLO_OK, receive(in).kind());
        send(out, DataPlaneFrames.READ, 1, new byte[] {(byte) 0xFF, 0x01, 0x02});
        Reply bad = receive(in);
        assertEquals(1, bad.call());
        assertTrue(bad.error().startsWith("INVALID_ARGUMENT: data plane: a READ frame is not a"
            + " valid message"), bad.error());
        send(out, DataPlaneFrames.TOPK, 9, new byte[] {(byte) 0xFF, 0x01, 0x02});
        Reply badTopK = receive(in);
        assertEquals(9, badTopK.call());
        assertTrue(badTopK.error().startsWith("INVALID_ARGUMENT: data plane: a TOPK frame is not"
            + " a valid message"), badTopK.error());
        send(out, DataPlaneFrames.READ, 2, findRequest("emb", "a", "b")); // still open
        Reply ok = receive(in);
        assertEquals(DataPlaneFrames.READ_OK, ok.kind());
        assertEquals(2, ok.call());
        ReadResponse resp = ReadResponse.parseFrom(ok.body());
        assertEquals(8 * 4, resp.getResults(0).getRows().getRows().size());
        send(out, DataPlaneFrames.READ, 3, findRequest("missing", "a"));
        assertTrue(receive(in).error().startsWith("NOT_FOUND"));
        send(out, (byte) 0x55, 4, new byte[0]);
        assertTrue(receive(in).error().startsWith("INVALID_ARGUMENT: shard 0: a client may send"
            + " READ, WRITE or TOPK frames, not unknown kind 85"));
        assertClosed(in);
      }
      try (Socket s = new Socket("127.0.0.1", port)) {
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        DataInputStream in = new DataInputStream(s.getInputStream());
        send(out, DataPlaneFrames.HELLO, 0, hello(DataPlaneFrames.VERSION, null));
        assertEquals(DataPlaneFrames.HELLO_OK, receive(in).kind());
        out.writeInt(Integer.MAX_VALUE); // a length past the limit: refused before any is read
        out.flush();
        Reply r = receive(in);
        assertTrue(r.error().startsWith("RESOURCE_EXHAUSTED: data plane:"), r.error());
        assertClosed(in);
      }
      // the shard still serves the real client, rows unchanged
      assertArrayEquals(rows, t.find("a", "b").rows());
    }
  }

  @Test
  void bearerTokens_areCheckedOnTheDataPlane() throws Exception {
    Path tokens = dir.resolve("tokens");
    Files.writeString(tokens, "trainer tr-0123456789abcdef\nadmin ad-0123456789abcdef\n");
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("data-tokens"));
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(
        new AccessControl(Set.of(), AccessControl.readTokens(tokens), 0)), null)) {
      String endpoint = "127.0.0.1:" + server.port();
      try (TableClient a = TableClients.connect(List.of(endpoint), ClientOptions.builder()
          .bearerToken("ad-0123456789abcdef").build())) {
        a.createTable(TableConfigs.builder("emb", 4).build());
      }
      try (TableClient t = TableClients.connect(List.of(endpoint), ClientOptions.builder()
          .bearerToken("tr-0123456789abcdef").build())) {
        EmbeddingTable e = t.openTable("emb");
        float[] rows = e.findOrInsert("x");
        e.applyGradients(new String[] {"x"}, new float[] {1, 1, 1, 1}, 0f, 1);
        assertEquals(rows.length, e.find("x").rows().length);
      }
      for (String token : new String[] {null, "xx-0123456789abcdef"}) {
        try (Socket s = new Socket("127.0.0.1", server.dataPort())) {
          DataOutputStream out = new DataOutputStream(s.getOutputStream());
          DataInputStream in = new DataInputStream(s.getInputStream());
          send(out, DataPlaneFrames.HELLO, 0, hello(DataPlaneFrames.VERSION, token));
          Reply r = receive(in);
          assertEquals(DataPlaneFrames.ERROR, r.kind());
          assertTrue(r.error().startsWith("UNAUTHENTICATED: shard 0"), r.error());
          assertTrue(r.error().contains(token == null ? "requires a client certificate or a"
              + " bearer token" : "bearer token is not known"), r.error());
          assertClosed(in);
        }
      }
      assertEquals(1, engine.get("emb").size());
    }
  }

  @Test
  void unreachableDataPlane_isShardUnavailable_afterTheResendWindow() throws Exception {
    LoopbackCluster cluster = new LoopbackCluster(1, dir);
    TableClient c = TableClients.connect(cluster.endpoints, ClientOptions.builder()
        .retryFor(Duration.ofSeconds(1)).deadline(Duration.ofSeconds(5)).build());
    try {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      t.findOrInsert("a");
      cluster.close(); // both ports gone
      TableException e = assertThrows(TableException.class, () -> t.find("a"));
      assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
      assertTrue(e.getMessage().contains("shard 0"), e.getMessage());
    } finally {
      c.close();
    }
  }
}
