package dev.dynembed.table.client;

import dev.dynembed.table.client.internal.WriteBatch;
import java.util.concurrent.CompletableFuture;

/**
 * The gradients of one training step, for any tables, sent together: batches of tables opened
 * from one sharded client travel as <em>one {@code Write} call per shard</em>. Each batch means
 * what {@link EmbeddingTable#applyGradients} means; a routed batch is checked whole when it is
 * added, and a shard checks every batch of a call before applying any. Not thread-safe; use once.
 */
public final class TableWrites {
  private final WriteBatch batch = new WriteBatch();

  /** As {@link EmbeddingTable#applyGradients}; the future gives the distinct keys updated. */
  public CompletableFuture<Integer> applyGradients(EmbeddingTable table, String[] keys,
      float[] gradients, float learningRate, long step) {
    return batch.applyGradients(table, keys, gradients, learningRate, step);
  }

  /** As {@link EmbeddingTable#applyPooledGradients}. */
  public CompletableFuture<Integer> applyPooledGradients(EmbeddingTable table, String[] keys,
      dev.dynembed.table.common.KeyBags bags, float[] bagGradients, float learningRate,
      long step) {
    return batch.applyPooledGradients(table, keys, bags, bagGradients, learningRate, step);
  }

  /** Whether no batch was added. */
  public boolean isEmpty() {
    return batch.isEmpty();
  }

  /** Sends every batch; the returned future completes when all are applied. */
  public CompletableFuture<Void> submit() {
    return batch.submit();
  }
}
