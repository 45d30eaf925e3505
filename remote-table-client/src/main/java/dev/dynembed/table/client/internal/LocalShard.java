package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.server.SampleCandidates;
import dev.dynembed.table.server.ShardEngine;
import dev.dynembed.table.server.TableStore;
import dev.dynembed.table.server.TopKHits;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/** The in-process shard: calls the engine directly in the caller's thread. */
public final class LocalShard implements Shard {
  private final ShardEngine engine;

  public LocalShard(ShardEngine engine) {
    this.engine = engine;
  }

  public ShardEngine engine() {
    return engine;
  }

  @Override
  public int index() {
    return engine.shardIndex();
  }

  private <T> CompletableFuture<T> call(String call, String table, Supplier<T> body) {
    try {
      return CompletableFuture.completedFuture(body.get());
    } catch (TableException e) {
      return CompletableFuture.failedFuture(
          TableException.of(e.code(), e.getMessage(), table, -1, call, e));
    }
  }

  @Override
  public CompletableFuture<TableInfo> create(TableConfig config) {
    return call("createTable", config.getName(), () -> engine.info(engine.create(config)));
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table, () -> engine.info(engine.get(table)));
  }

  @Override
  public CompletableFuture<Void> drop(String table) {
    return call("dropTable", table, () -> {
      engine.drop(table);
      return null;
    });
  }

  @Override
  public CompletableFuture<RowsReply> find(String table, PackedKeys keys) {
    return call("find", table, () -> {
      TableStore t = engine.get(table);
      float[] rows = new float[keys.size() * t.dim()];
      byte[] found = new byte[(keys.size() + 7) >>> 3];
      t.find(keys, rows, found);
      return new RowsReply(FloatBuffer.wrap(rows), found, null);
    });
  }

  @Override
  public CompletableFuture<RowsReply> findOrInsert(String table, PackedKeys keys, int[] occurrences,
      InsertMode mode) {
    return call("findOrInsert", table, () -> {
      TableStore t = engine.get(table);
      float[] rows = mode.rows() ? new float[keys.size() * t.dim()] : null;
      byte[] found = new byte[(keys.size() + 7) >>> 3];
      long[] freqs = mode.frequencies() ? new long[keys.size()] : null;
      t.findOrInsert(keys, occurrences, mode.count(), rows, found, freqs);
      return new RowsReply(rows == null ? null : FloatBuffer.wrap(rows), found, freqs);
    });
  }

  @Override
  public CompletableFuture<Integer> applyGradients(String table, PackedKeys keys,
      float[] gradients, float learningRate, long step) {
    return call("applyGradients", table,
        () -> engine.get(table).applyGradients(keys, gradients, learningRate, step));
  }

  @Override
  public CompletableFuture<SampleCandidates> sample(String table, PackedKeys positives,
      int numSampled, SamplerKind sampler, float alpha, long seed, boolean distinct) {
    return call("sample", table,
        () -> engine.sample(table, positives, numSampled, sampler, alpha, seed, distinct));
  }

  @Override
  public CompletableFuture<TopKHits> topK(String table, float[] queries, int numQueries, int k,
      boolean biasLastDim, Metric metric, PackedKeys exclude) {
    return call("topK", table,
        () -> engine.topK(table, queries, numQueries, k, biasLastDim, metric, exclude));
  }

  @Override
  public CompletableFuture<CheckpointFile> save(String table, String directory, long step) {
    return call("save", table, () -> engine.save(table, directory, step));
  }

  @Override
  public CompletableFuture<Long> restore(String table, String directory,
      List<CheckpointFile> files) {
    return call("restore", table, () -> engine.restore(table, directory, files));
  }

  @Override
  public CompletableFuture<StatsResponse> stats() {
    return call("stats", null, () -> {
      StatsResponse.Builder b = StatsResponse.newBuilder()
          .setShardIndex(engine.shardIndex()).setNumShards(engine.numShards());
      for (TableStore t : engine.tables()) {
        b.addTables(engine.info(t));
      }
      return b.build();
    });
  }

  @Override
  public void close() {}
}
