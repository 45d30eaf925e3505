package dev.dynembed.table.server;

import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import javax.net.ssl.KeyManager;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509KeyManager;

/**
 * The data plane's TLS from the gRPC server's credentials: the same key and trust managers
 * ({@link ServerTls}'s, whose certificates are reloaded in place), so both ports present one
 * certificate and accept the same clients.
 */
final class DataPlaneTls {
  private DataPlaneTls() {}

  /** TLS for the data plane, or null for a plaintext server. */
  static SslContext of(ServerCredentials credentials) {
    if (credentials == null) {
      return null;
    }
    if (!(credentials instanceof TlsServerCredentials tls) || tls.getKeyManagers() == null
        || tls.getKeyManagers().isEmpty()) {
      throw new IllegalArgumentException("data plane: only TLS credentials with key managers"
          + " (ServerTls) can be shared with the data plane; start it with --data-port -1");
    }
    KeyManager km = tls.getKeyManagers().get(0);
    SslContextBuilder b = SslContextBuilder.forServer(km);
    if (!(km instanceof X509KeyManager)) {
      throw new IllegalArgumentException("data plane: the key manager is not an X509KeyManager");
    }
    if (tls.getTrustManagers() != null && !tls.getTrustManagers().isEmpty()) {
      TrustManager tm = tls.getTrustManagers().get(0);
      b.trustManager(tm);
    }
    b.clientAuth(switch (tls.getClientAuth()) {
      case REQUIRE -> ClientAuth.REQUIRE;
      case OPTIONAL -> ClientAuth.OPTIONAL;
      default -> ClientAuth.NONE;
    });
    try {
      return b.build();
    } catch (SSLException e) {
      throw new IllegalArgumentException("data plane: TLS setup failed: " + e.getMessage(), e);
    }
  }
}
