package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.BuildIndexRequest;
import dev.dynembed.table.v1.IndexInfo;
import dev.dynembed.table.v1.Metric;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.logging.Logger;

/**
 * A shard's approximate indexes (design 0016), one per table that asked for one: its settings,
 * the index built last, and the build running. Builds run one at a time on the shard's index
 * thread, never on a request thread. An index serves the store it was built from: when the
 * store is replaced (a restore, an eviction's rebuild, a recovery) or the index passes its
 * staleness bound, a rebuild starts and the old index (or, for a replaced store, the exact scan)
 * answers until it is done. Settings live in the shard's memory: a restarted shard process has
 * no index until BuildIndex asks again.
 */
final class ShardIndexes {
  private static final Logger LOG = Logger.getLogger(ShardIndexes.class.getName());

  /** What an index serves and how its graph is built. */
  record Settings(Metric metric, boolean bias, int maxConn, int beamWidth) {}

  private static final class Entry {
    final Settings settings;
    volatile AnnIndex index;
    volatile CompletableFuture<AnnIndex> building;
    volatile long builds;

    Entry(Settings settings) {
      this.settings = settings;
    }
  }

  /** What the index builder uses of its engine. */
  interface Engine extends ShardTables {
    /** Refuses (RESOURCE_EXHAUSTED) {@code need} more bytes beyond the memory budget. */
    void checkBudget(long need, java.util.List<TableStore> stores);
  }

  private final Engine engine;
  private final ConcurrentHashMap<String, Entry> entries = new ConcurrentHashMap<>();
  private volatile ExecutorService executor;

  ShardIndexes(Engine engine) {
    this.engine = engine;
  }

  private ExecutorService executor() {
    ExecutorService e = executor;
    if (e == null) {
      synchronized (this) {
        if (executor == null) {
          executor = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "index-shard-" + engine.shardIndex());
            t.setDaemon(true);
            return t;
          });
        }
        e = executor;
      }
    }
    return e;
  }

  /** Starts (or restarts) the index of a table; with wait, returns once it is built. */
  IndexInfo build(BuildIndexRequest req) {
    TableStore t = engine.get(req.getTable());
    int maxConn = req.getMaxConn() == 0 ? 16 : req.getMaxConn();
    int beam = req.getBeamWidth() == 0 ? 100 : req.getBeamWidth();
    AnnIndex.check(req.getTable(), maxConn, beam, t, req.getBiasLastDim());
    long need = AnnIndex.estimateBytes(t.size(), t.dim, maxConn);
    Entry old = entries.get(req.getTable());
    engine.checkBudget(old != null && old.index != null ? Math.max(0, need - old.index.bytes())
        : need, java.util.List.of(t));
    Settings s = new Settings(AnnIndex.normalize(req.getMetric()), req.getBiasLastDim(),
        maxConn, beam);
    Entry e = entries.compute(req.getTable(), (k, prev) -> {
      if (prev != null && prev.settings.equals(s)) {
        return prev;
      }
      return new Entry(s);
    });
    CompletableFuture<AnnIndex> f = schedule(req.getTable(), e, true);
    if (req.getWait()) {
      try {
        f.get();
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
            "interrupted while the index of table '" + req.getTable() + "' was built");
      } catch (ExecutionException ex) {
        throw ex.getCause() instanceof RuntimeException r ? r
            : new IllegalStateException(ex.getCause());
      }
    }
    return info(req.getTable());
  }

  /**
   * Starts a build of the table's current store unless one runs ({@code force}: even if the
   * index is fresh). The returned future completes with the index.
   */
  private synchronized CompletableFuture<AnnIndex> schedule(String table, Entry e, boolean force) {
    CompletableFuture<AnnIndex> running = e.building;
    if (running != null && !running.isDone()) {
      return running;
    }
    if (!force && e.index != null && e.index.store == engine.lookup(table) && !e.index.stale()) {
      return CompletableFuture.completedFuture(e.index);
    }
    CompletableFuture<AnnIndex> f = new CompletableFuture<>();
    e.building = f;
    executor().execute(() -> {
      try {
        TableStore t = engine.get(table);
        Settings s = e.settings;
        AnnIndex i = AnnIndex.build(t, s.metric(), s.bias(), s.maxConn(), s.beamWidth(),
            table.hashCode() * 31L + engine.shardIndex());
        if (entries.get(table) == e) { // not dropped or re-asked meanwhile
          e.index = i;
          e.builds++;
        }
        f.complete(i);
      } catch (RuntimeException | Error ex) {
        LOG.warning(String.format("shard %d: building the index of table '%s' failed: %s",
            engine.shardIndex(), table, ex));
        f.completeExceptionally(ex);
      }
    });
    return f;
  }

  /**
   * The approximate answer, or null when the table has no index serving this store, metric and
   * bias option (the caller scans exactly). A stale index answers and starts its rebuild.
   */
  TopKHits topK(TableStore t, float[] queries, int q, int k, boolean bias, Metric metric,
      PackedKeys exclude, int breadth) {
    Entry e = entries.get(t.name());
    if (e == null || breadth <= 0 || breadth >= t.size()) {
      return null; // no index, or a search as broad as the table: the exact scan
    }
    AnnIndex i = e.index;
    if (i == null || i.store != t) {
      schedule(t.name(), e, false); // the store was replaced: rebuild for the new one
      return null;
    }
    if (!i.serves(t, metric, bias)) {
      return null;
    }
    if (i.stale()) {
      schedule(t.name(), e, false);
    }
    return i.search(queries, q, k, breadth, exclude);
  }

  /**
   * Whether {@link #topK} would answer from the index now (a sub-millisecond graph search, not a
   * scan of the table): the server answers those on the thread that read the call.
   */
  boolean searches(TableStore t, Metric metric, boolean bias, int breadth) {
    Entry e = entries.get(t.name());
    AnnIndex i = e == null ? null : e.index;
    return i != null && breadth > 0 && breadth < t.size() && i.serves(t, metric, bias);
  }

  /** A table was dropped: its index goes. */
  void dropped(String table) {
    entries.remove(table);
  }

  /** A table's store was replaced (restore, eviction, recovery): its index is rebuilt. */
  void replaced(String table) {
    Entry e = entries.get(table);
    if (e != null) {
      schedule(table, e, false);
    }
  }

  /** Heap bytes of a table's index (0 without one). */
  long bytes(String table) {
    Entry e = entries.get(table);
    AnnIndex i = e == null ? null : e.index;
    return i == null ? 0 : i.bytes();
  }

  long totalBytes() {
    long b = 0;
    for (Entry e : entries.values()) {
      AnnIndex i = e.index;
      b += i == null ? 0 : i.bytes();
    }
    return b;
  }

  IndexInfo info(String table) {
    Entry e = entries.get(table);
    if (e == null) {
      return IndexInfo.newBuilder().setState(IndexInfo.State.NONE).build();
    }
    AnnIndex i = e.index;
    IndexInfo.Builder b = IndexInfo.newBuilder().setMetric(e.settings.metric())
        .setBiasLastDim(e.settings.bias()).setBuilds(e.builds);
    if (i == null) {
      return b.setState(IndexInfo.State.BUILDING).build();
    }
    return b.setState(IndexInfo.State.READY).setRows(i.rows).setBytes(i.bytes())
        .setBuildSeconds(i.buildSeconds).build();
  }

  /** Waits until no build is queued or running (tests, benchmarks). */
  void awaitBuilds() {
    for (Entry e : entries.values()) {
      CompletableFuture<AnnIndex> f = e.building;
      if (f != null) {
        try {
          f.get();
        } catch (InterruptedException ex) {
          Thread.currentThread().interrupt();
          return;
        } catch (ExecutionException ignored) {
          // logged by the build
        }
      }
    }
  }

  void close() {
    ExecutorService e = executor;
    if (e != null) {
      e.shutdownNow();
    }
  }
}
