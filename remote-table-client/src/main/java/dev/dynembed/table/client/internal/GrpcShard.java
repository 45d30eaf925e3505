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
import dev.dynembed.table.server.SampleCandidates;
import dev.dynembed.table.server.TopKHits;
import dev.dynembed.table.v1.*;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A remote shard over gRPC. Idempotent calls are retried on UNAVAILABLE by gRPC's own retry
 * policy (service config); ApplyGradients never is. Every call has a deadline.
 */
public final class GrpcShard implements Shard {
  private static final String SERVICE = "dynembed.table.v1.EmbeddingTableService";
  private static final List<String> IDEMPOTENT = List.of("CreateTable", "DescribeTable",
      "DropTable", "Find", "FindOrInsert", "Sample", "TopK", "Save", "Restore", "Stats");

  private final int index;
  private final String endpoint;
  private final ManagedChannel channel;
  private final EmbeddingTableServiceGrpc.EmbeddingTableServiceFutureStub stub;
  private final ClientOptions options;

  public GrpcShard(int index, String endpoint, ClientOptions options) {
    this.index = index;
    this.endpoint = endpoint;
    this.options = options;
    this.channel = NettyChannelBuilder.forTarget(endpoint)
        .usePlaintext()
        // replies are handed to the caller's future straight from the event loop (no hop
        // through a callback executor); nothing blocking runs in those callbacks
        .directExecutor()
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

  private static Shard.RowsReply rows(FindResponse r) {
    FloatBuffer fb = r.getRows().isEmpty() ? null
        : r.getRows().asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    long[] freqs = null;
    if (r.getFrequenciesCount() > 0) {
      freqs = new long[r.getFrequenciesCount()];
      for (int i = 0; i < freqs.length; i++) {
        freqs[i] = r.getFrequencies(i);
      }
    }
    return new Shard.RowsReply(fb, r.getFound().isEmpty() ? null : r.getFound().toByteArray(),
        freqs);
  }

  @Override
  public CompletableFuture<Shard.RowsReply> find(String table, PackedKeys keys) {
    return call("find", table, data().find(
        FindRequest.newBuilder().setTable(table).setKeys(keys.toProto()).build()),
        GrpcShard::rows);
  }

  @Override
  public CompletableFuture<Shard.RowsReply> findOrInsert(String table, PackedKeys keys,
      int[] occurrences, InsertMode mode) {
    FindOrInsertRequest.Builder b =
        FindOrInsertRequest.newBuilder().setTable(table).setKeys(keys.toProto())
            .setNoCount(!mode.count()).setOmitRows(!mode.rows())
            .setWithFrequencies(mode.frequencies());
    if (occurrences != null) {
      for (int o : occurrences) {
        b.addOccurrences(o);
      }
    }
    return call("findOrInsert", table, data().findOrInsert(b.build()), GrpcShard::rows);
  }

  @Override
  public CompletableFuture<Integer> applyGradients(String table, PackedKeys keys,
      float[] gradients, float learningRate, long step) {
    return call("applyGradients", table, data().applyGradients(ApplyGradientsRequest.newBuilder()
        .setTable(table).setKeys(keys.toProto()).setGradients(Rows.encode(gradients))
        .setLearningRate(learningRate).setStep(step).build()),
        ApplyGradientsResponse::getRowsUpdated);
  }

  @Override
  public CompletableFuture<SampleCandidates> sample(String table, PackedKeys positives,
      int numSampled, SamplerKind sampler, float alpha, long seed, boolean distinct) {
    return call("sample", table, data().sample(SampleRequest.newBuilder()
        .setTable(table).setPositives(positives.toProto()).setNumSampled(numSampled)
        .setSampler(sampler).setAlpha(alpha).setSeed(seed).setDistinctWithRows(distinct)
        .build()), r -> {
          int n = r.getIsPositiveCount();
          boolean[] pos = new boolean[n];
          double[] prob = new double[n];
          for (int i = 0; i < n; i++) {
            pos[i] = r.getIsPositive(i);
            prob[i] = r.getProbability(i);
          }
          float[] rows = null;
          int[] drawIndex = null;
          if (distinct) {
            rows = Rows.decode(r.getRows());
            drawIndex = new int[r.getDrawIndexCount()];
            for (int j = 0; j < drawIndex.length; j++) {
              drawIndex[j] = r.getDrawIndex(j);
            }
          }
          return new SampleCandidates(PackedKeys.fromProto(r.getKeys(), Limits.MAX_KEY_BYTES,
              "sampled keys"), pos, prob, r.getMass(), (int) r.getNumKeys(), rows, drawIndex);
        });
  }

  @Override
  public CompletableFuture<TopKHits> topK(String table, float[] queries, int numQueries, int k,
      boolean biasLastDim, Metric metric, PackedKeys exclude) {
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
          return new TopKHits(PackedKeys.fromProto(r.getKeys(), Limits.MAX_KEY_BYTES, "top-k keys"),
              scores, counts);
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
