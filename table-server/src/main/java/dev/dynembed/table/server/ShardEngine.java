package dev.dynembed.table.server;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The tables of one shard: the engine behind both the gRPC server and the in-process table. All
 * methods are thread-safe. Errors are {@link TableException}s; a failed call changes nothing.
 */
public final class ShardEngine {
  private final int shardIndex;
  private final int numShards;
  private final Path dataDir;
  private final ConcurrentHashMap<String, TableStore> tables = new ConcurrentHashMap<>();

  /**
   * @param dataDir base of relative checkpoint directories
   */
  public ShardEngine(int shardIndex, int numShards, Path dataDir) {
    if (numShards < 1 || shardIndex < 0 || shardIndex >= numShards) {
      throw TableException.invalid(
          "shard index must be in [0, num_shards) and num_shards >= 1, but were %d and %d",
          shardIndex, numShards);
    }
    this.shardIndex = shardIndex;
    this.numShards = numShards;
    this.dataDir = dataDir.toAbsolutePath();
  }

  public int shardIndex() {
    return shardIndex;
  }

  public int numShards() {
    return numShards;
  }

  /** Creates a table, or returns the existing one if its config is identical. */
  public TableStore create(TableConfig requested) {
    TableConfig config = TableConfigs.normalize(requested);
    TableStore t = tables.computeIfAbsent(config.getName(),
        n -> new TableStore(config, shardIndex, numShards));
    if (!t.config().equals(config)) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.ALREADY_EXISTS,
          String.format("table '%s' already exists with a different config (existing: %s;"
              + " requested: %s)", config.getName(), oneLine(t.config()), oneLine(config)));
    }
    return t;
  }

  private static String oneLine(TableConfig c) {
    return com.google.protobuf.TextFormat.printer().shortDebugString(c);
  }

  public TableStore get(String name) {
    TableStore t = tables.get(name);
    if (t == null) {
      throw TableException.notFound(name);
    }
    return t;
  }

  public void drop(String name) {
    if (tables.remove(name) == null) {
      throw TableException.notFound(name);
    }
  }

  public List<TableStore> tables() {
    return new ArrayList<>(tables.values());
  }

  public TableInfo info(TableStore t) {
    return TableInfo.newBuilder()
        .setConfig(t.config())
        .setShardIndex(shardIndex)
        .setNumShards(numShards)
        .setCounters(t.counters())
        .build();
  }

  /** Candidate sampling over this shard's keys of {@code table} (draws with replacement). */
  public SampleCandidates sample(String table, PackedKeys positives, int numSampled,
      SamplerKind kind, float alpha, long seed) {
    return sample(get(table), positives, numSampled, kind, alpha, seed, false, false);
  }

  /**
   * Candidate sampling over this shard's keys of {@code table}; with {@code distinct}, drawn keys
   * come once each ({@link SampleCandidates#copyRows} writes their rows); with {@code
   * noneIfEmpty} a shard without any key of sampling weight draws nothing instead of failing.
   */
  public SampleCandidates sample(TableStore table, PackedKeys positives, int numSampled,
      SamplerKind kind, float alpha, long seed, boolean distinct, boolean noneIfEmpty) {
    return table.samplers().sample(positives, numSampled, kind, alpha, seed, distinct,
        noneIfEmpty);
  }

  /** Every table's config and counters. */
  public StatsResponse stats() {
    StatsResponse.Builder b = StatsResponse.newBuilder()
        .setShardIndex(shardIndex).setNumShards(numShards);
    for (TableStore t : tables()) {
      b.addTables(info(t));
    }
    return b.build();
  }

  public TopKHits topK(String table, float[] queries, int q, int k, boolean biasLastDim,
      Metric metric, PackedKeys exclude) {
    return TopK.run(get(table), queries, q, k, biasLastDim, metric, exclude);
  }

  public Path resolve(String directory) {
    if (directory == null || directory.isEmpty()) {
      throw TableException.invalid("checkpoint directory is empty");
    }
    return dataDir.resolve(directory).normalize();
  }

  /** Writes this shard's file of a checkpoint, with no mutation in flight. */
  public CheckpointFile save(String table, String directory, long step) {
    TableStore t = get(table);
    Path dir = resolve(directory);
    t.quiesce.writeLock().lock();
    try {
      t.samplers().invalidate();
      return CheckpointIo.write(t, dir, step);
    } catch (IOException e) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
          String.format("table '%s': writing checkpoint under %s failed: %s", table, dir, e));
    } finally {
      t.quiesce.writeLock().unlock();
    }
  }

  /**
   * Rebuilds the table from checkpoint files of any shard count, keeping the keys that route to
   * this shard, then swaps it in. On any error the live table is unchanged.
   */
  public long restore(String table, String directory, List<CheckpointFile> files) {
    Path dir = resolve(directory);
    TableStore fresh = CheckpointIo.read(dir, files, table, shardIndex, numShards);
    tables.put(table, fresh);
    return fresh.size();
  }
}
