package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * A shard's metrics (Micrometer, Prometheus text format) and its HTTP probes:
 *
 * <ul>
 *   <li>{@code GET /metrics}: per method, status code and transport ({@code grpc}, or {@code
 *       native} for the data plane's Read and Write) a latency histogram ({@code
 *       dynembed_rpc_seconds}, whose count is the request rate and whose non-OK codes are the
 *       errors), calls in flight; per table keys, bytes, total frequency, updates, pending
 *       keys; memory in use against the budget; the log's
 *       bytes since the last snapshot, last record, snapshot age; the call ledger's clients;
 *       JVM memory, GC, threads, CPU, uptime;
 *   <li>{@code GET /live}: 200 while the process serves HTTP (liveness: restart it if not);
 *   <li>{@code GET /ready}: 200 once the tables are recovered and calls are taken, 503 before
 *       (readiness: send it traffic only then).
 * </ul>
 */
public final class ShardMetrics implements ServerInterceptor, AutoCloseable {
  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final ShardEngine engine;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final java.util.concurrent.ConcurrentHashMap<String, Timer> timers =
      new java.util.concurrent.ConcurrentHashMap<>();
  private final MultiGauge keys;
  private final MultiGauge bytes;
  private final MultiGauge frequency;
  private final MultiGauge updates;
  private final MultiGauge pending;
  private final MultiGauge frozen;
  private final MultiGauge admissionCount;
  private final MultiGauge pressure;
  private final MultiGauge gradientNorm;
  private final JvmGcMetrics gc = new JvmGcMetrics();
  private HttpServer http;

  public ShardMetrics(ShardEngine engine) {
    this.engine = engine;
    registry.config().commonTags("shard", String.valueOf(engine.shardIndex()));
    Gauge.builder("dynembed.rpc.in.flight", inFlight, AtomicInteger::get)
        .description("calls being handled").register(registry);
    keys = MultiGauge.builder("dynembed.table.keys").description("keys with a row")
        .register(registry);
    bytes = MultiGauge.builder("dynembed.table.bytes").baseUnit("bytes")
        .description("memory of rows, slots, metadata, keys and index").register(registry);
    frequency = MultiGauge.builder("dynembed.table.frequency.total")
        .description("occurrences counted").register(registry);
    updates = MultiGauge.builder("dynembed.table.updates")
        .description("row updates applied").register(registry);
    pending = MultiGauge.builder("dynembed.table.pending.keys")
        .description("keys counted but not admitted yet (min_count)").register(registry);
    frozen = MultiGauge.builder("dynembed.table.frozen.keys")
        .description("rows a key policy froze (settled), in memory").register(registry);
    admissionCount = MultiGauge.builder("dynembed.table.admission.count")
        .description("occurrences a key needs for a row now (admission_pressure; 0: none is"
            + " admitted, the memory budget is full)").register(registry);
    pressure = MultiGauge.builder("dynembed.table.memory.pressure")
        .description("the memory pressure admission_pressure reads (shard bytes over budget,"
            + " or table bytes over its max_bytes share)").register(registry);
    gradientNorm = MultiGauge.builder("dynembed.table.gradient.norm.mean")
        .description("mean over rows in memory of their gradient norm's running mean (key"
            + " policy)").register(registry);
    Gauge.builder("dynembed.log.bytes.since.snapshot", engine,
            e -> e.journal() == null ? 0 : e.journal().logBytesSinceSnapshot())
        .baseUnit("bytes").description("what a restart would replay").register(registry);
    Gauge.builder("dynembed.log.last.record", engine,
            e -> e.journal() == null ? 0 : e.journal().lastLsn())
        .description("LSN of the last logged change").register(registry);
    Gauge.builder("dynembed.snapshot.age", engine,
            e -> e.journal() == null ? Double.NaN : e.journal().snapshotAgeSeconds())
        .baseUnit("seconds").description("since the last durable snapshot (NaN: none yet)")
        .register(registry);
    Gauge.builder("dynembed.calls.clients", engine, e -> e.ledger().clients())
        .description("clients whose resends the shard recognizes").register(registry);
    Gauge.builder("dynembed.memory.used", engine, ShardEngine::bytesInUse).baseUnit("bytes")
        .description("the tables' bytes, as the memory budget counts them").register(registry);
    Gauge.builder("dynembed.memory.budget", engine, ShardEngine::memoryBudget).baseUnit("bytes")
        .description("--memory-budget-mb (0: none)").register(registry);
    Gauge.builder("dynembed.reply.budget.used", engine, e -> e.replies().used())
        .baseUnit("bytes").description("bytes of replies being built or sent")
        .register(registry);
    Gauge.builder("dynembed.reply.budget", engine, e -> e.replies().capacity())
        .baseUnit("bytes").description("--reply-budget-mb").register(registry);
    io.micrometer.core.instrument.FunctionCounter.builder("dynembed.reply.budget.refused",
        engine, e -> e.replies().refused())
        .description("calls refused because their reply did not fit the budget")
        .register(registry);
    Gauge.builder("dynembed.ready", engine, e -> e.ready() ? 1 : 0)
        .description("1 once the tables are recovered").register(registry);
    new JvmMemoryMetrics().bindTo(registry);
    gc.bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    new ClassLoaderMetrics().bindTo(registry);
    new ProcessorMetrics().bindTo(registry);
    new UptimeMetrics().bindTo(registry);
  }

  /**
   * The replication gauges of a replicated shard (docs/design/0019-cluster-map.md): its role,
   * the group's epoch, the followers in sync and, on a primary, how far the slowest follower is
   * behind (log records appended but not acknowledged).
   */
  /** The data plane's connections by state, and what it refused or closed. */
  void dataPlane(DataPlaneServer.Counters c) {
    Gauge.builder("dynembed.dataplane.connections", c, x -> x.open.get() - x.unauthenticated.get())
        .tags("state", "authenticated").description("data-plane connections open")
        .register(registry);
    Gauge.builder("dynembed.dataplane.connections", c, x -> x.unauthenticated.get())
        .tags("state", "before_hello").description("data-plane connections open")
        .register(registry);
    java.util.Map<String, java.util.concurrent.atomic.AtomicLong> refused = java.util.Map.of(
        "connection_cap", c.refusedConnections, "hello_timeout", c.helloTimeouts,
        "frame_before_hello", c.preHelloDrops, "idle", c.idleCloses);
    refused.forEach((reason, count) -> io.micrometer.core.instrument.FunctionCounter
        .builder("dynembed.dataplane.refused", count, java.util.concurrent.atomic.AtomicLong::get)
        .tags("reason", reason).description("connections refused or closed by the data plane")
        .register(registry));
  }

  void replication(ShardReplicas r) {
    Gauge.builder("dynembed.replication.primary", r, x -> x.leading() ? 1 : 0)
        .description("1 while this process leads its replicated group").register(registry);
    Gauge.builder("dynembed.replication.epoch", r, ShardReplicas::epoch)
        .description("the group's epoch this process leads (0: it follows)").register(registry);
    Gauge.builder("dynembed.replication.followers.in.sync", r, ShardReplicas::followersInSync)
        .description("followers that hold every answered write (a primary's view)")
        .register(registry);
    Gauge.builder("dynembed.replication.lag", r, x -> x.lagRecords(engine))
        .description("log records the slowest connected follower has not acknowledged")
        .register(registry);
  }

  /** The Prometheus text of every metric, table gauges refreshed first. */
  public String scrape() {
    List<MultiGauge.Row<?>> k = new ArrayList<>();
    List<MultiGauge.Row<?>> b = new ArrayList<>();
    List<MultiGauge.Row<?>> f = new ArrayList<>();
    List<MultiGauge.Row<?>> u = new ArrayList<>();
    List<MultiGauge.Row<?>> p = new ArrayList<>();
    List<MultiGauge.Row<?>> z = new ArrayList<>();
    List<MultiGauge.Row<?>> g = new ArrayList<>();
    List<MultiGauge.Row<?>> ac = new ArrayList<>();
    List<MultiGauge.Row<?>> mp = new ArrayList<>();
    for (TableStore t : engine.tables()) {
      Tags tags = Tags.of("table", t.name());
      dev.dynembed.table.v1.TableCounters c = t.counters();
      k.add(MultiGauge.Row.of(tags, c.getKeys()));
      b.add(MultiGauge.Row.of(tags, c.getBytesUsed()));
      p.add(MultiGauge.Row.of(tags, c.getPendingKeys()));
      f.add(MultiGauge.Row.of(tags, c.getTotalFrequency()));
      u.add(MultiGauge.Row.of(tags, c.getUpdates()));
      if (t.pressured()) {
        dev.dynembed.table.v1.TableCounters a = engine.info(t).getCounters();
        ac.add(MultiGauge.Row.of(tags, a.getAdmissionCount()));
        mp.add(MultiGauge.Row.of(tags, a.getMemoryPressure()));
      }
      if (t.config().getOptimizer().hasKeyPolicy()) {
        z.add(MultiGauge.Row.of(tags, c.getFrozenKeys()));
        long inMemory = c.getKeys() - c.getColdKeys();
        g.add(MultiGauge.Row.of(tags, inMemory == 0 ? 0 : c.getGradientNormSum() / inMemory));
      }
    }
    frozen.register(z, true);
    admissionCount.register(ac, true);
    pressure.register(mp, true);
    gradientNorm.register(g, true);
    keys.register(k, true);
    bytes.register(b, true);
    frequency.register(f, true);
    updates.register(u, true);
    pending.register(p, true);
    return registry.scrape();
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
      ServerCallHandler<Q, R> next) {
    String method = call.getMethodDescriptor().getBareMethodName();
    long start = System.nanoTime();
    inFlight.incrementAndGet();
    AtomicBoolean done = new AtomicBoolean();
    ServerCall<Q, R> timed = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
      @Override
      public void close(Status status, Metadata trailers) {
        finish(method, status.getCode().name(), start, done, "grpc");
        super.close(status, trailers);
      }
    };
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(
        next.startCall(timed, headers)) {
      @Override
      public void onCancel() {
        finish(method, "CANCELLED", start, done, "grpc");
        super.onCancel();
      }
    };
  }

  /** A data-plane call begins (counted in flight); returns its start time for {@link #end}. */
  long begin() {
    inFlight.incrementAndGet();
    return System.nanoTime();
  }

  /** A data-plane call ended with the canonical status {@code code}, counted as gRPC's are. */
  void end(String method, String code, long start) {
    finish(method, code, start, new AtomicBoolean(), "native");
  }

  private void finish(String method, String code, long start, AtomicBoolean done,
      String transport) {
    if (!done.compareAndSet(false, true)) {
      return;
    }
    inFlight.decrementAndGet();
    timers.computeIfAbsent(method + "|" + code + "|" + transport, k -> Timer.builder(
            "dynembed.rpc")
            .description("calls by method, status code and transport (grpc, or native: the"
                + " data plane's Read and Write)")
            .tags("method", method, "code", code, "transport", transport)
            .publishPercentileHistogram()
            .register(registry))
        .record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
  }

  /**
   * Serves {@code /metrics}, {@code /live} and {@code /ready} on {@code host:port} (0: any free
   * port, {@link #port()} tells which).
   *
   * @param serving whether the gRPC server takes calls (with {@link ShardEngine#ready})
   */
  public void serve(String host, int port, BooleanSupplier serving) throws IOException {
    http = HttpServer.create(new InetSocketAddress(host, port), 16);
    http.createContext("/metrics", x -> reply(x, 200, scrape(),
        "text/plain; version=0.0.4; charset=utf-8"));
    http.createContext("/live", x -> reply(x, 200, "live\n", "text/plain"));
    http.createContext("/ready", x -> {
      boolean ready = engine.ready() && serving.getAsBoolean();
      reply(x, ready ? 200 : 503, ready ? "ready\n" : "recovering\n", "text/plain");
    });
    http.setExecutor(null);
    http.start();
  }

  public int port() {
    return http.getAddress().getPort();
  }

  private static void reply(HttpExchange x, int code, String body, String type)
      throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", type);
    x.sendResponseHeaders(code, b.length);
    try (OutputStream out = x.getResponseBody()) {
      out.write(b);
    }
  }

  @Override
  public void close() {
    if (http != null) {
      http.stop(0);
    }
    gc.close();
    registry.close();
  }
}
