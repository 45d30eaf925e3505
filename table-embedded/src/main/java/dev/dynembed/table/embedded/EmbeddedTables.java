package dev.dynembed.table.embedded;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.InProcessTables;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.CheckpointManifest;
import java.nio.file.Path;
import java.util.List;

/**
 * The in-process table: the table engine behind the {@code TableClient} API in this process
 * ({@code TableClients.inProcess} finds it through {@link java.util.ServiceLoader}).
 */
public final class EmbeddedTables implements InProcessTables {
  @Override
  public TableClient open(Path dataDir) {
    return new ShardedTableClient(List.of(new LocalShard(new ShardEngine(0, 1, dataDir, false))));
  }

  @Override
  public EmbeddingTable loadCheckpoint(Path directory, CheckpointManifest manifest) {
    ShardEngine engine = new ShardEngine(0, 1, directory, false);
    TableClient c = new ShardedTableClient(List.of(new LocalShard(engine)));
    String name = manifest.getConfig().getName();
    engine.restoreForReading(name, directory.toString(), manifest.getFilesList());
    return c.openTable(name);
  }

  /** The engine of an in-process client (tests, benchmarks), or null for any other client. */
  public static ShardEngine engineOf(TableClient client) {
    if (client instanceof ShardedTableClient c && c.shards().size() == 1
        && c.shards().get(0) instanceof LocalShard l) {
      return l.engine();
    }
    return null;
  }
}
