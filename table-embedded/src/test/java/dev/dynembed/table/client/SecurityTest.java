package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.tools.DevCertificates;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.server.AccessControl;
import dev.dynembed.table.server.ServerTls;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Mutual TLS with roles by certificate, bearer tokens, and what unknown callers get. */
class SecurityTest {
  @TempDir static Path dir;
  static DevCertificates pki;
  static DevCertificates.Identity shard;
  static DevCertificates.Identity trainer;
  static DevCertificates.Identity admin;
  static DevCertificates.Identity stranger; // signed by another CA

  @BeforeAll
  static void certificates() throws Exception {
    pki = new DevCertificates(dir.resolve("pki"));
    shard = pki.issue("shard-0", true);
    trainer = pki.issue("trainer-1", false);
    admin = pki.issue("ops-admin", false);
    stranger = new DevCertificates(dir.resolve("other-pki")).issue("trainer-1", false);
  }

  private static ClientOptions.Builder options() {
    return ClientOptions.builder().retryFor(Duration.ZERO).deadline(Duration.ofSeconds(10));
  }

  private static TableClient connect(TableServer s, ClientOptions o) {
    return TableClients.connect(List.of("localhost:" + s.port()), o);
  }

  @Test
  void mutualTls_rolesFromCertificates() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("data-mtls"));
    try (ServerTls tls = ServerTls.load(shard.chain(), shard.key(), pki.caPem, 60);
        TableServer server = new TableServer(engine, "127.0.0.1", 0, 2,
            List.of(new AccessControl(Set.of("ops-admin"), Map.of(), 0)), tls.credentials())) {
      try (TableClient a = connect(server, options().tls(new ClientOptions.Tls(pki.caPem,
          admin.chain(), admin.key())).build())) {
        a.createTable(TableConfigs.builder("emb", 4).build()); // admin: allowed
      }
      try (TableClient t = connect(server, options().tls(new ClientOptions.Tls(pki.caPem,
          trainer.chain(), trainer.key())).build())) {
        EmbeddingTable emb = t.openTable("emb");
        assertEquals(8, emb.findOrInsert("a", "b").length); // trainer: data calls allowed
        TableException e = assertThrows(TableException.class, () -> t.dropTable("emb"));
        assertEquals(ErrorCode.PERMISSION_DENIED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("DropTable needs the admin role"), e.getMessage());
        assertEquals(1, engine.tables().size());
        e = assertThrows(TableException.class, () -> emb.remove("a")); // evicting deletes rows
        assertEquals(ErrorCode.PERMISSION_DENIED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("Evict needs the admin role"), e.getMessage());
        assertEquals(2, engine.get("emb").size());
      }
      // no client certificate, or one from another CA: the handshake fails
      for (ClientOptions.Tls bad : List.of(new ClientOptions.Tls(pki.caPem, null, null),
          new ClientOptions.Tls(pki.caPem, stranger.chain(), stranger.key()))) {
        // with the default 2 minutes of resends: a handshake failure is not resent
        long t0 = System.nanoTime();
        try (TableClient c = connect(server, options().retryFor(Duration.ofMinutes(2)).tls(bad)
            .build())) {
          TableException e = assertThrows(TableException.class, () -> c.openTable("emb"));
          assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
          assertTrue(e.getMessage().contains("TLS with the shard at"), e.getMessage());
        }
        assertTrue(System.nanoTime() - t0 < 30e9, "a TLS failure was resent");
      }
      // plaintext to a TLS port
      try (TableClient c = connect(server, options().build())) {
        assertThrows(TableException.class, () -> c.openTable("emb"));
      }
    }
  }

  @Test
  void bearerTokens_roles_andUnknownCallers() throws Exception {
    Path tokens = dir.resolve("tokens");
    Files.writeString(tokens, "# role token\ntrainer tr-0123456789abcdef\nadmin "
        + "ad-0123456789abcdef\n");
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("data-tokens"));
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(
        new AccessControl(Set.of(), AccessControl.readTokens(tokens), 0)), null)) {
      try (TableClient a = connect(server, options().bearerToken("ad-0123456789abcdef").build())) {
        a.createTable(TableConfigs.builder("emb", 4).build());
      }
      try (TableClient t = connect(server, options().bearerToken("tr-0123456789abcdef").build())) {
        t.openTable("emb").findOrInsert("x");
        TableException e = assertThrows(TableException.class,
            () -> t.createTable(TableConfigs.builder("other", 4).build()));
        assertTrue(e.getMessage().contains("CreateTable needs the admin role"), e.getMessage());
      }
      for (String token : new String[] {null, "xx-0123456789abcdef"}) {
        try (TableClient c = connect(server, options().bearerToken(token).build())) {
          TableException e = assertThrows(TableException.class, () -> c.openTable("emb"));
          assertEquals(ErrorCode.UNAUTHENTICATED, e.code(), e.getMessage());
          assertTrue(e.getMessage().contains(token == null ? "requires a client certificate or a"
              + " bearer token" : "bearer token is not known"), e.getMessage());
        }
      }
      assertEquals(Set.of("emb"), Set.copyOf(engine.tables().stream().map(
          dev.dynembed.table.engine.TableStore::name).toList()));
    }
  }

  /**
   * Admin calls are audited (logger {@code dynembed.audit}): one line per call with the method,
   * the table and the caller, and one warning per refused call; a trainer's data calls are not.
   */
  @Test
  void adminCalls_andRefusedOnes_areAudited_dataCallsAreNot() throws Exception {
    Path tokens = dir.resolve("audit-tokens");
    Files.writeString(tokens, "trainer tr-0123456789abcdef\nadmin ad-0123456789abcdef\n");
    List<java.util.logging.LogRecord> lines =
        java.util.Collections.synchronizedList(new java.util.ArrayList<>());
    java.util.logging.Handler h = new java.util.logging.Handler() {
      @Override
      public void publish(java.util.logging.LogRecord r) {
        lines.add(r);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    java.util.logging.Logger audit = java.util.logging.Logger.getLogger("dynembed.audit");
    audit.addHandler(h);
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("data-audit"));
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(
        new AccessControl(Set.of(), AccessControl.readTokens(tokens), 0)), null)) {
      try (TableClient a = connect(server, options().bearerToken("ad-0123456789abcdef").build())) {
        a.createTable(TableConfigs.builder("audited", 4).build());
      }
      try (TableClient t = connect(server, options().bearerToken("tr-0123456789abcdef").build())) {
        t.openTable("audited").findOrInsert("x", "y");
        assertThrows(TableException.class, () -> t.dropTable("audited"));
      }
    } finally {
      audit.removeHandler(h);
    }
    List<String> text = lines.stream().map(java.util.logging.LogRecord::getMessage).toList();
    assertEquals(1, text.stream().filter(l -> l.contains("CreateTable of table 'audited'")
        && l.contains("admin")).count(), text.toString());
    assertEquals(1, text.stream().filter(l -> l.startsWith("shard 0: refused DropTable by")
        && l.contains("trainer") && l.contains("(needs admin)")).count(), text.toString());
    assertTrue(lines.stream().filter(r -> r.getMessage().contains("refused"))
        .allMatch(r -> r.getLevel() == java.util.logging.Level.WARNING), text.toString());
    assertTrue(text.stream().noneMatch(l -> l.contains("Read") || l.contains("FindOrInsert")),
        "data calls are not audited: " + text);
    assertEquals(2, text.size(), text.toString());
  }

  @Test
  void renewedServerCertificate_isServedWithoutARestart() throws Exception {
    Path cert = dir.resolve("live.pem");
    Path key = dir.resolve("live.key");
    Files.copy(shard.chain(), cert);
    Files.copy(shard.key(), key);
    ShardEngine engine = new ShardEngine(0, 1, dir.resolve("data-reload"));
    try (ServerTls tls = ServerTls.load(cert, key, null, 1);
        TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(),
            tls.credentials())) {
      assertEquals("shard-0", serverCn(server.port()));
      DevCertificates.Identity renewed = pki.issue("shard-0-renewed", true);
      Files.copy(renewed.key(), key, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      Files.copy(renewed.chain(), cert, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      String cn = null;
      for (int i = 0; i < 100 && !"shard-0-renewed".equals(cn); i++) {
        Thread.sleep(100);
        cn = serverCn(server.port());
      }
      assertEquals("shard-0-renewed", cn); // a new connection gets the renewed certificate
    }
  }

  /** The CN of the certificate the server presents to a new connection. */
  private static String serverCn(int port) throws Exception {
    java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
    ks.load(null, null);
    try (java.io.InputStream in = Files.newInputStream(pki.caPem)) {
      ks.setCertificateEntry("ca", java.security.cert.CertificateFactory.getInstance("X.509")
          .generateCertificate(in));
    }
    javax.net.ssl.TrustManagerFactory tmf = javax.net.ssl.TrustManagerFactory.getInstance(
        javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ks);
    javax.net.ssl.X509TrustManager ca = (javax.net.ssl.X509TrustManager) tmf.getTrustManagers()[0];
    String[] seen = new String[1];
    javax.net.ssl.X509TrustManager recording = new javax.net.ssl.X509TrustManager() {
      @Override
      public void checkClientTrusted(java.security.cert.X509Certificate[] c, String a)
          throws java.security.cert.CertificateException {
        ca.checkClientTrusted(c, a);
      }

      @Override
      public void checkServerTrusted(java.security.cert.X509Certificate[] c, String a)
          throws java.security.cert.CertificateException {
        seen[0] = c[0].getSubjectX500Principal().getName().replaceFirst("^CN=", "");
        ca.checkServerTrusted(c, a);
      }

      @Override
      public java.security.cert.X509Certificate[] getAcceptedIssuers() {
        return ca.getAcceptedIssuers();
      }
    };
    io.grpc.ManagedChannel ch = io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder.forTarget(
        "localhost:" + port, io.grpc.TlsChannelCredentials.newBuilder().trustManager(recording)
            .build()).build();
    try {
      io.grpc.health.v1.HealthGrpc.newBlockingStub(ch).withDeadlineAfter(5,
          java.util.concurrent.TimeUnit.SECONDS).check(
          io.grpc.health.v1.HealthCheckRequest.getDefaultInstance());
    } finally {
      ch.shutdownNow();
    }
    return seen[0];
  }

  @Test
  void tokensFile_withABadLine_isRefusedWithItsLineNumber() throws Exception {
    Path tokens = dir.resolve("bad-tokens");
    Files.writeString(tokens, "trainer tr-0123456789abcdef\nroot short\n");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> AccessControl.readTokens(tokens));
    assertTrue(e.getMessage().contains("line 2"), e.getMessage());
  }
}
