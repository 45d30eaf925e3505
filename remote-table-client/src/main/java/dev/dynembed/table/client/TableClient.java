package dev.dynembed.table.client;

import dev.dynembed.table.v1.GrowTableRequest;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import java.util.List;

/** Entry point to a set of tables, in-process or on sharded servers ({@link TableClients}). */
public interface TableClient extends AutoCloseable {
  /**
   * Creates the table on every shard; if it exists with an identical config, opens it.
   *
   * @throws dev.dynembed.table.common.TableException ALREADY_EXISTS with a different config,
   *     INVALID_ARGUMENT for an invalid config
   */
  EmbeddingTable createTable(TableConfig config);

  /** Opens an existing table; NOT_FOUND if it does not exist. */
  EmbeddingTable openTable(String name);

  /** Drops the table on every shard. */
  void dropTable(String name);

  /**
   * Widens every row of the table to {@code dim} on every shard (the GrowTable RPC: old columns
   * kept, new ones from the initializer, slots widened alike; docs/design/0025) and opens it at
   * the new width. Tables opened before at the old width are refused by the shards' width checks
   * afterwards; open them again. A grow interrupted part-way is finished by growing again.
   */
  default EmbeddingTable growTable(String name, int dim) {
    return growTable(name, dim, null);
  }

  /**
   * As above; the new columns, and new keys' rows from now on, come from {@code initializer}
   * (null: the table's own), which becomes the table's.
   */
  default EmbeddingTable growTable(String name, int dim,
      dev.dynembed.table.v1.InitializerConfig initializer) {
    return growTable(dev.dynembed.table.common.TableConfigs.grow(name, dim, initializer));
  }

  /**
   * As above, as the request asks: with {@code new_columns}, the new columns of the rows the
   * table holds start otherwise than a fresh row's (zeros, say; new keys still from the
   * initializer).
   */
  default EmbeddingTable growTable(GrowTableRequest req) {
    throw new UnsupportedOperationException(getClass().getSimpleName()
        + " cannot grow a table's dim");
  }

  /** Per-shard stats: every table's config and counters. */
  List<StatsResponse> stats();

  int numShards();

  @Override
  void close();
}
