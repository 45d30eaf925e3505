package dev.dynembed.table.server;

import dev.dynembed.table.common.Limits;
import io.grpc.Server;
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
    this.engine = engine;
    this.executor = Executors.newFixedThreadPool(threads, r -> {
      Thread t = new Thread(r, "table-shard-" + engine.shardIndex());
      t.setDaemon(true);
      return t;
    });
    this.server = NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
        .addService(new TableGrpcService(engine))
        .addService(health.getHealthService())
        .executor(executor)
        .maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES)
        .build()
        .start();
    health.setStatus("", ServingStatus.SERVING);
    health.setStatus("dynembed.table.v1.EmbeddingTableService", ServingStatus.SERVING);
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

  /** Stops accepting calls, lets running ones finish for up to 5 s. */
  @Override
  public void close() {
    health.enterTerminalState();
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
