package dev.dynembed.table.engine;

/**
 * What every helper of a {@link ShardEngine} sees of it: the shard's index and its live stores
 * by name. Each helper extends this view with the few engine rules it needs (its nested {@code
 * Engine} interface) and holds that view, never the engine: what a helper may touch is what its
 * interface lists. The engine answers all of them through one private adapter, so that the
 * package-private rules stay off its public surface.
 */
interface ShardTables {
  int shardIndex();

  /**
   * The live store of a table.
   *
   * @throws dev.dynembed.table.common.TableException NOT_FOUND when there is none
   */
  TableStore get(String name);

  /** The live store of a table, or null. */
  TableStore lookup(String name);
}
