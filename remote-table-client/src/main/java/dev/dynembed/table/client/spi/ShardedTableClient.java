package dev.dynembed.table.client.spi;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import dev.dynembed.table.client.internal.Futures;
import dev.dynembed.table.client.internal.ShardedTable;
import dev.dynembed.table.client.internal.SlotRouter;

/**
 * {@link TableClient} over a list of shards, in shard order: fixed endpoints, or the shards of a
 * cluster map, which grows when the shards' slot map gives slots to a shard added since.
 */
public final class ShardedTableClient implements TableClient {
  private final SlotRouter router;
  private volatile boolean layoutVerified;
  /** Closed after the shards (what found them, e.g. a cluster map's watch); null: nothing. */
  private final AutoCloseable onClose;
  private volatile dev.dynembed.table.client.ClientOptions.RowCaching rowCache =
      dev.dynembed.table.client.ClientOptions.RowCaching.OFF;
  /**
   * With a row cache, the one table object per name that this client opened: two handles on
   * one table share its cache (two caches in one process would be two trainers).
   */
  private final java.util.concurrent.ConcurrentHashMap<String, ShardedTable> cached =
      new java.util.concurrent.ConcurrentHashMap<>();

  public ShardedTableClient(List<Shard> shards) {
    this(shards, null);
  }

  /** As above; {@code onClose} is closed after the shards. */
  public ShardedTableClient(List<Shard> shards, AutoCloseable onClose) {
    this(new SlotRouter(shards), onClose);
  }

  /**
   * A client of a cluster that can grow (a cluster map's client): it routes by {@code initial}
   * (null: the implicit map of the shards' count) until a shard says MOVED, and opens with
   * {@code opener} the shards that a newer map gives slots to; {@code onClose} is closed after
   * the shards (what found them, e.g. the map's watch).
   */
  public static ShardedTableClient growing(List<Shard> shards, dev.dynembed.table.common.SlotMap
      initial, java.util.function.IntFunction<Shard> opener, AutoCloseable onClose) {
    return new ShardedTableClient(new SlotRouter(shards, initial, opener::apply), onClose);
  }

  private ShardedTableClient(SlotRouter router, AutoCloseable onClose) {
    this.router = router;
    this.onClose = onClose;
  }

  /**
   * Gives the tables this client opens from now on a trainer-side row cache
   * (docs/design/0022-row-cache.md); OFF: none.
   */
  public ShardedTableClient withRowCache(dev.dynembed.table.client.ClientOptions.RowCaching s) {
    this.rowCache = s;
    return this;
  }

  /** The shards this client reaches, in shard order. */
  public List<Shard> shards() {
    return router.shards();
  }

  /** The shards' slot map as this client routes by it (refreshed when a shard says MOVED). */
  public SlotRouter router() {
    return router;
  }

  /**
   * Checks once that endpoint i serves shard i, before anything is created: of numShards() while
   * the shards route by their implicit map; once slots have moved, of a slot map naming at most
   * the client's endpoints (shards added or retired since they started report other counts).
   * The client then routes by the newest map a shard has.
   */
  private void verifyLayout(String table, String call) {
    if (layoutVerified) {
      return;
    }
    List<StatsResponse> stats = stats();
    for (int i = 0; i < stats.size(); i++) {
      checkShard(i, stats.get(i).getShardIndex(), stats.get(i).getNumShards(), table, call);
    }
    layoutVerified = true;
  }

  private dev.dynembed.table.common.SlotMap layoutMap;

  /** The newest slot map of the shards (asked once), or null while none moved slots. */
  private synchronized dev.dynembed.table.common.SlotMap layoutMap() {
    if (layoutMap == null) {
      layoutMap = Futures.await(router.newestAsync());
      if (layoutMap.epoch() > 0 && layoutMap.shardsInUse() <= router.shards().size()) {
        router.adopt(layoutMap, layoutMap.epoch());
      }
    }
    return layoutMap.epoch() > 0 ? layoutMap : null;
  }

  private void checkShard(int i, int index, int numShards, String table, String call) {
    int known = router.shards().size();
    dev.dynembed.table.common.SlotMap m = index == i && numShards != known ? layoutMap() : null;
    if (index != i || (m == null && numShards != known)) {
      throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format(
          "endpoint %d serves shard %d of %d, but this client has %d endpoints in shard order",
          i, index, numShards, known), table, i, call, null);
    }
    if (m != null && m.shardsInUse() > known) {
      throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format("the shards' slot"
          + " map (epoch %d) gives slots to %d shards, but this client has %d endpoints: name"
          + " every shard", m.epoch(), m.shardsInUse(), known), table, i, call, null);
    }
  }

  /** The shards that own slots now: those in the map routed by (see {@link SlotRouter#inUse}). */
  @Override
  public int numShards() {
    return router.inUse().size();
  }

  @Override
  public EmbeddingTable createTable(TableConfig config) {
    verifyLayout(config.getName(), "createTable");
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : router.inUse()) {
      futures.add(s.create(config));
    }
    return open(config.getName(), Futures.awaitAll(futures));
  }

  @Override
  public EmbeddingTable openTable(String name) {
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : router.inUse()) {
      futures.add(s.describe(name));
    }
    return open(name, Futures.awaitAll(futures));
  }

  private EmbeddingTable open(String name, List<TableInfo> infos) {
    TableConfig config = infos.get(0).getConfig();
    for (int i = 0; i < infos.size(); i++) {
      TableInfo info = infos.get(i);
      checkShard(i, info.getShardIndex(), info.getNumShards(), name, "openTable");
      if (!info.getConfig().equals(config)) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION,
            "shards disagree on the table's config", name, i, "openTable", null);
      }
    }
    if (!rowCache.on()) {
      return new ShardedTable(config, router);
    }
    ShardedTable t = cached.compute(name, (k, old) -> old != null && old.config().equals(config)
        ? old : new ShardedTable(config, router, rowCache));
    return t;
  }

  @Override
  public EmbeddingTable growTable(dev.dynembed.table.v1.GrowTableRequest req) {
    cached.remove(req.getTable());
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : router.inUse()) {
      futures.add(s.grow(req));
    }
    return open(req.getTable(), Futures.awaitAll(futures));
  }

  @Override
  public void dropTable(String name) {
    cached.remove(name);
    List<CompletableFuture<Void>> futures = new ArrayList<>();
    List<Shard> shards = router.inUse();
    for (Shard s : shards) {
      futures.add(s.drop(name));
    }
    int notFound = 0;
    for (CompletableFuture<Void> f : futures) {
      try {
        Futures.await(f);
      } catch (TableException e) {
        if (e.code() != ErrorCode.NOT_FOUND) {
          throw e;
        }
        notFound++;
      }
    }
    if (notFound == shards.size()) {
      throw TableException.of(ErrorCode.NOT_FOUND, "table '" + name + "' does not exist", name,
          -1, "dropTable", null);
    }
  }

  @Override
  public List<StatsResponse> stats() {
    List<CompletableFuture<StatsResponse>> futures = new ArrayList<>();
    for (Shard s : router.inUse()) {
      futures.add(s.stats());
    }
    return Futures.awaitAll(futures);
  }

  @Override
  public void close() {
    try {
      for (ShardedTable t : cached.values()) {
        t.flush(); // what the caches hold goes back before the shards are let go
      }
    } finally {
      closeShards();
    }
  }

  private void closeShards() {
    for (Shard s : router.shards()) {
      s.close();
    }
    if (onClose != null) {
      try {
        onClose.close();
      } catch (Exception e) {
        throw new IllegalStateException("closing the client: " + e.getMessage(), e);
      }
    }
  }
}
