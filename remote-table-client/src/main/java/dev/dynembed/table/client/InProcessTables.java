package dev.dynembed.table.client;

import java.nio.file.Path;

/**
 * The in-process table (the engine in this process, no server), provided by the {@code
 * table-embedded} module through {@link java.util.ServiceLoader}: {@link TableClients#inProcess}
 * finds it, so that this module depends on the table contract only.
 */
public interface InProcessTables {
  /** A client of one in-process shard; relative checkpoint directories resolve against dataDir. */
  TableClient open(Path dataDir);

  /**
   * A table of its own holding a whole checkpoint in memory, its caps and tiers not applied
   * ({@link TableClients#loadCheckpoint}).
   */
  EmbeddingTable loadCheckpoint(Path directory, dev.dynembed.table.v1.CheckpointManifest manifest);
}
