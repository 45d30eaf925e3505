package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import com.google.protobuf.Descriptors;
import com.google.protobuf.Message;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.logging.Logger;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Who may call what (docs/design/0009-security.md). Two roles: <b>trainer</b> (find,
 * findOrInsert, applyGradients, read, write, sample, topK, describe, stats) and <b>admin</b>
 * (everything, including create, drop, save and restore). A caller is known by its TLS client
 * certificate (verified by the server's client CA; its subject CN is in {@code --admin-clients}:
 * admin, otherwise trainer) or by a bearer token ({@code authorization: Bearer T}) listed in the
 * tokens file with its role. Unknown callers are UNAUTHENTICATED, trainers calling admin methods
 * PERMISSION_DENIED; every admin call is written to the log with who made it, from where, on
 * which table.
 */
public final class AccessControl implements ServerInterceptor {
  private static final Logger audit = Logger.getLogger("dynembed.audit");
  static final Set<String> ADMIN_METHODS = Set.of("CreateTable", "DropTable", "GrowTable", "Save", "Restore",
      "Evict", "BuildIndex", "SetSlotMap", "ExportSlots", "ImportSlots", "CommitSlots",
      "DropUnowned", "Follow"); // Follow: a follower streams the whole log
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  enum Role { TRAINER, ADMIN }

  private final Set<String> adminNames;
  private final Map<String, Role> tokens;
  private final int shard;

  /**
   * @param adminNames certificate subject CNs with the admin role
   * @param tokens bearer token to role
   */
  public AccessControl(Set<String> adminNames, Map<String, Role> tokens, int shard) {
    this.adminNames = Set.copyOf(adminNames);
    this.tokens = Map.copyOf(tokens);
    this.shard = shard;
  }

  /**
   * Reads a tokens file: one {@code ROLE TOKEN} per line ({@code trainer} or {@code admin}),
   * {@code #} comments; tokens of at least 16 characters.
   */
  public static Map<String, Role> readTokens(Path file) throws IOException {
    Map<String, Role> out = new HashMap<>();
    int n = 0;
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      n++;
      String t = line.strip();
      if (t.isEmpty() || t.startsWith("#")) {
        continue;
      }
      String[] p = t.split("\\s+");
      if (p.length != 2 || !(p[0].equals("trainer") || p[0].equals("admin"))) {
        throw new IllegalArgumentException(String.format("%s line %d: expected 'trainer TOKEN' or"
            + " 'admin TOKEN'", file.getFileName(), n));
      }
      if (p[1].length() < 16) {
        throw new IllegalArgumentException(String.format("%s line %d: a token must have at least"
            + " 16 characters", file.getFileName(), n));
      }
      out.put(p[1], Role.valueOf(p[0].toUpperCase(java.util.Locale.ROOT)));
    }
    return out;
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
      ServerCallHandler<Q, R> next) {
    String method = call.getMethodDescriptor().getBareMethodName();
    String auth = headers.get(AUTHORIZATION);
    Caller caller;
    try {
      caller = identify(auth != null && auth.startsWith("Bearer ") ? auth.substring(7) : null,
          call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
    } catch (dev.dynembed.table.common.TableException e) {
      return refuse(call, Status.UNAUTHENTICATED.withDescription(e.getMessage()));
    }
    String who = caller.who();
    Role role = caller.role();
    boolean admin = ADMIN_METHODS.contains(method);
    if (admin && role != Role.ADMIN) {
      audit.warning(String.format("shard %d: refused %s by %s from %s (needs admin)", shard,
          method, who, call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR)));
      return refuse(call, Status.PERMISSION_DENIED.withDescription(method + " needs the admin"
          + " role; the caller (" + who + ") is a trainer"));
    }
    ServerCall.Listener<Q> listener = next.startCall(call, headers);
    if (!admin) {
      return listener;
    }
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(listener) {
      @Override
      public void onMessage(Q message) {
        audit.info(String.format("shard %d: %s of table '%s' by %s from %s", shard, method,
            tableOf(message), who, call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR)));
        super.onMessage(message);
      }
    };
  }

  /** A caller known by its token or certificate, and its role. */
  record Caller(String who, Role role) {}

  /**
   * Who a caller is: by bearer token if it sent one (an unknown token is refused even with a
   * certificate), else by its verified TLS client certificate.
   *
   * @param token the bearer token, or null
   * @throws dev.dynembed.table.common.TableException UNAUTHENTICATED, naming why
   */
  Caller identify(String token, SSLSession session) {
    if (token != null) {
      byte[] given = token.getBytes(StandardCharsets.UTF_8);
      Role role = null;
      for (Map.Entry<String, Role> e : tokens.entrySet()) { // constant time per token
        if (MessageDigest.isEqual(given, e.getKey().getBytes(StandardCharsets.UTF_8))) {
          role = e.getValue();
        }
      }
      if (role == null) {
        throw new dev.dynembed.table.common.TableException(
            dev.dynembed.table.common.ErrorCode.UNAUTHENTICATED,
            "shard " + shard + ": the bearer token is not known");
      }
      return new Caller("token " + role.name().toLowerCase(java.util.Locale.ROOT), role);
    }
    String cn = clientCn(session);
    if (cn == null) {
      throw new dev.dynembed.table.common.TableException(
          dev.dynembed.table.common.ErrorCode.UNAUTHENTICATED, "shard " + shard + " requires"
          + " a client certificate or a bearer token");
    }
    return new Caller("certificate CN=" + cn, adminNames.contains(cn) ? Role.ADMIN : Role.TRAINER);
  }

  private static <Q, R> ServerCall.Listener<Q> refuse(ServerCall<Q, R> call, Status s) {
    call.close(s, new Metadata());
    return new ServerCall.Listener<>() {};
  }

  /** The subject CN of a verified client certificate, or null. */
  static String clientCn(SSLSession session) {
    if (session == null) {
      return null;
    }
    try {
      Certificate[] chain = session.getPeerCertificates();
      if (chain.length == 0 || !(chain[0] instanceof X509Certificate c)) {
        return null;
      }
      for (Rdn rdn : new LdapName(c.getSubjectX500Principal().getName()).getRdns()) {
        if (rdn.getType().equalsIgnoreCase("CN")) {
          return rdn.getValue().toString();
        }
      }
      return null;
    } catch (SSLPeerUnverifiedException | javax.naming.InvalidNameException e) {
      return null;
    }
  }

  /** The table a request names ({@code table}, or {@code config.name} for create). */
  private static String tableOf(Object message) {
    if (!(message instanceof Message m)) {
      return "?";
    }
    Descriptors.FieldDescriptor f = m.getDescriptorForType().findFieldByName("table");
    if (f != null) {
      return String.valueOf(m.getField(f));
    }
    Descriptors.FieldDescriptor c = m.getDescriptorForType().findFieldByName("config");
    if (c != null && m.getField(c) instanceof Message config) {
      Descriptors.FieldDescriptor name = config.getDescriptorForType().findFieldByName("name");
      return name == null ? "?" : String.valueOf(config.getField(name));
    }
    return "?";
  }
}
