package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
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
  private static final java.util.logging.Logger log =
      java.util.logging.Logger.getLogger(ServerTls.class.getName());
  private final ServerCredentials credentials;
  private final ScheduledExecutorService reloader;

  private ServerTls(ServerCredentials credentials, ScheduledExecutorService reloader) {
    this.credentials = credentials;
    this.reloader = reloader;
  }

  /**
   * @param clientCa PEM of the CA that signs client certificates, or null for TLS without
   *     client certificates
   * @param reloadSeconds how often the files' modification times are checked (grpc-util's own
   *     watcher would not check more often than once a minute)
   */
  public static ServerTls load(Path certChain, Path key, Path clientCa, long reloadSeconds)
      throws IOException, GeneralSecurityException {
    if (reloadSeconds < 1) {
      throw new IllegalArgumentException("reloadSeconds must be >= 1 but was " + reloadSeconds);
    }
    AdvancedTlsX509KeyManager km = new AdvancedTlsX509KeyManager();
    km.updateIdentityCredentials(certChain.toFile(), key.toFile());
    TlsServerCredentials.Builder b = TlsServerCredentials.newBuilder().keyManager(km);
    AdvancedTlsX509TrustManager tm = null;
    if (clientCa != null) {
      tm = AdvancedTlsX509TrustManager.newBuilder()
          .setVerification(AdvancedTlsX509TrustManager.Verification.CERTIFICATE_ONLY_VERIFICATION)
          .build();
      tm.updateTrustCredentials(clientCa.toFile());
      b.trustManager(tm).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
    }
    ScheduledExecutorService reloader = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "tls-reload");
      t.setDaemon(true);
      return t;
    });
    AdvancedTlsX509TrustManager trust = tm;
    long[] seen = {stamp(certChain, key, clientCa)};
    reloader.scheduleWithFixedDelay(() -> {
      long now = stamp(certChain, key, clientCa);
      if (now == seen[0]) {
        return;
      }
      try {
        km.updateIdentityCredentials(certChain.toFile(), key.toFile());
        if (trust != null) {
          trust.updateTrustCredentials(clientCa.toFile());
        }
        seen[0] = now;
        log.info("reloaded the TLS certificate files");
      } catch (IOException | GeneralSecurityException | RuntimeException e) {
        // a half-copied pair (key and certificate do not match yet): the next check retries
        log.warning("reloading the TLS certificate files failed (kept the previous ones): " + e);
      }
    }, reloadSeconds, reloadSeconds, TimeUnit.SECONDS);
    return new ServerTls(b.build(), reloader);
  }

  /** A fingerprint of the files' modification times and sizes. */
  private static long stamp(Path... files) {
    long h = 17;
    for (Path p : files) {
      if (p != null) {
        java.io.File f = p.toFile();
        h = h * 31 + f.lastModified();
        h = h * 31 + f.length();
      }
    }
    return h;
  }

  public ServerCredentials credentials() {
    return credentials;
  }

  @Override
  public void close() {
    reloader.shutdownNow();
  }
}
