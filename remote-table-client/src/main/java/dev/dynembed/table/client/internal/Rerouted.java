package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.ReplyRows;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * A shard's call sent by a slot map epoch, and resent by the newer map when the shard refuses it
 * as MOVED (docs/design/0021-slot-moves-proposal.md). A MOVED refusal comes before the shard
 * applied anything of the call, so its items may go to their keys' new owners: each item is split
 * by the new map into parts (one per owner, sent with the other refused items' parts in one call
 * per owner, at the new epoch and with new call ids), and the parts' replies are put together
 * into the reply the refusing shard would have given, so the items' own merging does not change.
 * A part refused again (the map moved on meanwhile) is resent the same way, a bounded number of
 * times.
 */
final class Rerouted {
  private Rerouted() {}

  /** Resends of one call before giving up (each follows a newer map). */
  static final int MAX_MOVES = 8;

  /** The MOVED refusal in a failure, or null. */
  static TableException moved(Throwable failure) {
    Throwable t = failure;
    while ((t instanceof CompletionException || t instanceof java.util.concurrent.ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t instanceof TableException e && e.isMoved() ? e : null;
  }

  // ------------------------------------------------------------------ reads

  /** Shard {@code s}'s read call at {@code epoch}, re-routed if the shard says MOVED. */
  static CompletableFuture<List<Object>> read(SlotRouter router, int s, List<Shard.Read> items,
      long epoch, int moves) {
    return onMoved(router.shards().get(s).read(items, epoch), router, moves,
        (map, applied) -> resendReads(router, s, applied ? uncounted(items) : items, map,
            moves + 1));
  }

  /**
   * The call's result; if the shard refused it as MOVED, {@code resend}'s by the map read after
   * the refusal (up to {@link #MAX_MOVES} times in a row).
   */
  private static <T> CompletableFuture<T> onMoved(CompletableFuture<T> call, SlotRouter router,
      int moves,
      java.util.function.BiFunction<SlotMap, Boolean, CompletableFuture<T>> resend) {
    return call.exceptionallyCompose(e -> {
      TableException m = moved(e);
      if (m == null) {
        return CompletableFuture.failedFuture(e);
      }
      if (moves >= MAX_MOVES) {
        return CompletableFuture.failedFuture(tooManyMoves(m));
      }
      boolean applied = m.isMovedAfterApplied();
      return router.refreshAsync(TableException.movedEpoch(m.getMessage()))
          .thenCompose(map -> resend.apply(map, applied));
    });
  }

  /**
   * The items of a read the refusing shard had applied before (a resend whose first reply was
   * lost, {@link TableException#isMovedAfterApplied}): its counting happened there, so the
   * re-routed parts count nothing (the counts moved with the rows).
   */
  private static List<Shard.Read> uncounted(List<Shard.Read> items) {
    List<Shard.Read> out = new ArrayList<>(items.size());
    for (Shard.Read r : items) {
      if (r instanceof Shard.FindOrInsert f && f.mode().count()) {
        Shard.InsertMode m = f.mode();
        out.add(new Shard.FindOrInsert(f.table(), f.keys(), f.occurrences(),
            new Shard.InsertMode(false, m.rows(), m.frequencies(), m.slots())));
      } else if (r instanceof Shard.Pooled p && p.count()) {
        out.add(new Shard.Pooled(p.table(), p.keys(), p.bags(), p.insert(), false));
      } else {
        out.add(r);
      }
    }
    return out;
  }

  private static TableException tooManyMoves(TableException last) {
    return TableException.of(ErrorCode.UNAVAILABLE, "slots moved " + MAX_MOVES + " times while"
        + " one call was resent; resend it (" + last.getMessage() + ")", null, -1, null, last);
  }

  /** A refused item's parts: per owner, its sub-request (null: none) and how to join them. */
  private abstract static class Parts {
    final Shard.Read[] byOwner;

    Parts(int n) {
      byOwner = new Shard.Read[n];
    }

    /** The refusing shard's reply, from the parts' replies (null where no part went). */
    abstract Object join(Object[] replies);
  }

  private static CompletableFuture<List<Object>> resendReads(SlotRouter router, int refused,
      List<Shard.Read> items, SlotMap map, int moves) {
    int n = router.shards().size();
    List<Parts> parts = new ArrayList<>(items.size());
    for (Shard.Read r : items) {
      parts.add(split(r, map, n, refused));
    }
    List<CompletableFuture<List<Object>>> calls = new ArrayList<>(n);
    int[][] at = new int[items.size()][n];
    for (int o = 0; o < n; o++) {
      List<Shard.Read> reqs = new ArrayList<>();
      for (int i = 0; i < items.size(); i++) {
        Shard.Read part = parts.get(i).byOwner[o];
        at[i][o] = part == null ? -1 : reqs.size();
        if (part != null) {
          reqs.add(part);
        }
      }
      calls.add(reqs.isEmpty() ? null : read(router, o, reqs, map.epoch(), moves));
    }
    return Futures.all(calls).thenApply(replies -> {
      List<Object> out = new ArrayList<>(items.size());
      for (int i = 0; i < items.size(); i++) {
        Object[] got = new Object[n];
        for (int o = 0; o < n; o++) {
          got[o] = at[i][o] < 0 ? null : replies.get(o).get(at[i][o]);
        }
        out.add(parts.get(i).join(got));
      }
      return out;
    });
  }

  /**
   * A refused item's keys routed by the new map ({@link Routing}), with each key's owner and its
   * index among that owner's keys by the key's position in the item.
   */
  private record KeySplit(Routing route, int[] owner, int[] pos, PackedKeys[] keys) {
    static KeySplit of(PackedKeys k, SlotMap map, int n) {
      Routing route = new Routing(k, map, n);
      int[] owner = new int[k.size()];
      int[] pos = new int[k.size()];
      for (int i = 0; i < owner.length; i++) {
        int u = route.dedup.uniqueOf(i);
        owner[i] = route.shardOfUnique[u];
        pos[i] = route.posInShard[u];
      }
      return new KeySplit(route, owner, pos, route.shardKeys);
    }

    int[] sub(int[] values, int o) {
      if (values == null) {
        return null;
      }
      int[] out = new int[keys[o].size()];
      for (int i = 0; i < owner.length; i++) {
        if (owner[i] == o) {
          out[pos[i]] = values[i];
        }
      }
      return out;
    }
  }

  private static Parts split(Shard.Read r, SlotMap map, int n, int refused) {
    if (r instanceof Shard.Find f) {
      KeySplit ks = KeySplit.of(f.keys(), map, n);
      return rowParts(ks, n, o -> new Shard.Find(f.table(), ks.keys[o]));
    }
    if (r instanceof Shard.FindOrInsert f) {
      KeySplit ks = KeySplit.of(f.keys(), map, n);
      return rowParts(ks, n, o -> new Shard.FindOrInsert(f.table(), ks.keys[o],
          ks.sub(f.occurrences(), o), f.mode()));
    }
    if (r instanceof Shard.Pooled p) {
      return pooledParts(p, map, n);
    }
    if (r instanceof Shard.Partners p) {
      PairSplit ps = PairSplit.of(p.anchors(), map, n);
      Parts parts = new Parts(n) {
        @Override
        Object join(Object[] replies) {
          return ps.join(replies);
        }
      };
      for (int o = 0; o < n; o++) {
        parts.byOwner[o] = ps.partners(p, o);
      }
      return parts;
    }
    return sampleParts((Shard.Sample) r, map, n, refused);
  }

  private static Parts rowParts(KeySplit ks, int n,
      java.util.function.IntFunction<Shard.Read> request) {
    Parts parts = new Parts(n) {
      @Override
      Object join(Object[] replies) {
        int k = ks.owner.length;
        ReplyRows anyRows = null;
        ReplyRows anySlots = null;
        boolean freqs = false;
        boolean counts = false;
        for (Object o : replies) {
          if (o instanceof Shard.RowsReply r) {
            anyRows = r.rows() != null ? r.rows() : anyRows;
            anySlots = r.slots() != null ? r.slots() : anySlots;
            freqs |= r.frequencies() != null;
            counts |= r.updateCounts() != null;
          }
        }
        float[] rows = anyRows == null ? null : new float[k * anyRows.dim];
        float[] slots = anySlots == null ? null : new float[k * anySlots.dim];
        long[] f = freqs ? new long[k] : null;
        long[] c = counts ? new long[k] : null;
        byte[] found = new byte[(k + 7) / 8];
        for (int i = 0; i < k; i++) {
          Shard.RowsReply r = (Shard.RowsReply) replies[ks.owner[i]];
          int p = ks.pos[i];
          if (rows != null) {
            r.rows().get(p, rows, i * anyRows.dim);
          }
          if (slots != null) {
            r.slots().get(p, slots, i * anySlots.dim);
          }
          if (f != null) {
            f[i] = r.frequencies()[p];
          }
          if (c != null) {
            c[i] = r.updateCounts()[p];
          }
          if (r.found(p)) {
            found[i >>> 3] |= (byte) (1 << (i & 7));
          }
        }
        return new Shard.RowsReply(rows == null ? null : ReplyRows.of(rows, anyRows.dim), found,
            f, slots == null ? null : ReplyRows.of(slots, anySlots.dim), c);
      }
    };
    for (int o = 0; o < n; o++) {
      parts.byOwner[o] = ks.keys[o].size() == 0 ? null : request.apply(o);
    }
    return parts;
  }

  private static Parts pooledParts(Shard.Pooled p, SlotMap map, int n) {
    KeySplit ks = KeySplit.of(p.keys(), map, n);
    KeyBags[] bags = ks.route.split(p.bags());
    Parts parts = new Parts(n) {
      @Override
      Object join(Object[] replies) {
        int k = ks.owner.length;
        int dim = ((Shard.PooledReply) replies[ks.owner[0]]).pooled().dim;
        float[] sum = PooledRead.sum(p.table(), replies, p.bags().bags(), dim);
        byte[] found = new byte[(k + 7) / 8];
        for (int i = 0; i < k; i++) {
          Shard.PooledReply r = (Shard.PooledReply) replies[ks.owner[i]];
          if (r.found() == null || (r.found()[ks.pos[i] >>> 3] & (1 << (ks.pos[i] & 7))) != 0) {
            found[i >>> 3] |= (byte) (1 << (i & 7));
          }
        }
        return new Shard.PooledReply(ReplyRows.of(sum, dim), found);
      }
    };
    for (int o = 0; o < n; o++) {
      parts.byOwner[o] = ks.keys[o].size() == 0 ? null
          : new Shard.Pooled(p.table(), ks.keys[o], bags[o], p.insert(), p.count());
    }
    return parts;
  }

  /**
   * A sample: its draws come from the refusing shard again (its own distribution at the new
   * epoch), each positive's probability from its new owner, rescaled to the refusing shard's
   * mass (the item scales every probability of this reply by that shard's share).
   */
  private static Parts sampleParts(Shard.Sample s, SlotMap map, int n, int refused) {
    KeySplit ks = KeySplit.of(s.positives(), map, n);
    Parts parts = new Parts(n) {
      @Override
      Object join(Object[] replies) {
        Shard.SampleReply own = (Shard.SampleReply) replies[refused];
        int np = ks.owner.length;
        int mine = ks.keys[refused].size();
        int draws = own.keys().size() - mine;
        PackedKeys.Builder keys = new PackedKeys.Builder(np + draws);
        boolean[] positive = new boolean[np + draws];
        double[] prob = new double[np + draws];
        for (int i = 0; i < np; i++) {
          keys.add(s.positives(), i);
          positive[i] = true;
          Shard.SampleReply r = (Shard.SampleReply) replies[ks.owner[i]];
          double p = r.probability()[ks.pos[i]];
          if (ks.owner[i] != refused && p > 0) {
            if (!(own.mass() > 0)) {
              throw TableException.of(ErrorCode.UNAVAILABLE, "slots moved during a sample and"
                  + " the shard that drew it holds no key of sampling weight now; resend it",
                  s.table(), refused, "sample", null);
            }
            p = p * r.mass() / own.mass();
          }
          prob[i] = p;
        }
        for (int j = 0; j < draws; j++) {
          keys.add(own.keys(), mine + j);
          prob[np + j] = own.probability()[mine + j];
        }
        return new Shard.SampleReply(keys.build(), positive, prob, own.mass(), own.numKeys(),
            own.rows(), own.drawIndex(), own.slots(), own.updateCounts());
      }
    };
    for (int o = 0; o < n; o++) {
      if (o == refused) {
        parts.byOwner[o] = new Shard.Sample(s.table(), ks.keys[o], s.numSampled(), s.sampler(),
            s.alpha(), s.seed(), s.distinct(), s.noneIfEmpty(), s.withSlots(), s.omitRows());
      } else if (ks.keys[o].size() > 0) {
        parts.byOwner[o] = new Shard.Sample(s.table(), ks.keys[o], 0, s.sampler(), s.alpha(),
            s.seed(), false, true, false);
      }
    }
    return parts;
  }

  // ------------------------------------------------------------------ writes

  /** Shard {@code s}'s write call at {@code epoch}, re-routed if the shard says MOVED. */
  static CompletableFuture<int[]> write(SlotRouter router, int s, List<Shard.Write> items,
      long epoch, int moves) {
    return onMoved(router.shards().get(s).write(items, epoch), router, moves,
        (map, applied) -> resendWrites(router, items, map, moves + 1));
  }

  private static CompletableFuture<int[]> resendWrites(SlotRouter router,
      List<Shard.Write> items, SlotMap map, int moves) {
    int n = router.shards().size();
    Shard.Write[][] parts = new Shard.Write[items.size()][];
    for (int i = 0; i < items.size(); i++) {
      parts[i] = split(items.get(i), map, n);
    }
    List<CompletableFuture<int[]>> calls = new ArrayList<>(n);
    int[][] at = new int[items.size()][n];
    for (int o = 0; o < n; o++) {
      List<Shard.Write> reqs = new ArrayList<>();
      for (int i = 0; i < items.size(); i++) {
        at[i][o] = parts[i][o] == null ? -1 : reqs.size();
        if (parts[i][o] != null) {
          reqs.add(parts[i][o]);
        }
      }
      calls.add(reqs.isEmpty() ? null : write(router, o, reqs, map.epoch(), moves));
    }
    return Futures.all(calls).thenApply(replies -> {
      int[] out = new int[items.size()];
      for (int i = 0; i < out.length; i++) {
        for (int o = 0; o < n; o++) {
          out[i] += at[i][o] < 0 ? 0 : replies.get(o)[at[i][o]];
        }
      }
      return out;
    });
  }

  /** A write's parts by owner: its keys' gradient rows, or its bags' entries of their keys. */
  private static Shard.Write[] split(Shard.Write w, SlotMap map, int n) {
    Shard.Write[] out = new Shard.Write[n];
    if (w.pairs() != null) { // anchors repeat: split in order, nothing summed
      PairSplit ps = PairSplit.of(w.keys(), map, n);
      for (int o = 0; o < n; o++) {
        out[o] = ps.pairs(w.table(), w.pairs().partners(), w.pairs().counts(), w.step(), o);
      }
      return out;
    }
    KeySplit ks = KeySplit.of(w.keys(), map, n);
    if (w.bags() != null) {
      KeyBags[] bags = ks.route.split(w.bags());
      for (int o = 0; o < n; o++) {
        if (ks.keys[o].size() > 0) {
          out[o] = new Shard.Write(w.table(), ks.keys[o], w.gradients(), w.learningRate(),
              w.step(), bags[o]);
        }
      }
      return out;
    }
    int dim = w.gradients().length / Math.max(1, ks.owner.length);
    if (w.assign() != null) { // distinct keys: "summed" rows are the rows
      for (int o = 0; o < n; o++) {
        if (ks.keys[o].size() > 0) {
          out[o] = Shard.Write.assign(w.table(), ks.keys[o],
              ks.route.gradients(o, w.gradients(), dim),
              ks.route.perKey(o, w.assign().frequencies()), w.step());
        }
      }
      return out;
    }
    for (int o = 0; o < n; o++) {
      if (ks.keys[o].size() > 0) {
        out[o] = new Shard.Write(w.table(), ks.keys[o], ks.route.gradients(o, w.gradients(), dim),
            w.learningRate(), w.step());
      }
    }
    return out;
  }
}
