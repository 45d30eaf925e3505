package dev.dynembed.table.client.internal;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.server.SampleCandidates;
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

/**
 * One shard as the client sees it: in-process ({@link LocalShard}) or remote ({@link GrpcShard}).
 * Futures fail with {@link dev.dynembed.table.common.TableException}s that already name the
 * table, shard and call.
 */
public interface Shard extends AutoCloseable {
  int index();

  /** Rows of a find/findOrInsert: FLOAT [n, dim] readable by absolute bulk get. */
  record RowsReply(FloatBuffer rows, byte[] found) {}

  CompletableFuture<TableInfo> create(TableConfig config);

  CompletableFuture<TableInfo> describe(String table);

  CompletableFuture<Void> drop(String table);

  CompletableFuture<RowsReply> find(String table, PackedKeys keys);

  /** @param occurrences per-key counts, or null for 1 each */
  CompletableFuture<RowsReply> findOrInsert(String table, PackedKeys keys, int[] occurrences);

  CompletableFuture<Integer> applyGradients(String table, PackedKeys keys, float[] gradients,
      float learningRate, long step);

  CompletableFuture<SampleCandidates> sample(String table, PackedKeys positives, int numSampled,
      SamplerKind sampler, float alpha, long seed);

  CompletableFuture<TopKHits> topK(String table, float[] queries, int numQueries, int k,
      boolean biasLastDim, Metric metric, PackedKeys exclude);

  CompletableFuture<CheckpointFile> save(String table, String directory, long step);

  CompletableFuture<Long> restore(String table, String directory, List<CheckpointFile> files);

  CompletableFuture<StatsResponse> stats();

  @Override
  void close();
}
