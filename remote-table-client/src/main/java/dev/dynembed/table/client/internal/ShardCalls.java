package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.ReplyRows;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.TableException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Reads and writes of any number of tables of one deployment, as one call per shard.
 *
 * <p>Each {@link ReadItem} is one table read split over the shards (a routed lookup, the draws of
 * a sampler); {@link #read} gathers every item's part for shard s into one {@link Shard#read}
 * call, sends the calls to all shards at once, and when every shard has answered lets each item
 * merge its parts into its result, in the thread that completed the last reply. A failing shard
 * fails every item, with the first failure by shard order. Writes go the same way.
 *
 * <p>A call carries the slot map epoch its items were routed by (the oldest, when items were
 * routed at different epochs); a shard that routes by a newer map refuses it whole and its
 * items are re-routed ({@link Rerouted}).
 */
final class ShardCalls {
  /**
   * A shard's reply as a client that opened {@code table} at width {@code opened} reads it: rows
   * and slot rows ({@code slotBlocks} per key) of a shard that grew the table since are cut to
   * their old columns, which such a caller goes on training (its writes are widened with zero
   * columns, {@link Widening}); a shard narrower than the client is refused by name (the client
   * opened the table while a grow was under way: finish it, open the table again).
   */
  static Object narrowed(String table, Object reply, int opened, int slotBlocks) {
    if (reply instanceof Shard.RowsReply r) {
      ReplyRows rows = narrowed(table, r.rows(), 1, opened);
      ReplyRows slots = narrowed(table, r.slots(), slotBlocks, opened);
      return rows == r.rows() && slots == r.slots() ? r
          : new Shard.RowsReply(rows, r.found(), r.frequencies(), slots, r.updateCounts());
    }
    if (reply instanceof Shard.SampleReply r) {
      ReplyRows rows = narrowed(table, r.rows(), 1, opened);
      ReplyRows slots = narrowed(table, r.slots(), slotBlocks, opened);
      return rows == r.rows() && slots == r.slots() ? r
          : new Shard.SampleReply(r.keys(), r.positive(), r.probability(), r.mass(), r.numKeys(),
              rows, r.drawIndex(), slots, r.updateCounts());
    }
    if (reply instanceof Shard.PooledReply r) {
      ReplyRows pooled = narrowed(table, r.pooled(), 1, opened);
      return pooled == r.pooled() ? r : new Shard.PooledReply(pooled, r.found());
    }
    return reply;
  }

  /**
   * {@code rows} cut to {@code opened} columns per block; refused when narrower than that: the
   * client opened the table while a grow was under way (a shard not grown yet), and rows sliced
   * at the new width would be wrong, not short.
   */
  private static ReplyRows narrowed(String table, ReplyRows rows, int blocks, int opened) {
    if (rows == null || blocks == 0 || rows.dim == blocks * opened) {
      return rows;
    }
    if (rows.dim / blocks < opened) {
      throw TableException.precondition("table '%s' has rows of dim %d on a shard but was opened"
          + " here at dim %d: a grow has not reached every shard (run it again to finish it)",
          table, rows.dim / blocks, opened);
    }
    return rows.narrowed(blocks, opened);
  }

  private ShardCalls() {}

  /** One table read, split over shards. */
  abstract static class ReadItem<T> {
    final CompletableFuture<T> result = new CompletableFuture<>();
    private int[] slot;
    /** The slot map epoch the item's keys were routed by. */
    final long epoch;
    /** The client's shards when it was routed (a client of a cluster map may have more now). */
    final int shards;

    ReadItem(long epoch, int shards) {
      this.epoch = epoch;
      this.shards = shards;
    }

    /** This item's request to shard s, or null when it has nothing there. */
    abstract Shard.Read request(int shard);

    /** The result from each shard's reply (null for a shard that got no request). */
    abstract T merge(Object[] replies);

    /**
     * The reads this item is made of, sent in its place, or null when it is sent as it is; a
     * composite's {@link #merge} is then called with no replies once every part completed.
     */
    List<? extends ReadItem<?>> parts() {
      return null;
    }
  }

  /** One table's gradients, split over shards. */
  abstract static class WriteItem {
    final CompletableFuture<Integer> result = new CompletableFuture<>();
    private int[] slot;
    /** The slot map epoch the item's keys were routed by. */
    final long epoch;
    /** The client's shards when it was routed (a client of a cluster map may have more now). */
    final int shards;

    WriteItem(long epoch, int shards) {
      this.epoch = epoch;
      this.shards = shards;
    }

    abstract Shard.Write request(int shard);
  }

  /** Sends the items' parts, one read call per shard, and completes each item's result. */
  static CompletableFuture<Void> read(SlotRouter router, List<? extends ReadItem<?>> given) {
    List<ReadItem<?>> items = new ArrayList<>(given.size());
    List<ReadItem<?>> composites = new ArrayList<>(0);
    for (ReadItem<?> it : given) {
      List<? extends ReadItem<?>> parts = it.parts();
      if (parts == null) {
        items.add(it);
      } else {
        items.addAll(parts);
        composites.add(it);
      }
    }
    int n = router.shards().size();
    long epoch = Long.MAX_VALUE; // the oldest routing: a shard at a newer map re-routes them all
    for (ReadItem<?> it : items) {
      epoch = Math.min(epoch, it.epoch);
    }
    List<CompletableFuture<List<Object>>> calls = new ArrayList<>(n);
    for (ReadItem<?> it : items) {
      it.slot = new int[n];
    }
    for (int s = 0; s < n; s++) {
      List<Shard.Read> reqs = new ArrayList<>();
      for (ReadItem<?> it : items) {
        Shard.Read r = s < it.shards ? it.request(s) : null;
        it.slot[s] = r == null ? -1 : reqs.size();
        if (r != null) {
          reqs.add(r);
        }
      }
      calls.add(reqs.isEmpty() ? null : Rerouted.read(router, s, reqs, epoch, 0));
    }
    return Futures.all(calls).handle((replies, failure) -> {
      for (ReadItem<?> it : items) {
        complete(it, replies, failure);
      }
      for (ReadItem<?> it : composites) {
        completeComposite(it);
      }
      return null;
    });
  }

  private static <T> void completeComposite(ReadItem<T> it) {
    for (ReadItem<?> p : it.parts()) {
      if (p.result.isCompletedExceptionally()) {
        p.result.whenComplete((v, e) -> it.result.completeExceptionally(Futures.unwrap(e)));
        return;
      }
    }
    try {
      it.result.complete(it.merge(null));
    } catch (RuntimeException e) {
      it.result.completeExceptionally(Futures.unwrap(e));
    }
  }

  private static <T> void complete(ReadItem<T> it, List<List<Object>> replies,
      Throwable failure) {
    if (failure != null) {
      it.result.completeExceptionally(Futures.unwrap(failure));
      return;
    }
    Object[] parts = new Object[it.shards];
    for (int s = 0; s < parts.length; s++) {
      parts[s] = it.slot[s] < 0 ? null : replies.get(s).get(it.slot[s]);
    }
    try {
      it.result.complete(it.merge(parts));
    } catch (RuntimeException e) {
      it.result.completeExceptionally(Futures.unwrap(e));
    }
  }

  /** Sends the items' parts, one write call per shard, and completes each item's result. */
  static CompletableFuture<Void> write(SlotRouter router, List<? extends WriteItem> items) {
    int n = router.shards().size();
    long epoch = Long.MAX_VALUE;
    for (WriteItem it : items) {
      epoch = Math.min(epoch, it.epoch);
    }
    List<CompletableFuture<int[]>> calls = new ArrayList<>(n);
    for (WriteItem it : items) {
      it.slot = new int[n];
    }
    for (int s = 0; s < n; s++) {
      List<Shard.Write> reqs = new ArrayList<>();
      for (WriteItem it : items) {
        Shard.Write w = s < it.shards ? it.request(s) : null;
        it.slot[s] = w == null ? -1 : reqs.size();
        if (w != null) {
          reqs.add(w);
        }
      }
      calls.add(reqs.isEmpty() ? null : Widening.write(router, s, reqs, epoch));
    }
    return Futures.all(calls).handle((replies, failure) -> {
      for (WriteItem it : items) {
        if (failure != null) {
          it.result.completeExceptionally(Futures.unwrap(failure));
          continue;
        }
        int total = 0;
        for (int s = 0; s < n; s++) {
          total += it.slot[s] < 0 ? 0 : replies.get(s)[it.slot[s]];
        }
        it.result.complete(total);
      }
      return null;
    });
  }
}
