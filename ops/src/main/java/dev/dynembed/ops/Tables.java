package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Tables the ops of any graph can reach, by table name. Ops hold only the name (graphs are cloned
 * through FlatBuffers, which cannot carry object references); two graphs naming the same table
 * share it.
 */
public final class Tables {
  private static final ConcurrentHashMap<String, EmbeddingTable> TABLES = new ConcurrentHashMap<>();

  private Tables() {}

  public static void register(EmbeddingTable table) {
    TABLES.put(table.name(), table);
  }

  public static EmbeddingTable get(String name) {
    EmbeddingTable t = TABLES.get(name);
    if (t == null) {
      throw new IllegalStateException("no embedding table named '" + name + "' is registered;"
          + " call Tables.register(table) before running the graph");
    }
    return t;
  }
}
