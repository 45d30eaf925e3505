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

/** {@link TableClient} over a fixed list of shards, in shard order. */
public final class ShardedTableClient implements TableClient {
  private final List<Shard> shards;
  private final SlotRouter router;
  private volatile boolean layoutVerified;
  /** Closed after the shards (what found them, e.g. a cluster map's watch); null: nothing. */
  private final AutoCloseable onClose;

  public ShardedTableClient(List<Shard> shards) {
    this(shards, null);
  }

  /** As above; {@code onClose} is closed after the shards. */
  public ShardedTableClient(List<Shard> shards, AutoCloseable onClose) {
    this.shards = List.copyOf(shards);
    this.router = new SlotRouter(this.shards);
    this.onClose = onClose;
  }

  /** The shards, in shard order. */
  public List<Shard> shards() {
    return shards;
  }

  /** The shards' slot map as this client routes by it (refreshed when a shard says MOVED). */
  public SlotRouter router() {
    return router;
  }

  /** Checks once that endpoint i serves shard i of numShards(), before anything is created. */
  private void verifyLayout(String table, String call) {
    if (layoutVerified) {
      return;
    }
    List<StatsResponse> stats = stats();
    for (int i = 0; i < stats.size(); i++) {
      StatsResponse s = stats.get(i);
      if (s.getNumShards() != shards.size() || s.getShardIndex() != i) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format(
            "endpoint %d serves shard %d of %d, but this client has %d endpoints in shard order",
            i, s.getShardIndex(), s.getNumShards(), shards.size()), table, i, call, null);
      }
    }
    layoutVerified = true;
  }

  @Override
  public int numShards() {
    return shards.size();
  }

  @Override
  public EmbeddingTable createTable(TableConfig config) {
    verifyLayout(config.getName(), "createTable");
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : shards) {
      futures.add(s.create(config));
    }
    return open(config.getName(), Futures.awaitAll(futures));
  }

  @Override
  public EmbeddingTable openTable(String name) {
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : shards) {
      futures.add(s.describe(name));
    }
    return open(name, Futures.awaitAll(futures));
  }

  private EmbeddingTable open(String name, List<TableInfo> infos) {
    TableConfig config = infos.get(0).getConfig();
    for (int i = 0; i < infos.size(); i++) {
      TableInfo info = infos.get(i);
      if (info.getNumShards() != shards.size() || info.getShardIndex() != i) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format(
            "endpoint %d serves shard %d of %d, but this client has %d endpoints in shard order",
            i, info.getShardIndex(), info.getNumShards(), shards.size()), name, i, "openTable",
            null);
      }
      if (!info.getConfig().equals(config)) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION,
            "shards disagree on the table's config", name, i, "openTable", null);
      }
    }
    return new ShardedTable(config, router);
  }

  @Override
  public void dropTable(String name) {
    List<CompletableFuture<Void>> futures = new ArrayList<>();
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
    for (Shard s : shards) {
      futures.add(s.stats());
    }
    return Futures.awaitAll(futures);
  }

  @Override
  public void close() {
    for (Shard s : shards) {
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
