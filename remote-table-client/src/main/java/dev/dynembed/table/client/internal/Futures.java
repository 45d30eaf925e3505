package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.Internal;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** Waiting on shard futures, with failures as {@link TableException}s. */
@Internal
public final class Futures {
  private Futures() {}

  /** The future's value; its failure rethrown as the TableException it carries. */
  public static <T> T await(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException | CompletionException e) {
      throw unwrap(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TableException(ErrorCode.UNAVAILABLE, "interrupted while waiting for a shard", e);
    }
  }

  /** The TableException a future failed with (wrapping anything else as INTERNAL). */
  public static TableException unwrap(Throwable t) {
    Throwable c = t;
    while ((c instanceof ExecutionException || c instanceof CompletionException)
        && c.getCause() != null) {
      c = c.getCause();
    }
    if (c instanceof TableException te) {
      return te;
    }
    return new TableException(ErrorCode.INTERNAL, "unexpected failure: " + c, c);
  }

  /** Waits for every future (nulls stay null); throws the first failure by list order. */
  public static <T> List<T> awaitAll(List<CompletableFuture<T>> futures) {
    List<T> out = new ArrayList<>(futures.size());
    TableException first = null;
    for (CompletableFuture<T> f : futures) {
      if (f == null) {
        out.add(null);
        continue;
      }
      try {
        out.add(await(f));
      } catch (TableException e) {
        if (first == null) {
          first = e;
        }
        out.add(null);
      }
    }
    if (first != null) {
      throw first;
    }
    return out;
  }

  /**
   * A future of every value (nulls stay null) that fails with the first failure by list order,
   * once all have completed.
   */
  public static <T> CompletableFuture<List<T>> all(List<CompletableFuture<T>> futures) {
    CompletableFuture<?>[] live = futures.stream().filter(f -> f != null)
        .toArray(CompletableFuture[]::new);
    return CompletableFuture.allOf(live).handle((v, e) -> awaitAll(futures));
  }
}
