package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import dev.dynembed.table.common.Limits;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import java.util.List;
import java.util.concurrent.Executor;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/** One shard's gRPC server: the table service plus the standard health service. */
public final class TableServer implements AutoCloseable {
  private final ShardEngine engine;
  private final Server server;
  private final HealthStatusManager health = new HealthStatusManager();
  private final ExecutorService executor;

  /**
   * @param port 0 picks a free port ({@link #port()} tells which)
   * @param threads request-handling threads
   */
  public TableServer(ShardEngine engine, String host, int port, int threads) throws IOException {
    this(engine, host, port, threads, List.of());
  }

  /**
   * @param interceptors applied to the table service (authentication, metrics, fault injection
   *     in tests), first one outermost
   */
  public TableServer(ShardEngine engine, String host, int port, int threads,
      List<ServerInterceptor> interceptors) throws IOException {
    this(engine, host, port, threads, interceptors, null);
  }

  /**
   * @param credentials TLS ({@link ServerTls}), or null for plaintext
   */
  public TableServer(ShardEngine engine, String host, int port, int threads,
      List<ServerInterceptor> interceptors, io.grpc.ServerCredentials credentials)
      throws IOException {
    this(engine, host, port, threads, interceptors, credentials, 0);
  }

  /**
   * @param dataPort the native data plane's port (0: any free port, announced through the
   *     {@code DataPlane} call; -1: none, Read and Write on gRPC only)
   */
  public TableServer(ShardEngine engine, String host, int port, int threads,
      List<ServerInterceptor> interceptors, io.grpc.ServerCredentials credentials, int dataPort)
      throws IOException {
    this(engine, host, port, threads, interceptors, credentials, dataPort, List.of());
  }

  /**
   * @param more further services on the same port (the replication stream between the
   *     processes of a replicated shard), behind the same interceptors
   */
  public TableServer(ShardEngine engine, String host, int port, int threads,
      List<ServerInterceptor> interceptors, io.grpc.ServerCredentials credentials, int dataPort,
      List<io.grpc.BindableService> more) throws IOException {
    this(engine, host, port, threads, interceptors, credentials, dataPort, more,
        DataPlaneServer.ConnectionLimits.DEFAULTS);
  }

  /**
   * @param limits what connections may take on the data plane (caps, HELLO and idle timeouts);
   *     gRPC closes connections idle as long, and waits as long for a connection's handshake
   */
  TableServer(ShardEngine engine, String host, int port, int threads,
      List<ServerInterceptor> interceptors, io.grpc.ServerCredentials credentials, int dataPort,
      List<io.grpc.BindableService> more, DataPlaneServer.ConnectionLimits limits)
      throws IOException {
    this.engine = engine;
    this.executor = Executors.newFixedThreadPool(threads, r -> {
      Thread t = new Thread(r, "table-shard-" + engine.shardIndex());
      t.setDaemon(true);
      return t;
    });
    // Data calls are short and CPU-bound: they run on the Netty event loop that read them, which
    // saves two thread hand-offs per call (measured: docs/benchmarks.md). Long calls go to the
    // pool (OFF_LOOP) and never block an event loop; TopK goes there from TableGrpcService when
    // it scans the table (a short search of an index answers inline).
    ServerCallExecutorSupplier perCall = new ServerCallExecutorSupplier() {
      @Override
      public <ReqT, RespT> Executor getExecutor(ServerCall<ReqT, RespT> call, Metadata headers) {
        String method = call.getMethodDescriptor().getBareMethodName();
        if (OFF_LOOP.contains(method)) {
          return executor;
        }
        // with fsync=always a mutating call waits for the disk: off the event loop
        return MUTATING.contains(method) && waitsForDisk(engine) ? executor : null;
      }
    };
    InetSocketAddress address = new InetSocketAddress(host, port);
    TableGrpcService service = new TableGrpcService(engine, executor);
    // the data plane listens before gRPC does, so DataPlane never answers "none" for a shard
    // that has one (a client told so keeps its Read and Write on gRPC)
    if (dataPort >= 0) {
      try {
        dataPlane = new DataPlaneServer(service, engine, host, dataPort,
            DataPlaneTls.of(credentials), find(interceptors, AccessControl.class),
            find(interceptors, ShardMetrics.class), executor,
            Math.max(1, Runtime.getRuntime().availableProcessors()), limits);
        ShardMetrics m = find(interceptors, ShardMetrics.class);
        if (m != null) {
          m.dataPlane(dataPlane.counters());
        }
      } catch (RuntimeException e) {
        executor.shutdownNow();
        throw e;
      }
      service.announceDataPlane(dataPlane.port());
    } else {
      dataPlane = null;
    }
    Server built = (credentials == null ? NettyServerBuilder.forAddress(address)
            : NettyServerBuilder.forAddress(address, credentials))
        .addService(ServerInterceptors.intercept(ServerInterceptors.intercept(service,
            new ReadOnlyRole(engine)), interceptors.toArray(new ServerInterceptor[0])))
        .addService(health.getHealthService())
        .addServices(more.stream().map(m -> ServerInterceptors.intercept(m,
            interceptors.toArray(new ServerInterceptor[0]))).toList())
        .directExecutor()
        .callExecutor(perCall)
        .maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES)
        // bytes in flight per connection are bounded by HTTP/2 flow control (the window) and
        // the message limit; calls per connection by this cap (more wait in the client)
        .flowControlWindow(Limits.FLOW_CONTROL_WINDOW)
        .maxConcurrentCallsPerConnection(Limits.MAX_CALLS_PER_CONNECTION)
        // a connection that never completes its TLS and HTTP/2 handshake, or sits idle, gives
        // its file descriptor back (the data plane's HELLO and idle timeouts)
        .handshakeTimeout(limits.helloTimeout().toMillis(), TimeUnit.MILLISECONDS)
        .maxConnectionIdle(limits.idleTimeout().isZero() ? Long.MAX_VALUE
            : limits.idleTimeout().toMillis(), TimeUnit.MILLISECONDS)
        .build();
    try {
      this.server = built.start();
    } catch (IOException | RuntimeException e) {
      if (dataPlane != null) {
        dataPlane.close();
      }
      executor.shutdownNow();
      throw e;
    }
    ServingStatus status = engine.ready() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    serving = engine.ready();
    health.setStatus("", status);
    health.setStatus(SERVICE, status);
  }

  private final DataPlaneServer dataPlane;

  /**
   * Whether a mutating call waits for the disk before it answers (fsync always): such calls run
   * on the pool, never on an event loop, on either transport.
   */
  static boolean waitsForDisk(ShardEngine engine) {
    ShardJournal s = engine.journal();
    return s != null && s.waitsForDisk();
  }

  private static <T> T find(List<ServerInterceptor> interceptors, Class<T> kind) {
    for (ServerInterceptor i : interceptors) {
      if (kind.isInstance(i)) {
        return kind.cast(i);
      }
    }
    return null;
  }

  /** What the data plane refused and closed (tests), or null without one. */
  DataPlaneServer.Counters dataPlaneCounters() {
    return dataPlane == null ? null : dataPlane.counters();
  }

  /** The native data plane's port, or -1 without one. */
  public int dataPort() {
    return dataPlane == null ? -1 : dataPlane.port();
  }

  private static final String SERVICE = "dynembed.table.v1.EmbeddingTableService";
  private volatile boolean serving;

  /** Whether the server takes calls: started, recovered, not shutting down. */
  public boolean serving() {
    return serving && !closed.get();
  }

  /**
   * Calls that always run on the pool, never on an event loop: Save and Restore do file I/O for
   * seconds, Sample may draw up to 4M keys, BuildIndex scans the table; a slot move's steps read
   * and write files, merge or drop many rows and wait for the log (and a replicated shard's
   * followers, whose acknowledgements may come in on that very event loop: waiting on it stalled
   * them until they were cut off), as Evict does.
   */
  private static final java.util.Set<String> OFF_LOOP = java.util.Set.of("Save", "Restore",
      "Sample", "BuildIndex", "SetSlotMap", "ExportSlots", "ImportSlots", "CommitSlots",
      "DropUnowned", "Evict", "GrowTable");

  private static final java.util.Set<String> MUTATING = java.util.Set.of("CreateTable",
      "DropTable", "FindOrInsert", "ApplyGradients", "Read", "Write");

  /**
   * A read-only shard (a serving replica, {@link ShardEngine#setReadOnly}) refuses the calls that
   * change tables by name, before they run; reads that count or create rows, and writes, are
   * refused by the command path (the data plane's too).
   */
  private static final class ReadOnlyRole implements io.grpc.ServerInterceptor {
    private static final java.util.Set<String> CHANGING = java.util.Set.of("CreateTable",
        "DropTable", "GrowTable", "FindOrInsert", "ApplyGradients", "Write", "Restore", "Evict",
        "SetSlotMap",
        "ExportSlots", "ImportSlots", "CommitSlots", "DropUnowned");
    private final ShardEngine engine;

    ReadOnlyRole(ShardEngine engine) {
      this.engine = engine;
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(ServerCall<ReqT, RespT> call,
        Metadata headers, io.grpc.ServerCallHandler<ReqT, RespT> next) {
      String why = engine.readOnly();
      String method = call.getMethodDescriptor().getBareMethodName();
      if (why != null && CHANGING.contains(method)) {
        call.close(io.grpc.Status.FAILED_PRECONDITION.withDescription("shard "
            + engine.shardIndex() + ": " + method + " is refused (" + why + ")"), new Metadata());
        return new ServerCall.Listener<>() {};
      }
      return next.startCall(call, headers);
    }
  }

  /** Reports SERVING from now on (a shard that recovered its tables). */
  public void markServing() {
    serving = true;
    health.setStatus("", ServingStatus.SERVING);
    health.setStatus(SERVICE, ServingStatus.SERVING);
  }

  public int port() {
    return server.getPort();
  }

  public ShardEngine engine() {
    return engine;
  }

  public void awaitTermination() throws InterruptedException {
    server.awaitTermination();
  }

  private final java.util.concurrent.atomic.AtomicBoolean closed =
      new java.util.concurrent.atomic.AtomicBoolean();

  /** Stops accepting calls, lets running ones finish for up to 5 s. Idempotent. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    health.enterTerminalState();
    if (dataPlane != null) {
      dataPlane.close();
    }
    server.shutdown();
    try {
      if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
        server.shutdownNow();
      }
    } catch (InterruptedException e) {
      server.shutdownNow();
      Thread.currentThread().interrupt();
    }
    executor.shutdownNow();
  }
}
