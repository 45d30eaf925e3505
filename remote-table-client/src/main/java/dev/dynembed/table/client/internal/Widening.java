package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * Writes of a client that opened a table at one width to a shard that grew it since
 * (docs/design/0025-cells-and-rules.md, "A grow under running trainers"). The shard refuses a
 * gradient of the old width whole, before applying anything of the call (its items are checked
 * first); the client then asks that shard the widths of the call's tables, widens each gradient
 * row with zero columns (a zero gradient for the columns the caller does not know) and resends
 * the call once, so that the caller's update is applied exactly once on every shard, grown or
 * not. Reads of such a caller get the rows' old columns ({@link ShardCalls#narrowed}). An assign
 * at the old width is not widened: it would set the new columns; it stays refused.
 */
final class Widening {
  private Widening() {}

  /** Shard {@code s}'s write call, resent widened if the shard holds a table wider. */
  static CompletableFuture<int[]> write(SlotRouter router, int s, List<Shard.Write> items,
      long epoch) {
    return Rerouted.write(router, s, items, epoch, 0).exceptionallyCompose(e -> {
      TableException refused = Futures.unwrap(e);
      if (refused.code() != ErrorCode.INVALID_ARGUMENT) {
        return CompletableFuture.failedFuture(e);
      }
      Shard shard = router.shards().get(s);
      Set<String> tables = new LinkedHashSet<>();
      for (Shard.Write w : items) {
        if (w.assign() == null && w.pairs() == null) { // rows of gradients only
          tables.add(w.table());
        }
      }
      List<String> names = new ArrayList<>(tables);
      List<CompletableFuture<TableInfo>> infos = new ArrayList<>(names.size());
      for (String t : names) {
        infos.add(shard.describe(t));
      }
      return Futures.all(infos).handle((got, failure) -> {
        if (failure != null) {
          return null; // the shard's width unknown: the first refusal stands
        }
        Map<String, Integer> dims = new HashMap<>();
        for (int i = 0; i < names.size(); i++) {
          dims.put(names.get(i), got.get(i).getConfig().getDim());
        }
        List<Shard.Write> wide = new ArrayList<>(items.size());
        boolean changed = false;
        for (Shard.Write w : items) {
          Shard.Write x = widened(w, dims.get(w.table()));
          changed |= x != w;
          wide.add(x);
        }
        return changed ? wide : null;
      }).thenCompose(wide -> wide == null ? CompletableFuture.<int[]>failedFuture(e)
          : Rerouted.write(router, s, wide, epoch, 0));
    });
  }

  /** {@code w} with each gradient row widened to {@code dim} by zero columns, or {@code w}. */
  static Shard.Write widened(Shard.Write w, Integer dim) {
    if (w.assign() != null || w.pairs() != null || dim == null) {
      return w;
    }
    int rows = w.bags() != null ? w.bags().bags() : w.keys().size();
    if (rows == 0 || w.gradients().length % rows != 0) {
      return w;
    }
    int width = w.gradients().length / rows;
    if (width >= dim) {
      return w;
    }
    float[] g = new float[rows * dim];
    for (int r = 0; r < rows; r++) {
      System.arraycopy(w.gradients(), r * width, g, r * dim, width);
    }
    return new Shard.Write(w.table(), w.keys(), g, w.learningRate(), w.step(), w.bags(), null);
  }
}
