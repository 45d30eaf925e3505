package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.EmbeddingTable;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Gradients of several tables gathered into one call per shard (the implementation of {@link
 * dev.dynembed.table.client.TableWrites}); tables of other implementations get their own
 * {@code applyGradients} when the batch is submitted.
 */
public final class WriteBatch {
  private final Map<List<Shard>, List<ShardCalls.WriteItem>> groups = new IdentityHashMap<>();
  private final List<Runnable> others = new ArrayList<>();
  private final List<CompletableFuture<Integer>> results = new ArrayList<>();
  private boolean submitted;

  public CompletableFuture<Integer> applyGradients(EmbeddingTable t, String[] keys,
      float[] gradients, float learningRate, long step) {
    if (submitted) {
      throw new IllegalStateException("this batch of writes was already submitted");
    }
    if (t instanceof ShardedTable st) {
      GradientWrite w = st.gradientItem(keys, gradients, learningRate, step);
      groups.computeIfAbsent(st.shards(), k -> new ArrayList<>()).add(w);
      results.add(w.result);
      return w.result;
    }
    CompletableFuture<Integer> f = new CompletableFuture<>();
    others.add(() -> {
      try {
        f.complete(t.applyGradients(keys, gradients, learningRate, step));
      } catch (RuntimeException e) {
        f.completeExceptionally(e);
      }
    });
    results.add(f);
    return f;
  }

  /** The gradients of a pooled lookup ({@link EmbeddingTable#applyPooledGradients}). */
  public CompletableFuture<Integer> applyPooledGradients(EmbeddingTable t, String[] keys,
      dev.dynembed.table.common.KeyBags bags, float[] bagGradients, float learningRate,
      long step) {
    if (submitted) {
      throw new IllegalStateException("this batch of writes was already submitted");
    }
    if (t instanceof ShardedTable st) {
      PooledWrite w = st.pooledGradientItem(keys, bags, bagGradients, learningRate, step);
      groups.computeIfAbsent(st.shards(), k -> new ArrayList<>()).add(w);
      results.add(w.result);
      return w.result;
    }
    CompletableFuture<Integer> f = new CompletableFuture<>();
    others.add(() -> {
      try {
        f.complete(t.applyPooledGradients(keys, bags, bagGradients, learningRate, step));
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
    if (submitted) {
      throw new IllegalStateException("this batch of writes was already submitted");
    }
    submitted = true;
    groups.forEach(ShardCalls::write);
    others.forEach(Runnable::run);
    return CompletableFuture.allOf(results.toArray(new CompletableFuture[0]));
  }
}
