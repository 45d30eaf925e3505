package dev.dynembed.table.engine;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CheckpointFile;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * A shard's checkpoints: where a client may name them (confined to the data directory), the
 * consistent cut a save writes, and a restore from files of any shard count. Part of {@link
 * ShardEngine}, which answers the calls through it.
 */
final class ShardCheckpoints {
  /** What saves and restores use of their engine: where files may go, the swap of a store. */
  interface Engine extends ShardTables {
    java.nio.file.Path dataDir();

    boolean confined();

    java.util.List<java.nio.file.Path> reservedDirectories();

    dev.dynembed.table.common.SlotMap slotMap();

    RedisTier redisTier();

    long memoryBudget();

    long bytesInUse();

    ShardJournal journal();

    TableStore lockLive(String name);

    void swap(String name, TableStore fresh, dev.dynembed.table.v1.LogRecord record);

    void afterInsert(TableStore t);
  }

  private final Engine engine;

  ShardCheckpoints(Engine engine) {
    this.engine = engine;
  }

  /**
   * The checkpoint directory a client named: relative to {@code --data-dir}, or absolute but
   * inside it; refused if it leads outside, also through a symbolic link (the real path of its
   * deepest existing part must stay inside the data directory's real path). Messages quote the
   * client's own string, never a server path.
   */
  public Path resolve(String directory) {
    if (directory == null || directory.isEmpty()) {
      throw TableException.invalid("checkpoint directory is empty");
    }
    Path abs;
    try {
      abs = engine.dataDir().resolve(directory).normalize();
    } catch (java.nio.file.InvalidPathException e) {
      throw TableException.invalid("checkpoint directory '%s' is not a valid path", directory);
    }
    checkNotReserved(abs, directory);
    if (!engine.confined()) {
      return abs;
    }
    if (!abs.startsWith(engine.dataDir())) {
      throw TableException.invalid("checkpoint directory '%s' is outside this shard's data"
          + " directory: name checkpoints relative to the shard's --data-dir", directory);
    }
    try {
      Path existing = abs;
      while (existing != null && !java.nio.file.Files.exists(existing,
          java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        existing = existing.getParent();
      }
      if (existing != null && !existing.toRealPath().startsWith(engine.dataDir().toRealPath())) {
        throw TableException.invalid("checkpoint directory '%s' leads outside this shard's data"
            + " directory through a symbolic link", directory);
      }
    } catch (IOException e) {
      throw TableException.invalid("checkpoint directory '%s' cannot be resolved (%s)",
          directory, e.getClass().getSimpleName());
    }
    return abs;
  }

  /**
   * Refuses a checkpoint directory inside one of the shard's own ({@link
   * ShardEngine#reserveDirectory}: its log and snapshots, its disk tier), also through symbolic
   * links: a checkpoint saved into a snapshot's directory left a shard that could not restart.
   */
  private void checkNotReserved(Path abs, String directory) {
    Path real = realOfDeepestExisting(abs);
    for (Path r : engine.reservedDirectories()) {
      Path rr = realOfDeepestExisting(r);
      if (abs.startsWith(r) || real.startsWith(rr) && java.nio.file.Files.exists(r)) {
        throw TableException.invalid("checkpoint directory '%s' is inside this shard's own state"
            + " (its write-ahead log, snapshots or disk tier); name a directory outside it",
            directory);
      }
    }
  }

  /** The real path of {@code p}'s deepest existing ancestor, with the rest appended. */
  private static Path realOfDeepestExisting(Path p) {
    Path existing = p;
    while (existing != null && !java.nio.file.Files.exists(existing)) {
      existing = existing.getParent();
    }
    if (existing == null) {
      return p;
    }
    try {
      return existing.toRealPath().resolve(existing.relativize(p));
    } catch (IOException e) {
      return p;
    }
  }

  /**
   * Writes this shard's file of a checkpoint: a consistent cut, copied in memory under the
   * table's exclusive lock (mutations wait for the copy only), written to disk outside it.
   */
  public CheckpointFile save(String table, String directory, long step) {
    Path dir = resolve(directory);
    TableStore.Frozen copy;
    TableStore t = engine.lockLive(table); // not a store an eviction replaced meanwhile
    try {
      t.samplers().invalidate();
      copy = t.freeze();
    } finally {
      t.quiesce.writeLock().unlock();
    }
    try {
      return CheckpointIo.write(copy, dir, step, engine.slotMap());
    } catch (IOException e) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
          String.format("table '%s': writing checkpoint '%s' failed (%s)", table, directory,
              e.getClass().getSimpleName()));
    }
  }

  /**
   * Rebuilds the table from checkpoint files of any shard count, keeping the keys that route to
   * this shard, then swaps it in. On any error the live table is unchanged. With a log, the
   * restored table is first written under the log's directory, so that recovery can rebuild it.
   */
  public long restore(String table, String directory, List<CheckpointFile> files) {
    // a table in the caller's own process has no Redis tier: a redis_tier checkpoint's rows are
    // all in the checkpoint, so it is read without (a shard refuses it instead when started
    // without --redis-tier)
    return restore(table, directory, files, engine.confined() || engine.redisTier() != null
        ? c -> c : TableConfigs::withoutRedisTier);
  }

  /** As above, the table taking {@code adapt} of the checkpoint's config. */
  public long restore(String table, String directory, List<CheckpointFile> files,
      java.util.function.UnaryOperator<dev.dynembed.table.v1.TableConfig> adapt) {
    Path dir = resolve(directory);
    for (CheckpointFile f : files) { // a file may not be a link to elsewhere either
      resolve(directory + "/" + f.getName());
    }
    TableStore fresh = CheckpointIo.read(dir, files, table, engine.shardIndex(), engine.slotMap(),
        adapt);
    TableStore old = engine.lookup(table);
    long budget = engine.memoryBudget();
    long after = engine.bytesInUse() - (old == null ? 0 : old.bytesEstimate()) + fresh.bytesEstimate();
    if (budget > 0 && after > budget) {
      throw TableException.exhausted("shard %d: restoring table '%s' would take its tables to %d"
          + " MiB, past the memory budget of %d MiB; nothing was changed", engine.shardIndex(), table,
          after >> 20, budget >> 20);
    }
    ShardJournal s = engine.journal();
    if (s == null) {
      engine.swap(table, fresh, null);
    } else {
      s.restored(table, fresh);
    }
    long restored = fresh.size();
    engine.afterInsert(fresh); // a disk-tier table demotes down to its cap
    return restored;
  }
}
