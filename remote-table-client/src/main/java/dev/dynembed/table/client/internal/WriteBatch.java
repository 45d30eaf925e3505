package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.Internal;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import dev.dynembed.table.client.spi.Shard;

/**
 * Gradients of several tables gathered into one call per shard (the implementation of {@link
 * dev.dynembed.table.client.TableWrites}); tables of other implementations get their own
 * {@code applyGradients} when the batch is submitted.
 */
@Internal
public final class WriteBatch {
  private final Map<SlotRouter, List<ShardCalls.WriteItem>> groups = new IdentityHashMap<>();
  private final List<Runnable> others = new ArrayList<>();
  private final List<CompletableFuture<Integer>> results = new ArrayList<>();
  private boolean submitted;

  public CompletableFuture<Integer> applyGradients(EmbeddingTable t, String[] keys,
      float[] gradients, float learningRate, long step) {
    checkOpen();
    if (t instanceof ShardedTable st) {
      ShardedTable.Writes w = st.gradientWrites(keys, gradients, learningRate, step);
      if (!w.items().isEmpty()) {
        groups.computeIfAbsent(st.router(), k -> new ArrayList<>()).addAll(w.items());
      }
      results.add(w.result());
      return w.result();
    }
    return other(() -> t.applyGradients(keys, gradients, learningRate, step));
  }

  /** The gradients of a pooled lookup ({@link EmbeddingTable#applyPooledGradients}). */
  public CompletableFuture<Integer> applyPooledGradients(EmbeddingTable t, String[] keys,
      dev.dynembed.table.common.KeyBags bags, float[] bagGradients, float learningRate,
      long step) {
    checkOpen();
    if (t instanceof ShardedTable st && st.cache() != null) { // spread here, then cached
      return applyGradients(t, keys, st.spreadPooled(keys, bags, bagGradients), learningRate,
          step);
    }
    if (t instanceof ShardedTable st) {
      return add(st, st.pooledGradientItem(keys, bags, bagGradients, learningRate, step));
    }
    return other(() -> t.applyPooledGradients(keys, bags, bagGradients, learningRate, step));
  }

  private void checkOpen() {
    if (submitted) {
      throw new IllegalStateException("this batch of writes was already submitted");
    }
  }

  /** A routed write of a sharded table, sent with its shards' calls. */
  private CompletableFuture<Integer> add(ShardedTable st, ShardCalls.WriteItem w) {
    groups.computeIfAbsent(st.router(), k -> new ArrayList<>()).add(w);
    results.add(w.result);
    return w.result;
  }

  /** A write of a table of another implementation, made when the batch is submitted. */
  private CompletableFuture<Integer> other(java.util.function.Supplier<Integer> write) {
    CompletableFuture<Integer> f = new CompletableFuture<>();
    others.add(() -> {
      try {
        f.complete(write.get());
      } catch (RuntimeException e) {
        f.completeExceptionally(e);
      }
    });
    results.add(f);
    return f;
  }

  /** Whether nothing was added. */
  public boolean isEmpty() {
    return results.isEmpty();
  }

  /** Sends every batch: one call per shard per client. Completes when every write has. */
  public CompletableFuture<Void> submit() {
    checkOpen();
    submitted = true;
    groups.forEach(ShardCalls::write);
    others.forEach(Runnable::run);
    return CompletableFuture.allOf(results.toArray(new CompletableFuture[0]));
  }
}
