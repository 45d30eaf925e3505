package dev.dynembed.table.client;

import dev.dynembed.table.common.Rows;
import dev.dynembed.table.v1.RowEncoding;
import io.grpc.ClientInterceptor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Options of the sharded gRPC client, immutable; {@link #builder()} documents each default:
 *
 * <ul>
 *   <li>deadline 30 s per data call, 10 min for save/restore;
 *   <li>calls resent for up to 2 min while a shard is UNAVAILABLE (down, restarting,
 *       recovering) or, for calls safe to resend, past their deadline (backoff 50 ms .. 1 s);
 *   <li>rows of lookups and samples as FLOAT32 (BFLOAT16 or FLOAT16 halve their bytes:
 *       docs/design/0007-pipelined-steps.md);
 *   <li>no extra client interceptors;
 *   <li>Read and Write calls on the shards' native data plane ({@link DataPlane});
 *   <li>plaintext and no credentials ({@link Builder#tls}, {@link Builder#bearerToken} for
 *       shards that require them: docs/design/0009-security.md).
 * </ul>
 */
public final class ClientOptions {
  public static final ClientOptions DEFAULTS = builder().build();

  private final Duration deadline;
  private final Duration checkpointDeadline;
  private final Duration indexBuildDeadline;
  private final Duration retryFor;
  private final RowEncoding rowEncoding;
  private final List<ClientInterceptor> interceptors;
  private final Tls tls;
  private final String bearerToken;
  private final DataPlane dataPlane;
  private final RowCaching rowCache;

  /**
   * How a shard's Read and Write calls (a training step's lookups and gradients) travel: on the
   * shard's native data plane (binary frames on one TCP connection, docs/design/0015-data-plane.md;
   * a shard that has none is reached through gRPC) or on gRPC with every other call.
   */
  public enum DataPlane { NATIVE, GRPC }

  /**
   * A trainer-side cache of hot rows (docs/design/0022-row-cache.md): per table at most {@code
   * bytes} of rows and optimizer slots, served while at most {@code maxStaleness} steps old (a
   * step: one gradient batch of the table from this client), its own gradients applied at once
   * and sent every {@code maxStaleness} steps. {@link #OFF} (either value 0): no cache, every
   * read and gradient goes to the shards.
   */
  public record RowCaching(long bytes, int maxStaleness) {
    public static final RowCaching OFF = new RowCaching(0, 0);

    public RowCaching {
      if (bytes < 0 || maxStaleness < 0) {
        throw new IllegalArgumentException("row cache: size and max staleness must be >= 0 but"
            + " were " + bytes + " bytes and " + maxStaleness + " steps");
      }
    }

    /** Whether caching is on: a size and a staleness above 0 (S = 0 is no cache at all). */
    public boolean on() {
      return bytes > 0 && maxStaleness > 0;
    }
  }

  /**
   * TLS towards the shards: the CA (PEM) that signs their certificates, and for mutual TLS this
   * client's certificate chain and PKCS#8 key (PEM; both null without).
   */
  public record Tls(Path ca, Path cert, Path key) {}

  private ClientOptions(Builder b) {
    this.tls = b.tls;
    this.bearerToken = b.bearerToken;
    this.dataPlane = b.dataPlane;
    this.deadline = b.deadline;
    this.checkpointDeadline = b.checkpointDeadline;
    this.indexBuildDeadline = b.indexBuildDeadline;
    this.retryFor = b.retryFor;
    this.rowEncoding = b.rowEncoding;
    this.interceptors = List.copyOf(b.interceptors);
    this.rowCache = b.rowCache;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding these options. */
  public Builder toBuilder() {
    return new Builder().deadline(deadline).checkpointDeadline(checkpointDeadline)
        .indexBuildDeadline(indexBuildDeadline).retryFor(retryFor).rowEncoding(rowEncoding)
        .interceptors(interceptors).tls(tls).bearerToken(bearerToken).dataPlane(dataPlane)
        .rowCache(rowCache);
  }

  /** The trainer-side row cache of the tables this client opens ({@link RowCaching#OFF}). */
  public RowCaching rowCache() {
    return rowCache;
  }

  /** The transport of Read and Write calls. */
  public DataPlane dataPlane() {
    return dataPlane;
  }

  public Duration deadline() {
    return deadline;
  }

  public Duration checkpointDeadline() {
    return checkpointDeadline;
  }

  /** How long a {@code buildIndex} with wait waits for the shards' builds. */
  public Duration indexBuildDeadline() {
    return indexBuildDeadline;
  }

  /** How long a call is resent while its shard does not answer (0: never resent). */
  public Duration retryFor() {
    return retryFor;
  }

  public RowEncoding rowEncoding() {
    return rowEncoding;
  }

  public List<ClientInterceptor> interceptors() {
    return interceptors;
  }

  /** TLS settings, or null for plaintext. */
  public Tls tls() {
    return tls;
  }

  /** The bearer token sent with every call, or null. */
  public String bearerToken() {
    return bearerToken;
  }

  public ClientOptions withDeadline(Duration d) {
    return toBuilder().deadline(d).build();
  }

  public ClientOptions withRetryFor(Duration d) {
    return toBuilder().retryFor(d).build();
  }

  @Override
  public String toString() {
    return "ClientOptions[deadline=" + deadline + ", checkpointDeadline=" + checkpointDeadline
        + ", indexBuildDeadline=" + indexBuildDeadline + ", retryFor=" + retryFor
        + ", rowEncoding=" + rowEncoding + ", interceptors=" + interceptors.size()
        + ", dataPlane=" + dataPlane + ", rowCache=" + rowCache + "]";
  }

  /** Builds {@link ClientOptions}; every setter validates its value at once. */
  public static final class Builder {
    private Duration deadline = Duration.ofSeconds(30);
    private Duration checkpointDeadline = Duration.ofMinutes(10);
    private Duration indexBuildDeadline = Duration.ofHours(6);
    private Duration retryFor = Duration.ofMinutes(2);
    private RowEncoding rowEncoding = RowEncoding.FLOAT32;
    private List<ClientInterceptor> interceptors = List.of();
    private Tls tls;
    private String bearerToken;
    private DataPlane dataPlane = defaultDataPlane();
    private RowCaching rowCache = RowCaching.OFF;

    private Builder() {}

    /**
     * A trainer-side cache of each table's hot rows ({@link RowCaching}; default OFF): reads of
     * a row at most {@code maxStaleness} steps old and this client's own gradients stay in the
     * process; the gradients are sent every {@code maxStaleness} steps, one row per key.
     */
    public Builder rowCache(RowCaching c) {
      this.rowCache = java.util.Objects.requireNonNull(c, "rowCache");
      return this;
    }

    /**
     * The transport of Read and Write calls (default NATIVE; the system property {@code
     * dynembed.dataPlane=grpc} changes the default, e.g. to run a test suite on gRPC).
     * Interceptors see only gRPC calls: a client whose interceptors must see the data calls
     * (simulated latency, byte counters) asks for GRPC.
     */
    public Builder dataPlane(DataPlane d) {
      this.dataPlane = java.util.Objects.requireNonNull(d, "dataPlane");
      return this;
    }

    private static DataPlane defaultDataPlane() {
      String p = System.getProperty("dynembed.dataPlane", "native");
      try {
        return DataPlane.valueOf(p.toUpperCase(java.util.Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("dynembed.dataPlane must be native or grpc but was '"
            + p + "'");
      }
    }

    /** TLS settings ({@link Tls}), or null for plaintext (the default). */
    public Builder tls(Tls t) {
      if (t != null) {
        if (t.ca() == null) {
          throw new IllegalArgumentException("tls: the CA file that signs the shards'"
              + " certificates is required");
        }
        if ((t.cert() == null) != (t.key() == null)) {
          throw new IllegalArgumentException("tls: a client certificate and its key go together");
        }
        for (Path p : new Path[] {t.ca(), t.cert(), t.key()}) {
          if (p != null && !java.nio.file.Files.isReadable(p)) {
            throw new IllegalArgumentException("tls: cannot read " + p);
          }
        }
      }
      this.tls = t;
      return this;
    }

    /** A bearer token sent with every call (at least 16 characters), or null. */
    public Builder bearerToken(String token) {
      if (token != null && token.length() < 16) {
        throw new IllegalArgumentException("bearer token must have at least 16 characters");
      }
      this.bearerToken = token;
      return this;
    }

    /** Deadline of every data call (default 30 s); must be &gt; 0. */
    public Builder deadline(Duration d) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("deadline must be > 0 but was " + d);
      }
      this.deadline = d;
      return this;
    }

    /**
     * How long {@code buildIndex} with wait waits for the shards' builds (default 6 h: an HNSW
     * graph of 500k rows with max_conn 48 took over 40 min on 2 cores, far past a checkpoint's
     * deadline); must be &gt; 0. The build goes on on the shards if the wait ends.
     */
    public Builder indexBuildDeadline(Duration d) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("indexBuildDeadline must be > 0 but was " + d);
      }
      this.indexBuildDeadline = d;
      return this;
    }

    /** Deadline of save and restore (default 10 min); must be &gt; 0. */
    public Builder checkpointDeadline(Duration d) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("checkpointDeadline must be > 0 but was " + d);
      }
      this.checkpointDeadline = d;
      return this;
    }

    /**
     * How long a call is resent while its shard is UNAVAILABLE (down, restarting, recovering)
     * or, for calls that are safe to resend, past its deadline (default 2 min; 0 = never).
     * Writes and counting reads carry a call id, so a resend is applied once
     * (docs/design/0008-durability.md): a trainer rides through a shard restart.
     */
    public Builder retryFor(Duration d) {
      if (d.isNegative()) {
        throw new IllegalArgumentException("retryFor must be >= 0 but was " + d);
      }
      this.retryFor = d;
      return this;
    }

    /** How rows of lookups and samples travel (default FLOAT32). */
    public Builder rowEncoding(RowEncoding e) {
      this.rowEncoding = Rows.normalize(e);
      return this;
    }

    /**
     * Interceptors of every shard channel, first one outermost: credentials, tracing, or the
     * benchmarks' simulated network delay.
     */
    public Builder interceptors(List<ClientInterceptor> list) {
      this.interceptors = List.copyOf(list);
      return this;
    }

    public ClientOptions build() {
      return new ClientOptions(this);
    }
  }
}
