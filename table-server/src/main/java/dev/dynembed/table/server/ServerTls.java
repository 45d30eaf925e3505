package dev.dynembed.table.server;

import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.util.AdvancedTlsX509KeyManager;
import io.grpc.util.AdvancedTlsX509TrustManager;
import java.io.IOException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A shard's TLS credentials with grpc-java's own TLS (docs/design/0009-security.md): its
 * certificate chain and key (PEM), and with a client CA, mutual TLS (every client must present a
 * certificate that CA signed). The files are re-read every {@code reloadSeconds}: renewed
 * certificates take effect for new connections without a restart.
 */
public final class ServerTls implements AutoCloseable {
  private final ServerCredentials credentials;
  private final ScheduledExecutorService reloader;
  private final AdvancedTlsX509KeyManager.Closeable keyWatch;
  private final AdvancedTlsX509TrustManager.Closeable trustWatch;

  private ServerTls(ServerCredentials credentials, ScheduledExecutorService reloader,
      AdvancedTlsX509KeyManager.Closeable keyWatch, AdvancedTlsX509TrustManager.Closeable trustWatch) {
    this.credentials = credentials;
    this.reloader = reloader;
    this.keyWatch = keyWatch;
    this.trustWatch = trustWatch;
  }

  /**
   * @param clientCa PEM of the CA that signs client certificates, or null for TLS without
   *     client certificates
   */
  public static ServerTls load(Path certChain, Path key, Path clientCa, long reloadSeconds)
      throws IOException, GeneralSecurityException {
    ScheduledExecutorService reloader = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "tls-reload");
      t.setDaemon(true);
      return t;
    });
    try {
      AdvancedTlsX509KeyManager km = new AdvancedTlsX509KeyManager();
      AdvancedTlsX509KeyManager.Closeable keyWatch = km.updateIdentityCredentials(
          certChain.toFile(), key.toFile(), reloadSeconds, TimeUnit.SECONDS, reloader);
      TlsServerCredentials.Builder b = TlsServerCredentials.newBuilder().keyManager(km);
      AdvancedTlsX509TrustManager.Closeable trustWatch = null;
      if (clientCa != null) {
        AdvancedTlsX509TrustManager tm = AdvancedTlsX509TrustManager.newBuilder()
            .setVerification(AdvancedTlsX509TrustManager.Verification.CERTIFICATE_ONLY_VERIFICATION)
            .build();
        trustWatch = tm.updateTrustCredentials(clientCa.toFile(), reloadSeconds,
            TimeUnit.SECONDS, reloader);
        b.trustManager(tm).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
      }
      return new ServerTls(b.build(), reloader, keyWatch, trustWatch);
    } catch (IOException | GeneralSecurityException | RuntimeException e) {
      reloader.shutdownNow();
      throw e;
    }
  }

  public ServerCredentials credentials() {
    return credentials;
  }

  @Override
  public void close() {
    keyWatch.close();
    if (trustWatch != null) {
      trustWatch.close();
    }
    reloader.shutdownNow();
  }
}
