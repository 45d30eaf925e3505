package dev.dynembed.table.client.internal;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import dev.dynembed.table.client.ClientOptions;
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
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A remote shard over gRPC. Reads and writes of a step go out as one {@code Read} and one {@code
 * Write} call; rows arrive in the client's {@link ClientOptions#rowEncoding()} and are decoded
 * straight from the reply's bytes when the caller copies them out. Idempotent calls are retried on
 * UNAVAILABLE by gRPC's own retry policy (service config); Write and ApplyGradients never are.
 * Every call has a deadline.
 */
public final class GrpcShard implements Shard {
  private static final String SERVICE = "dynembed.table.v1.EmbeddingTableService";
  private static final List<String> IDEMPOTENT = List.of("CreateTable", "DescribeTable",
      "DropTable", "Find", "FindOrInsert", "Sample", "TopK", "Save", "Restore", "Stats", "Read");

  private final int index;
  private final String endpoint;
  private final ManagedChannel channel;
  private final EmbeddingTableServiceGrpc.EmbeddingTableServiceFutureStub stub;
  private final ClientOptions options;
  private final RowEncoding encoding;

  public GrpcShard(int index, String endpoint, ClientOptions options) {
    this.index = index;
    this.endpoint = endpoint;
    this.options = options;
    this.encoding = options.rowEncoding();
    this.channel = NettyChannelBuilder.forTarget(endpoint)
        .usePlaintext()
        // replies are handed to the caller's future straight from the event loop (no hop
        // through a callback executor); nothing blocking runs in those callbacks
        .directExecutor()
        .intercept(options.interceptors().toArray(new ClientInterceptor[0]))
        .maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES)
        .flowControlWindow(Limits.FLOW_CONTROL_WINDOW)
        .defaultServiceConfig(serviceConfig(options.maxAttempts()))
        .enableRetry()
        .build();
    this.stub = EmbeddingTableServiceGrpc.newFutureStub(channel);
  }

  private static Map<String, Object> serviceConfig(int maxAttempts) {
    List<Map<String, Object>> names = IDEMPOTENT.stream()
        .map(m -> Map.<String, Object>of("service", SERVICE, "method", m)).toList();
    Map<String, Object> retry = Map.of(
        "maxAttempts", (double) Math.max(2, maxAttempts),
        "initialBackoff", "0.1s",
        "maxBackoff", "2s",
        "backoffMultiplier", 2.0,
        "retryableStatusCodes", List.of("UNAVAILABLE"));
    Map<String, Object> methodConfig = maxAttempts > 1
        ? Map.of("name", names, "retryPolicy", retry)
        : Map.of("name", names);
    return Map.of("methodConfig", List.of(methodConfig));
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

  private <R, T> CompletableFuture<T> call(String call, String table, ListenableFuture<R> f,
      Function<R, T> convert) {
    CompletableFuture<T> out = new CompletableFuture<>();
    Futures.addCallback(f, new FutureCallback<R>() {
      @Override
      public void onSuccess(R r) {
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
        out.completeExceptionally(map(t, call, table));
      }
    }, MoreExecutors.directExecutor());
    return out;
  }

  private TableException map(Throwable t, String call, String table) {
    Status s = Status.fromThrowable(t);
    ErrorCode code;
    try {
      code = ErrorCode.valueOf(s.getCode().name());
    } catch (IllegalArgumentException e) {
      code = s.getCode() == Status.Code.CANCELLED ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL;
    }
    String desc = s.getDescription() != null ? s.getDescription() : s.getCode().name();
    if (code == ErrorCode.UNAVAILABLE || code == ErrorCode.DEADLINE_EXCEEDED) {
      desc = "shard at " + endpoint + " did not answer (" + s.getCode() + "): " + desc;
    }
    return TableException.of(code, desc, table, index, call,
        t instanceof StatusRuntimeException ? t : new StatusRuntimeException(s));
  }

  // ------------------------------------------------------------------ data path

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items) {
    ReadRequest.Builder b = ReadRequest.newBuilder();
    for (Read r : items) {
      b.addItems(toProto(r));
    }
    String call = items.size() == 1 ? LocalShard.name(items.get(0)) : "read";
    return call(call, items.get(0).table(), data().read(b.build()), reply -> {
      if (reply.getResultsCount() != items.size()) {
        throw new IllegalStateException(reply.getResultsCount() + " results for " + items.size()
            + " read items");
      }
      List<Object> out = new ArrayList<>(items.size());
      for (int i = 0; i < items.size(); i++) {
        ReadResult r = reply.getResults(i);
        out.add(items.get(i) instanceof Sample s ? sample(r.getSample(), s)
            : rows(r.getRows(), items.get(i)));
      }
      return out;
    });
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
    Sample s = (Sample) r;
    return ReadItem.newBuilder().setSample(SampleRequest.newBuilder().setTable(s.table())
        .setPositives(s.positives().toProto()).setNumSampled(s.numSampled())
        .setSampler(s.sampler()).setAlpha(s.alpha()).setSeed(s.seed())
        .setDistinctWithRows(s.distinct()).setNoneIfEmpty(s.noneIfEmpty())
        .setWithSlots(s.withSlots()).setRowEncoding(encoding)).build();
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
      if (u > 0) {
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
    WriteRequest.Builder b = WriteRequest.newBuilder();
    for (Write w : items) {
      b.addItems(ApplyGradientsRequest.newBuilder().setTable(w.table())
          .setKeys(w.keys().toProto()).setGradients(Rows.encode(w.gradients()))
          .setLearningRate(w.learningRate()).setStep(w.step()));
    }
    return call("applyGradients", items.get(0).table(), data().write(b.build()), r -> {
      int[] out = new int[r.getRowsUpdatedCount()];
      for (int i = 0; i < out.length; i++) {
        out[i] = r.getRowsUpdated(i);
      }
      return out;
    });
  }

  // ------------------------------------------------------------------ the rest

  @Override
  public CompletableFuture<TableInfo> create(TableConfig config) {
    return call("createTable", config.getName(),
        data().createTable(CreateTableRequest.newBuilder().setConfig(config).build()), r -> r);
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table,
        data().describeTable(DescribeTableRequest.newBuilder().setTable(table).build()), r -> r);
  }

  @Override
  public CompletableFuture<Void> drop(String table) {
    return call("dropTable", table,
        data().dropTable(DropTableRequest.newBuilder().setTable(table).build()), r -> null);
  }

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, PackedKeys exclude) {
    return call("topK", table, data().topK(TopKRequest.newBuilder()
        .setTable(table).setQueries(Rows.encode(queries)).setNumQueries(numQueries).setK(k)
        .setBiasLastDim(biasLastDim).setMetric(metric).setExclude(exclude.toProto()).build()),
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
              "top-k keys"), scores, counts);
        });
  }

  @Override
  public CompletableFuture<CheckpointFile> save(String table, String directory, long step) {
    return call("save", table, stub(options.checkpointDeadline()).save(SaveRequest.newBuilder()
        .setTable(table).setDirectory(directory).setStep(step).build()), SaveResponse::getFile);
  }

  @Override
  public CompletableFuture<Long> restore(String table, String directory,
      List<CheckpointFile> files) {
    return call("restore", table, stub(options.checkpointDeadline()).restore(
        RestoreRequest.newBuilder().setTable(table).setDirectory(directory).addAllFiles(files)
            .build()), RestoreResponse::getKeys);
  }

  @Override
  public CompletableFuture<StatsResponse> stats() {
    return call("stats", null, data().stats(StatsRequest.getDefaultInstance()), r -> r);
  }

  @Override
  public void close() {
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
