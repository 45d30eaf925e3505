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

  /**
   * Reply of a find/findOrInsert: rows FLOAT [n, dim] readable by absolute bulk get (null when
   * omitted), the found/admitted bitmap (null: all found) and frequencies (null unless asked).
   */
  record RowsReply(FloatBuffer rows, byte[] found, long[] frequencies) {}

  /**
   * What a findOrInsert does besides creating admitted keys.
   *
   * @param count add occurrences to frequencies and admission counts
   * @param rows return the rows
   * @param frequencies return each key's count after the call
   */
  record InsertMode(boolean count, boolean rows, boolean frequencies) {}

  CompletableFuture<TableInfo> create(TableConfig config);

  CompletableFuture<TableInfo> describe(String table);

  CompletableFuture<Void> drop(String table);

  CompletableFuture<RowsReply> find(String table, PackedKeys keys);

  /** @param occurrences per-key counts, or null for 1 each */
  CompletableFuture<RowsReply> findOrInsert(String table, PackedKeys keys, int[] occurrences,
      InsertMode mode);

  CompletableFuture<Integer> applyGradients(String table, PackedKeys keys, float[] gradients,
      float learningRate, long step);

  /** @param distinct drawn keys once each with their rows (see {@link SampleCandidates}) */
  CompletableFuture<SampleCandidates> sample(String table, PackedKeys positives, int numSampled,
      SamplerKind sampler, float alpha, long seed, boolean distinct);

  CompletableFuture<TopKHits> topK(String table, float[] queries, int numQueries, int k,
      boolean biasLastDim, Metric metric, PackedKeys exclude);

  CompletableFuture<CheckpointFile> save(String table, String directory, long step);

  CompletableFuture<Long> restore(String table, String directory, List<CheckpointFile> files);

  CompletableFuture<StatsResponse> stats();

  @Override
  void close();
}
