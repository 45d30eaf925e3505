package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.Internal;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.client.TableRows;
import dev.dynembed.table.v1.SamplerKind;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import dev.dynembed.table.client.spi.Shard;

/**
 * Reads of several tables gathered into one call per shard (the implementation of {@link
 * dev.dynembed.table.client.TableReads}). Tables of one sharded client share their shards' calls;
 * any other {@link EmbeddingTable} is read through its own methods when the batch is submitted.
 */
@Internal
public final class ReadBatch {
  private final Map<SlotRouter, List<ShardCalls.ReadItem<?>>> groups = new IdentityHashMap<>();
  private final List<Runnable> others = new ArrayList<>();
  /** Row caches of the batch's tables: a flush in flight is waited for before sending. */
  private final Map<RowCache, Boolean> caches = new IdentityHashMap<>();
  private boolean submitted;

  private void checkOpen() {
    if (submitted) {
      throw new IllegalStateException("this batch of reads was already submitted");
    }
  }

  private <T> CompletableFuture<T> add(ShardedTable t, ShardCalls.ReadItem<T> item) {
    checkOpen();
    if (t.cache() != null) {
      caches.put(t.cache(), Boolean.TRUE);
    }
    groups.computeIfAbsent(t.router(), k -> new ArrayList<>()).add(item);
    return item.result;
  }

  /** A read of a table of another implementation, made when the batch is submitted. */
  private <T> CompletableFuture<T> other(Supplier<T> read) {
    checkOpen();
    CompletableFuture<T> f = new CompletableFuture<>();
    others.add(() -> {
      try {
        f.complete(read.get());
      } catch (RuntimeException e) {
        f.completeExceptionally(e);
      }
    });
    return f;
  }

  public CompletableFuture<float[]> findOrInsert(EmbeddingTable t, String[] keys, boolean count) {
    if (t instanceof ShardedTable st) {
      return add(st, st.rowsItem(keys, new Shard.InsertMode(count, true, false)))
          .thenApply(RowsRead.Result::rows);
    }
    return other(() -> t.findOrInsert(keys, count));
  }

  /** A findOrInsert that also returns each key's optimizer slots and update count. */
  public CompletableFuture<TableRows> lookupWithState(EmbeddingTable t, String[] keys,
      boolean count) {
    if (!(t instanceof ShardedTable st)) {
      throw new IllegalArgumentException("table '" + t.name() + "' (" + t.getClass().getName()
          + ") cannot return optimizer state");
    }
    return add(st, st.rowsItem(keys, new Shard.InsertMode(count, true, false, true)))
        .thenApply(r -> new TableRows(r.rows(), r.found(), r.slots(), r.updateCounts()));
  }

  public CompletableFuture<FindResult> find(EmbeddingTable t, String[] keys) {
    if (t instanceof ShardedTable st) {
      return add(st, st.rowsItem(keys, null)).thenApply(r -> new FindResult(r.rows(), r.found()));
    }
    return other(() -> t.find(keys));
  }

  public CompletableFuture<SampledRows> sampleDistinct(EmbeddingTable t, String[] positives,
      int numSampled, SamplerKind sampler, float alpha, long seed, boolean withSlots) {
    if (t instanceof ShardedTable st && st.cache() != null) { // keys drawn there, rows here
      return st.sampleWithRows(add(st, st.<SampledRows>sampleItem(positives, numSampled,
          sampler, alpha, seed, true, false, true)), withSlots);
    }
    if (t instanceof ShardedTable st) {
      return add(st, st.<SampledRows>sampleItem(positives, numSampled, sampler, alpha, seed,
          true, withSlots));
    }
    if (withSlots) {
      throw new IllegalArgumentException("table '" + t.name() + "' (" + t.getClass().getName()
          + ") cannot return optimizer state");
    }
    return other(() -> t.sampleDistinct(positives, numSampled, sampler, alpha, seed));
  }

  /** A pooled lookup ({@link EmbeddingTable#pooled}): FLOAT [bags, dim]. */
  public CompletableFuture<float[]> pooled(EmbeddingTable t, String[] keys,
      dev.dynembed.table.common.KeyBags bags, boolean insert, boolean count) {
    if (t instanceof ShardedTable st && st.cache() != null) { // rows from the cache, pooled here
      st.checkBags(keys, bags, insert ? "pooled findOrInsert" : "pooled find");
      if (!insert) {
        return find(t, keys).thenApply(r -> bags.pool(r.rows(), t.dim()));
      }
      return findOrInsert(t, bags.entryKeys(keys), count)
          .thenApply(entryRows -> bags.pool(bags.keyRows(entryRows, t.dim()), t.dim()));
    }
    if (t instanceof ShardedTable st) {
      return add(st, st.pooledItem(keys, bags, insert, count));
    }
    return other(() -> t.pooled(keys, bags, insert, count));
  }

  /** Sends every read: one call per shard per client. Completes when every read has. */
  public CompletableFuture<Void> submit() {
    checkOpen();
    submitted = true;
    List<CompletableFuture<?>> all = new ArrayList<>();
    groups.forEach((router, items) -> {
      for (ShardCalls.ReadItem<?> it : items) {
        all.add(it.result);
      }
    });
    // sent once a row cache's flush in flight is applied (a read must see what it sent), without
    // blocking: a pipelined trainer submits from a reply's callback, on a network thread
    List<CompletableFuture<?>> flushes = new ArrayList<>();
    for (RowCache c : caches.keySet()) {
      if (!c.inFlight().isDone()) {
        flushes.add(c.inFlight());
      }
    }
    Runnable send = () -> groups.forEach(ShardCalls::read);
    if (flushes.isEmpty()) {
      send.run();
    } else {
      CompletableFuture.allOf(flushes.toArray(new CompletableFuture[0]))
          .whenComplete((v, e) -> send.run());
    }
    others.forEach(Runnable::run);
    return CompletableFuture.allOf(all.toArray(new CompletableFuture[0]));
  }
}
