package dev.dynembed.table.client.internal;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.Internal;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.*;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.security.SecureRandom;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.logging.Logger;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import dev.dynembed.table.client.spi.ReplyRows;
import dev.dynembed.table.client.spi.Shard;

/**
 * A remote shard over gRPC. Reads and writes of a step go out as one {@code Read} and one {@code
 * Write} call; rows arrive in the client's {@link ClientOptions#rowEncoding()} and are decoded
 * straight from the reply's bytes when the caller copies them out. Every call has a deadline.
 *
 * <p>Calls are resent here (not by gRPC's retry policy, which buffers at most 1 MiB per call and
 * so never resends a large batch) for up to {@link ClientOptions#retryFor()} while the shard is
 * UNAVAILABLE, and past their deadline for calls safe to resend. Writes and reads that count
 * carry a {@link CallId} (this client's random id, a sequence number, the lowest one still
 * unsettled): the shard applies a resent call once (docs/design/0008-durability.md), also after
 * it restarted from its write-ahead log.
 */
@Internal
public final class GrpcShard implements Shard {
  private static final Logger log = Logger.getLogger(GrpcShard.class.getName());
  /** Paces resends (one daemon thread for every client in the process). */
  private static final ScheduledExecutorService RESEND = Executors.newSingleThreadScheduledExecutor(
      r -> {
        Thread t = new Thread(r, "table-client-resend");
        t.setDaemon(true);
        return t;
      });

  private final int index;
  /** Where the shard is now (host:port): fixed, or the cluster map's current entry. */
  private final Supplier<String> endpoint;
  private final ManagedChannel channel;
  private final EmbeddingTableServiceGrpc.EmbeddingTableServiceFutureStub stub;
  private final ClientOptions options;
  private final RowEncoding encoding;
  private final long clientId = new SecureRandom().nextLong() | 1L; // never 0 (= untracked)
  private long lastSeq;
  private final ConcurrentSkipListSet<Long> unsettled = new ConcurrentSkipListSet<>();
  private final AtomicBoolean outage = new AtomicBoolean();
  private volatile boolean closed;
  /** Read and Write on the shard's native data plane; null: on gRPC. */
  private final DataPlaneConnection dataPlane;

  public GrpcShard(int index, String endpoint, ClientOptions options) {
    this(index, endpoint, () -> endpoint, options);
  }

  /**
   * A shard reached through a gRPC channel target that a {@link io.grpc.NameResolver} resolves
   * (a cluster map: the shard may move; calls resent after a move reach its new address with
   * their call ids, so they are still applied once).
   *
   * @param target the channel's target ("host:port", or a URI of a registered resolver)
   * @param endpoint where the shard is now, for messages and the data plane's host
   */
  public GrpcShard(int index, String target, Supplier<String> endpoint, ClientOptions options) {
    this.index = index;
    this.endpoint = endpoint;
    this.options = options;
    this.encoding = options.rowEncoding();
    java.util.List<ClientInterceptor> interceptors = new ArrayList<>(options.interceptors());
    if (options.bearerToken() != null) {
      io.grpc.Metadata md = new io.grpc.Metadata();
      md.put(io.grpc.Metadata.Key.of("authorization", io.grpc.Metadata.ASCII_STRING_MARSHALLER),
          "Bearer " + options.bearerToken());
      interceptors.add(io.grpc.stub.MetadataUtils.newAttachHeadersInterceptor(md));
    }
    this.channel = builder(target, options.tls())
        // replies are handed to the caller's future straight from the event loop (no hop
        // through a callback executor); nothing blocking runs in those callbacks
        .directExecutor()
        .intercept(interceptors.toArray(new ClientInterceptor[0]))
        .maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES)
        .flowControlWindow(Limits.FLOW_CONTROL_WINDOW)
        .disableRetry() // resent here, whatever the size (see the class comment)
        .build();
    this.stub = EmbeddingTableServiceGrpc.newFutureStub(channel);
    this.dataPlane = options.dataPlane() == ClientOptions.DataPlane.NATIVE
        ? new DataPlaneConnection(index, endpoint, options,
            () -> data().dataPlane(DataPlaneRequest.getDefaultInstance()))
        : null;
  }

  @Override
  public int index() {
    return index;
  }

  private EmbeddingTableServiceGrpc.EmbeddingTableServiceFutureStub stub(Duration d) {
    return stub.withDeadlineAfter(d.toNanos(), TimeUnit.NANOSECONDS);
  }

  private EmbeddingTableServiceGrpc.EmbeddingTableServiceFutureStub data() {
    return stub(options.deadline());
  }

  private static NettyChannelBuilder builder(String target, ClientOptions.Tls tls) {
    if (tls == null) {
      return NettyChannelBuilder.forTarget(target).usePlaintext();
    }
    try {
      io.grpc.TlsChannelCredentials.Builder b = io.grpc.TlsChannelCredentials.newBuilder()
          .trustManager(tls.ca().toFile());
      if (tls.cert() != null) {
        b.keyManager(tls.cert().toFile(), tls.key().toFile());
      }
      return NettyChannelBuilder.forTarget(target, b.build());
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("tls: cannot load the certificates: " + e.getMessage(),
          e);
    }
  }

  /** A new call id; its sequence number stays unsettled until {@link #settle}. */
  private CallId nextCallId() {
    synchronized (unsettled) { // a number is in the set before any later one reads the low water
      long seq = ++lastSeq;
      unsettled.add(seq);
      return CallId.newBuilder().setClient(clientId).setSeq(seq).setLowWater(unsettled.first())
          .build();
    }
  }

  private void settle(CallId id) {
    unsettled.remove(id.getSeq());
  }

  /**
   * Sends a call and resends it while the shard is UNAVAILABLE or, with {@code resendOnDeadline},
   * past its deadline, for up to {@link ClientOptions#retryFor()}.
   */
  private <R, T> CompletableFuture<T> call(String call, String table,
      Supplier<ListenableFuture<R>> send, Function<R, T> convert, boolean resendOnDeadline) {
    CompletableFuture<T> out = new CompletableFuture<>();
    long giveUp = System.nanoTime() + options.retryFor().toNanos();
    attempt(out, call, table, send, convert, resendOnDeadline, giveUp, 0);
    return out;
  }

  private <R, T> void attempt(CompletableFuture<T> out, String call, String table,
      Supplier<ListenableFuture<R>> send, Function<R, T> convert, boolean resendOnDeadline,
      long giveUp, int attempt) {
    ListenableFuture<R> f;
    try {
      f = send.get();
    } catch (RuntimeException e) {
      out.completeExceptionally(map(e, call, table, attempt));
      return;
    }
    Futures.addCallback(f, new FutureCallback<R>() {
      @Override
      public void onSuccess(R r) {
        if (attempt > 0 && outage.compareAndSet(true, false)) {
          log.info(String.format("shard %d at %s answers again", index, endpoint.get()));
        }
        try {
          out.complete(convert.apply(r));
        } catch (TableException e) {
          out.completeExceptionally(
              TableException.of(e.code(), "bad reply: " + e.getMessage(), table, index, call, e));
        } catch (RuntimeException e) {
          out.completeExceptionally(
              TableException.of(ErrorCode.INTERNAL, "bad reply: " + e.getMessage(), table, index,
                  call, e));
        }
      }

      @Override
      public void onFailure(Throwable t) {
        Status.Code code = Status.fromThrowable(t).getCode();
        if (attempt > 0 && code == Status.Code.NOT_FOUND && call.equals("dropTable")) {
          out.complete(null); // the first attempt dropped it and its answer was lost
          return;
        }
        boolean resend = (code == Status.Code.UNAVAILABLE && !tlsFailure(t)) || connectionLost(t)
            || (resendOnDeadline && code == Status.Code.DEADLINE_EXCEEDED);
        if (!resend || closed || System.nanoTime() >= giveUp) {
          out.completeExceptionally(map(t, call, table, attempt));
          return;
        }
        String why = Status.fromThrowable(t).getDescription();
        if (code == Status.Code.UNAVAILABLE && TableException.isStoreReplaced(why)) {
          // routine: the table's store was replaced (an eviction's rebuild, a restore) while the
          // call waited for it; the shard answered, and the resend goes to the new store
          log.fine(String.format("shard %d at %s: %s", index, endpoint.get(), why));
        } else if (outage.compareAndSet(false, true)) {
          log.warning(String.format("shard %d at %s does not answer (%s); resending for up to"
              + " %d s", index, endpoint.get(), code, options.retryFor().toSeconds()));
        }
        long delayMs = Math.min(1000, 50L << Math.min(attempt, 5));
        RESEND.schedule(() -> {
          channel.resetConnectBackoff(); // reconnect now, not after gRPC's own backoff
          attempt(out, call, table, send, convert, resendOnDeadline, giveUp, attempt + 1);
        }, delayMs, TimeUnit.MILLISECONDS);
      }
    }, MoreExecutors.directExecutor());
  }

  /**
   * Whether a call failed because its connection closed under it (a shard killed mid-call):
   * grpc-netty reports that as UNKNOWN "channel closed", not UNAVAILABLE.
   */
  private static boolean connectionLost(Throwable t) {
    Status s = Status.fromThrowable(t);
    if (s.getCode() != Status.Code.UNKNOWN) {
      return false;
    }
    for (Throwable c = s.getCause(); c != null; c = c.getCause()) {
      if (c instanceof java.io.IOException) { // ClosedChannelException is one
        return true;
      }
    }
    return false;
  }

  private static String rootMessage(Throwable t) {
    Throwable c = t;
    while (c.getCause() != null) {
      c = c.getCause();
    }
    return c.getMessage() != null ? c.getMessage() : c.getClass().getSimpleName();
  }

  /** A TLS handshake that failed (wrong CA, no or unknown client certificate): not transient. */
  private static boolean tlsFailure(Throwable t) {
    for (Throwable c = Status.fromThrowable(t).getCause(); c != null; c = c.getCause()) {
      if (c instanceof javax.net.ssl.SSLException) {
        return true;
      }
    }
    return false;
  }

  private TableException map(Throwable t, String call, String table, int attempts) {
    Status s = Status.fromThrowable(t);
    ErrorCode code;
    try {
      code = ErrorCode.valueOf(s.getCode().name());
    } catch (IllegalArgumentException e) {
      code = s.getCode() == Status.Code.CANCELLED ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL;
    }
    String desc = s.getDescription() != null ? s.getDescription() : s.getCode().name();
    if (connectionLost(t)) {
      code = ErrorCode.UNAVAILABLE;
    }
    if (tlsFailure(t)) {
      desc = "TLS with the shard at " + endpoint.get() + " failed (" + rootMessage(t) + "): check the"
          + " CA that signs its certificate and, for mutual TLS, this client's certificate and"
          + " key (--tls-ca, --tls-cert, --tls-key)";
    } else if (code == ErrorCode.UNAVAILABLE || code == ErrorCode.DEADLINE_EXCEEDED) {
      desc = "shard at " + endpoint.get() + " did not answer (" + s.getCode() + "): " + desc;
      if (attempts > 0) {
        desc += String.format(" (sent %d times over %d s; a write may or may not have been"
            + " applied)", attempts + 1, options.retryFor().toSeconds());
      }
    }
    return TableException.of(code, desc, table, index, call,
        t instanceof StatusRuntimeException ? t : new StatusRuntimeException(s));
  }

  // ------------------------------------------------------------------ data path

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items) {
    return read(items, 0);
  }

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items, long mapEpoch) {
    ReadRequest.Builder b = ReadRequest.newBuilder().setMapEpoch(mapEpoch);
    boolean counts = false;
    for (Read r : items) {
      b.addItems(toProto(r));
      counts |= r instanceof FindOrInsert || (r instanceof Pooled p && p.insert());
    }
    CallId id = counts ? nextCallId() : null;
    if (id != null) {
      b.setCallId(id); // a resent counting read counts nothing twice
    }
    ReadRequest req = b.build();
    String call = items.size() == 1 ? Shard.callName(items.get(0)) : "read";
    Supplier<ListenableFuture<ReadResponse>> send = dataPlane == null ? () -> data().read(req)
        : () -> dataPlane.read(req, () -> data().read(req));
    CompletableFuture<List<Object>> f = call(call, items.get(0).table(), send, reply -> {
      if (reply.getResultsCount() != items.size()) {
        throw new IllegalStateException(reply.getResultsCount() + " results for " + items.size()
            + " read items");
      }
      List<Object> out = new ArrayList<>(items.size());
      for (int i = 0; i < items.size(); i++) {
        ReadResult r = reply.getResults(i);
        out.add(items.get(i) instanceof Sample s ? sample(r.getSample(), s)
            : items.get(i) instanceof Shard.Partners ? partners(r.getPartners())
            : items.get(i) instanceof Pooled p ? pooled(r.getRows(), p)
            : rows(r.getRows(), items.get(i)));
      }
      return out;
    }, true);
    if (id != null) {
      f.whenComplete((r, e) -> settle(id));
    }
    return f;
  }

  private ReadItem toProto(Read r) {
    if (r instanceof Find f) {
      return ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable(f.table())
          .setKeys(f.keys().toProto()).setRowEncoding(encoding)).build();
    }
    if (r instanceof FindOrInsert f) {
      FindOrInsertRequest.Builder b = FindOrInsertRequest.newBuilder().setTable(f.table())
          .setKeys(f.keys().toProto()).setNoCount(!f.mode().count())
          .setOmitRows(!f.mode().rows()).setWithFrequencies(f.mode().frequencies())
          .setWithSlots(f.mode().slots()).setRowEncoding(encoding);
      if (f.occurrences() != null) {
        for (int o : f.occurrences()) {
          b.addOccurrences(o);
        }
      }
      return ReadItem.newBuilder().setFindOrInsert(b).build();
    }
    if (r instanceof Pooled p) {
      if (!p.insert()) {
        return ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable(p.table())
            .setKeys(p.keys().toProto()).setPool(p.bags().toProto()).setRowEncoding(encoding))
            .build();
      }
      return ReadItem.newBuilder().setFindOrInsert(FindOrInsertRequest.newBuilder()
          .setTable(p.table()).setKeys(p.keys().toProto()).setNoCount(!p.count())
          .setPool(p.bags().toProto()).setRowEncoding(encoding)).build();
    }
    if (r instanceof Shard.Partners p) {
      return ReadItem.newBuilder().setPartners(dev.dynembed.table.v1.PartnersRequest.newBuilder()
          .setTable(p.table()).setAnchors(p.anchors().toProto()).setNumDraws(p.numDraws())
          .setWeight(p.weight()).setSeed(p.seed())).build();
    }
    Sample s = (Sample) r;
    return ReadItem.newBuilder().setSample(SampleRequest.newBuilder().setTable(s.table())
        .setPositives(s.positives().toProto()).setNumSampled(s.numSampled())
        .setSampler(s.sampler()).setAlpha(s.alpha()).setSeed(s.seed())
        .setDistinctWithRows(s.distinct()).setNoneIfEmpty(s.noneIfEmpty())
        .setWithSlots(s.withSlots()).setOmitRows(s.omitRows()).setRowEncoding(encoding))
        .build();
  }

  private static RowsReply rows(FindResponse r, Read item) {
    int n = item instanceof Find f ? f.keys().size() : ((FindOrInsert) item).keys().size();
    ReplyRows rows = null;
    if (!r.getRows().isEmpty()) {
      int dim = r.getDim();
      if (dim < 1 || Rows.valueCount(r.getRows(), r.getRowEncoding(), "rows") != n * dim) {
        throw new IllegalStateException("reply holds " + r.getRows().size() + " bytes of "
            + r.getRowEncoding() + " rows for " + n + " keys of dim " + dim);
      }
      rows = ReplyRows.of(r.getRows().asReadOnlyByteBuffer(), r.getRowEncoding(), dim);
    }
    long[] freqs = null;
    if (r.getFrequenciesCount() > 0) {
      freqs = new long[r.getFrequenciesCount()];
      for (int i = 0; i < freqs.length; i++) {
        freqs[i] = r.getFrequencies(i);
      }
    }
    long[] counts = counts(r.getUpdateCountsList(), n, "update counts");
    return new RowsReply(rows, r.getFound().isEmpty() ? null : r.getFound().toByteArray(), freqs,
        slots(r.getSlots(), r.getRowEncoding(), n), counts);
  }

  private static PooledReply pooled(FindResponse r, Pooled p) {
    int bags = p.bags().bags();
    int dim = r.getDim();
    if (dim < 1 || Rows.valueCount(r.getPooled(), r.getRowEncoding(), "pooled rows")
        != (long) bags * dim) {
      throw new IllegalStateException("reply holds " + r.getPooled().size() + " bytes of "
          + r.getRowEncoding() + " pooled rows for " + bags + " bags of dim " + dim);
    }
    return new PooledReply(ReplyRows.of(r.getPooled().asReadOnlyByteBuffer(), r.getRowEncoding(),
        dim), r.getFound().isEmpty() ? null : r.getFound().toByteArray());
  }

  private static Shard.PartnersReply partners(dev.dynembed.table.v1.PartnersResponse r) {
    PackedKeys keys = PackedKeys.fromProto(r.getKeys(), dev.dynembed.table.common.Limits.MAX_KEY_BYTES,
        "partners");
    float[] prob = new float[r.getProbabilitiesCount()];
    for (int i = 0; i < prob.length; i++) {
      prob[i] = r.getProbabilities(i);
    }
    int[] counts = new int[r.getCountsCount()];
    long sum = 0;
    for (int i = 0; i < counts.length; i++) {
      counts[i] = r.getCounts(i);
      sum += counts[i];
    }
    if (sum != keys.size() || prob.length != keys.size()) {
      throw new IllegalStateException("partners reply: " + keys.size() + " keys, " + prob.length
          + " probabilities, counts summing to " + sum);
    }
    return new Shard.PartnersReply(keys, prob, counts);
  }

  private static SampleReply sample(SampleResponse r, Sample s) {
    int n = r.getIsPositiveCount();
    boolean[] pos = new boolean[n];
    double[] prob = new double[n];
    for (int i = 0; i < n; i++) {
      pos[i] = r.getIsPositive(i);
      prob[i] = r.getProbability(i);
    }
    PackedKeys keys = PackedKeys.fromProto(r.getKeys(), Limits.MAX_KEY_BYTES, "sampled keys");
    ReplyRows rows = null;
    int[] drawIndex = null;
    int u = keys.size() - s.positives().size();
    if (s.distinct()) {
      if (u > 0 && !s.omitRows()) {
        int values = Rows.valueCount(r.getRows(), r.getRowEncoding(), "sampled rows");
        if (values % u != 0) {
          throw new IllegalStateException("sampled rows: " + values + " values for " + u + " keys");
        }
        rows = ReplyRows.of(r.getRows().asReadOnlyByteBuffer(), r.getRowEncoding(), values / u);
      }
      drawIndex = new int[r.getDrawIndexCount()];
      for (int j = 0; j < drawIndex.length; j++) {
        drawIndex[j] = r.getDrawIndex(j);
      }
    }
    return new SampleReply(keys, pos, prob, r.getMass(), (int) r.getNumKeys(), rows, drawIndex,
        slots(r.getSlots(), r.getRowEncoding(), u),
        s.withSlots() && u > 0 ? counts(r.getUpdateCountsList(), u, "update counts") : null);
  }

  /** Slot rows of {@code n} keys, or null when none came (not asked, or no slots). */
  private static ReplyRows slots(com.google.protobuf.ByteString bytes, RowEncoding e, int n) {
    if (bytes.isEmpty() || n == 0) {
      return null;
    }
    int values = Rows.valueCount(bytes, e, "slots");
    if (values % n != 0) {
      throw new IllegalStateException("slots: " + values + " values for " + n + " keys");
    }
    return ReplyRows.of(bytes.asReadOnlyByteBuffer(), e, values / n);
  }

  private static long[] counts(List<Long> list, int n, String what) {
    if (list.isEmpty()) {
      return null;
    }
    if (list.size() != n) {
      throw new IllegalStateException(what + ": " + list.size() + " for " + n + " keys");
    }
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      out[i] = list.get(i);
    }
    return out;
  }

  @Override
  public CompletableFuture<int[]> write(List<Write> items) {
    return write(items, 0);
  }

  @Override
  public CompletableFuture<int[]> write(List<Write> items, long mapEpoch) {
    CallId id = nextCallId();
    WriteRequest.Builder b = WriteRequest.newBuilder().setCallId(id).setMapEpoch(mapEpoch);
    for (Write w : items) {
      b.addItems(w.toProto());
    }
    WriteRequest req = b.build();
    Supplier<ListenableFuture<WriteResponse>> send = dataPlane == null ? () -> data().write(req)
        : () -> dataPlane.write(req, () -> data().write(req));
    CompletableFuture<int[]> f = call("applyGradients", items.get(0).table(), send, r -> {
          int[] out = new int[r.getRowsUpdatedCount()];
          for (int i = 0; i < out.length; i++) {
            out[i] = r.getRowsUpdated(i);
          }
          return out;
        }, true);
    f.whenComplete((r, e) -> settle(id));
    return f;
  }

  // ------------------------------------------------------------------ the rest

  @Override
  public CompletableFuture<TableInfo> create(TableConfig config) {
    return call("createTable", config.getName(),
        () -> data().createTable(CreateTableRequest.newBuilder().setConfig(config).build()),
        r -> r, false);
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table,
        () -> data().describeTable(DescribeTableRequest.newBuilder().setTable(table).build()),
        r -> r, true);
  }

  @Override
  public CompletableFuture<TableInfo> grow(dev.dynembed.table.v1.GrowTableRequest req) {
    // a rebuild of the table (O(rows)): its own deadline, as a checkpoint's
    return call("growTable", req.getTable(), () -> stub(options.checkpointDeadline())
        .growTable(req), r -> r, true);
  }

  @Override
  public CompletableFuture<Void> drop(String table) {
    return call("dropTable", table,
        () -> data().dropTable(DropTableRequest.newBuilder().setTable(table).build()),
        r -> null, false);
  }

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, PackedKeys exclude) {
    return topK(table, queries, numQueries, k, biasLastDim, metric, exclude, 0);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.IndexInfo> buildIndex(
      dev.dynembed.table.v1.BuildIndexRequest req) {
    // a build with wait can take far longer than a checkpoint of the table (the graph's cost
    // grows with max_conn and beam_width): its own deadline; one without wait answers at once
    return call("buildIndex", req.getTable(), () -> stub(req.getWait()
        ? options.indexBuildDeadline() : options.checkpointDeadline()).buildIndex(req),
        r -> r, false);
  }

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, PackedKeys exclude, int searchBreadth) {
    TopKRequest req = TopKRequest.newBuilder()
        .setTable(table).setQueries(Rows.encode(queries)).setNumQueries(numQueries).setK(k)
        .setBiasLastDim(biasLastDim).setMetric(metric).setExclude(exclude.toProto())
        .setSearchBreadth(searchBreadth).build();
    Supplier<ListenableFuture<TopKResponse>> send = dataPlane == null ? () -> data().topK(req)
        : () -> dataPlane.topK(req, () -> data().topK(req));
    return call("topK", table, send,
        r -> {
          float[] scores = new float[r.getScoresCount()];
          for (int i = 0; i < scores.length; i++) {
            scores[i] = r.getScores(i);
          }
          int[] counts = new int[r.getCountsCount()];
          for (int i = 0; i < counts.length; i++) {
            counts[i] = r.getCounts(i);
          }
          return new TopKHitsReply(PackedKeys.fromProto(r.getKeys(), Limits.MAX_KEY_BYTES,
              "top-k keys"), scores, counts, r.getApproximate());
        }, true);
  }

  @Override
  public CompletableFuture<CheckpointFile> save(String table, String directory, long step) {
    SaveRequest req = SaveRequest.newBuilder().setTable(table).setDirectory(directory)
        .setStep(step).build();
    return call("save", table, () -> stub(options.checkpointDeadline()).save(req),
        SaveResponse::getFile, false);
  }

  @Override
  public CompletableFuture<Long> restore(String table, String directory,
      List<CheckpointFile> files) {
    RestoreRequest req = RestoreRequest.newBuilder().setTable(table).setDirectory(directory)
        .addAllFiles(files).build();
    return call("restore", table, () -> stub(options.checkpointDeadline()).restore(req),
        RestoreResponse::getKeys, false);
  }

  @Override
  public CompletableFuture<ScanReply> scan(String table, long cursor, int limit,
      long generation) {
    dev.dynembed.table.v1.ScanRequest req = dev.dynembed.table.v1.ScanRequest.newBuilder()
        .setTable(table).setCursor(cursor).setLimit(limit).setGeneration(generation)
        .setRowEncoding(encoding).build();
    return call("scan", table, () -> data().scan(req), r -> {
      PackedKeys keys = PackedKeys.fromProto(r.getKeys(), Limits.MAX_KEY_BYTES, "scanned keys");
      int n = keys.size();
      ReplyRows rows = null;
      if (n > 0) {
        int values = Rows.valueCount(r.getRows(), r.getRowEncoding(), "scanned rows");
        if (values % n != 0) {
          throw new IllegalStateException("scan: " + values + " values for " + n + " keys");
        }
        rows = ReplyRows.of(r.getRows().asReadOnlyByteBuffer(), r.getRowEncoding(), values / n);
      }
      long[] freqs = counts(r.getFrequenciesList(), n, "frequencies");
      long[] steps = counts(r.getStepsList(), n, "steps");
      return new ScanReply(keys, rows, freqs == null ? new long[0] : freqs,
          steps == null ? new long[0] : steps, r.getNextCursor(), r.getGeneration());
    }, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.EvictResponse> evict(
      dev.dynembed.table.v1.EvictRequest request) {
    // a rebuild is O(rows): the checkpoint deadline; resending is safe (nothing more to evict)
    return call("evict", request.getTable(),
        () -> stub(options.checkpointDeadline()).evict(request), r -> r, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.SlotMap> slotMap() {
    return call("getSlotMap", null, () -> data().getSlotMap(
        dev.dynembed.table.v1.GetSlotMapRequest.getDefaultInstance()), r -> r, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.SlotMap> installSlotMap(
      dev.dynembed.table.v1.SlotMap map) {
    return call("setSlotMap", null, () -> data().setSlotMap(map), r -> r, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.ExportSlotsResponse> exportSlots(
      dev.dynembed.table.v1.ExportSlotsRequest req) {
    return call("exportSlots", req.getTable(), () -> data().exportSlots(req), r -> r, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.ImportSlotsResponse> importSlots(
      dev.dynembed.table.v1.ImportSlotsRequest req) {
    return call("importSlots", req.getTable(), () -> data().importSlots(req), r -> r, true);
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.CommitSlotsResponse> commitSlots(
      dev.dynembed.table.v1.CommitSlotsRequest req) {
    return call("commitSlots", null, () -> data().commitSlots(req), r -> r, true);
  }

  @Override
  public CompletableFuture<Long> dropUnowned() {
    return call("dropUnowned", null, () -> data().dropUnowned(
        dev.dynembed.table.v1.DropUnownedRequest.getDefaultInstance()), r -> r.getDropped(),
        true);
  }

  @Override
  public CompletableFuture<StatsResponse> stats() {
    return call("stats", null, () -> data().stats(StatsRequest.getDefaultInstance()), r -> r,
        true);
  }

  @Override
  public void close() {
    closed = true;
    if (dataPlane != null) {
      dataPlane.close();
    }
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }
}
