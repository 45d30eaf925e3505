package dev.dynembed.table.client;

import dev.dynembed.table.client.internal.Futures;
import dev.dynembed.table.client.internal.ReadBatch;
import dev.dynembed.table.v1.SamplerKind;
import java.util.concurrent.CompletableFuture;

/**
 * The reads of one training step, for any tables, sent together: reads of tables opened from one
 * sharded client travel as <em>one {@code Read} call per shard</em>, instead of one call per
 * table and verb. Add reads, {@link #submit()}, then take each result from its future (which
 * completes once its shards have answered; {@link #join} waits for one and rethrows its {@link
 * dev.dynembed.table.common.TableException}).
 *
 * <p>Each read means exactly what the {@link EmbeddingTable} method of the same name means; bad
 * input (an over-long key, an oversized batch) is refused when the read is added. Not
 * thread-safe; use a batch once.
 */
public final class TableReads {
  private final ReadBatch batch = new ReadBatch();

  /** As {@link EmbeddingTable#findOrInsert(String[], boolean)}: FLOAT [n, dim]. */
  public CompletableFuture<float[]> findOrInsert(EmbeddingTable table, String[] keys,
      boolean count) {
    return batch.findOrInsert(table, keys, count);
  }

  /**
   * As {@link EmbeddingTable#findOrInsert(String[], boolean)}, also returning each key's
   * optimizer slots and update count: with them a caller can replay an update it has in flight
   * exactly as the table will apply it ({@link dev.dynembed.table.common.RowOptimizer}). Only
   * tables of {@link TableClients} return optimizer state ({@link #returnsState}).
   */
  public CompletableFuture<TableRows> lookup(EmbeddingTable table, String[] keys, boolean count) {
    return batch.lookupWithState(table, keys, count);
  }

  /** Whether {@link #lookup} and the optimizer state of sampled rows work for this table. */
  public static boolean returnsState(EmbeddingTable table) {
    return table instanceof dev.dynembed.table.client.internal.ShardedTable;
  }

  /** As {@link EmbeddingTable#find(String...)}. */
  public CompletableFuture<FindResult> find(EmbeddingTable table, String[] keys) {
    return batch.find(table, keys);
  }

  /** As {@link EmbeddingTable#sampleDistinct}. */
  public CompletableFuture<SampledRows> sampleDistinct(EmbeddingTable table, String[] positives,
      int numSampled, SamplerKind sampler, float alpha, long seed) {
    return batch.sampleDistinct(table, positives, numSampled, sampler, alpha, seed, false);
  }

  /**
   * As above; with {@code withState} the drawn keys' optimizer slots and update counts come too
   * ({@link SampledRows#slots()}; see {@link #lookup}).
   */
  public CompletableFuture<SampledRows> sampleDistinct(EmbeddingTable table, String[] positives,
      int numSampled, SamplerKind sampler, float alpha, long seed, boolean withState) {
    return batch.sampleDistinct(table, positives, numSampled, sampler, alpha, seed, withState);
  }

  /** As {@link EmbeddingTable#pooled}: FLOAT [bags, dim]. */
  public CompletableFuture<float[]> pooled(EmbeddingTable table, String[] keys,
      dev.dynembed.table.common.KeyBags bags, boolean insert, boolean count) {
    return batch.pooled(table, keys, bags, insert, count);
  }

  /** Sends every read; the returned future completes when all have. */
  public CompletableFuture<Void> submit() {
    return batch.submit();
  }

  /** Waits for a result of this API; a failure is rethrown as its TableException. */
  public static <T> T join(CompletableFuture<T> result) {
    return Futures.await(result);
  }
}
