package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.LogRecord;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import dev.dynembed.table.v1.ReadResult;
import dev.dynembed.table.v1.WriteRequest;
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
  private final boolean confined;
  private final ConcurrentHashMap<String, TableStore> tables = new ConcurrentHashMap<>();
  /** Held by create, drop, restore and a snapshot's start: the catalogue and the log agree. */
  private final Object catalogue = new Object();
  private final CallLedger ledger = new CallLedger();
  private final ShardCommands commands = new ShardCommands(this);
  private volatile ShardState state;
  private volatile boolean ready = true;
  private volatile long memoryBudget; // 0: none
  private volatile int maxTables = 1024;

  /**
   * A shard engine whose checkpoints stay inside {@code dataDir} (a server: clients name
   * checkpoints, they cannot write or read elsewhere).
   *
   * @param dataDir base of relative checkpoint directories
   */
  public ShardEngine(int shardIndex, int numShards, Path dataDir) {
    this(shardIndex, numShards, dataDir, true);
  }

  /**
   * @param confined whether checkpoint directories must stay inside {@code dataDir}: true for
   *     a server, false for a table inside the caller's own process (no boundary to guard)
   */
  public ShardEngine(int shardIndex, int numShards, Path dataDir, boolean confined) {
    if (numShards < 1 || shardIndex < 0 || shardIndex >= numShards) {
      throw TableException.invalid(
          "shard index must be in [0, num_shards) and num_shards >= 1, but were %d and %d",
          shardIndex, numShards);
    }
    this.shardIndex = shardIndex;
    this.numShards = numShards;
    this.dataDir = dataDir.toAbsolutePath().normalize();
    this.confined = confined;
  }

  public int shardIndex() {
    return shardIndex;
  }

  // ---------------------------------------------------------------- disk tier

  private volatile Path coldDirectory;
  private volatile long coldCacheBytes = 64L << 20;
  private ColdTier coldTier; // opened with the first disk-tier table

  /**
   * Where the disk tier keeps its RocksDB (wiped when opened; default: a new directory under
   * java.io.tmpdir; {@link #close} removes it), and its block cache. Before the first disk-tier
   * table.
   */
  public synchronized void setColdDirectory(Path dir, long cacheBytes) {
    if (coldTier != null) {
      throw new IllegalStateException("the disk tier is open already");
    }
    this.coldDirectory = dir;
    this.coldCacheBytes = cacheBytes;
  }

  private synchronized ColdTier coldTier() {
    if (coldTier == null) {
      Path dir = coldDirectory;
      try {
        if (dir == null) {
          dir = java.nio.file.Files.createTempDirectory("dynembed-cold-shard" + shardIndex + "-");
        }
      } catch (IOException e) {
        throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
            "cannot create the disk tier's directory: " + e.getMessage());
      }
      coldTier = new ColdTier(dir, coldCacheBytes); // closed (and removed) by close()
    }
    return coldTier;
  }

  /**
   * Gives a store that replaces {@code old} (or is new) its disk tier: an eviction's rebuild
   * keeps the one it shares with the old store; a new, restored or recovered store starts with an
   * empty one (the old store's cold rows are dropped: a restore replaces the table, and a
   * checkpoint holds both tiers).
   */
  private void attachCold(String name, TableStore old, TableStore fresh) {
    if (fresh != null && old != null && fresh.cold() != null && fresh.cold() == old.cold()) {
      return;
    }
    if (old != null && old.cold() != null) {
      coldTier().drop(name);
    }
    if (fresh != null && fresh.config().getDiskTier() && fresh.cold() == null) {
      fresh.attachCold(coldTier().table(name, fresh.dim + fresh.slotFloats()));
    }
  }

  /** Closes the disk tier (its directory is removed). */
  public synchronized void close() {
    if (coldTier != null) {
      coldTier.close();
      coldTier = null;
    }
  }

  public int numShards() {
    return numShards;
  }

  /** Creates a table, or returns the existing one if its config is identical. */
  public TableStore create(TableConfig requested) {
    TableConfig config = TableConfigs.normalize(requested);
    long lsn = 0;
    TableStore t;
    synchronized (catalogue) {
      t = tables.get(config.getName());
      if (t == null) {
        if (tables.size() >= maxTables) {
          throw TableException.exhausted("shard %d holds the maximum of %d tables; drop one or"
              + " raise --max-tables", shardIndex, maxTables);
        }
        t = new TableStore(config, shardIndex, numShards);
        attachCold(config.getName(), null, t);
        lsn = log(LogRecord.newBuilder().setCreate(config).build());
        tables.put(config.getName(), t);
      }
    }
    if (!t.config().equals(config)) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.ALREADY_EXISTS,
          String.format("table '%s' already exists with a different config (existing: %s;"
              + " requested: %s)", config.getName(), oneLine(t.config()), oneLine(config)));
    }
    awaitDurable(lsn);
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

  /** The table of that name, or null. */
  TableStore lookup(String name) {
    return tables.get(name);
  }

  /** Drops a table; calls still running on it fail (they never acknowledge into it). */
  public void drop(String name) {
    swap(name, null, LogRecord.newBuilder().setDrop(name).build());
  }

  /**
   * Replaces (or with {@code fresh} null removes) a table: the old store is retired under its
   * exclusive lock, so a mutating call either finished before (and is logged before this
   * record) or fails after.
   */
  void swap(String name, TableStore fresh, LogRecord record) {
    long lsn;
    synchronized (catalogue) {
      TableStore old = tables.get(name);
      if (old == null && fresh == null) {
        throw TableException.notFound(name);
      }
      if (old != null) {
        old.quiesce.writeLock().lock();
      }
      try {
        lsn = log(record);
        if (old != null) {
          old.retired = true;
        }
        attachCold(name, old, fresh);
        if (fresh == null) {
          tables.remove(name);
        } else {
          tables.put(name, fresh);
        }
      } finally {
        if (old != null) {
          old.quiesce.writeLock().unlock();
        }
      }
    }
    awaitDurable(lsn);
  }

  public List<TableStore> tables() {
    return new ArrayList<>(tables.values());
  }

  public TableInfo info(TableStore t) {
    TableStore s = t;
    dev.dynembed.table.v1.TableCounters c = s.countersIfLive();
    for (int i = 0; c == null && i < 16; i++) { // replaced meanwhile: the store that replaced it
      TableStore next = tables.get(s.name());
      if (next == null || next == s) {
        break;
      }
      s = next;
      c = s.countersIfLive();
    }
    return TableInfo.newBuilder()
        .setConfig(s.config())
        .setShardIndex(shardIndex)
        .setNumShards(numShards)
        .setCounters(c != null ? c : s.counters())
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
    TableStore t = get(table);
    ColdTier.Table cold = t.cold();
    if (cold == null || cold.size() == 0) {
      return TopK.run(t, queries, q, k, biasLastDim, metric, exclude);
    }
    // the disk tier's snapshot first, then memory: a row promoted in between is scored twice
    // (merged once), none is missed
    try (ColdTier.Table.View v = cold.view()) {
      TopKHits hits = TopK.run(t, queries, q, k, biasLastDim, metric, exclude);
      TableStore[] chunk = {null};
      TopKHits[] acc = {hits};
      v.each(r -> {
        if (chunk[0] == null) {
          chunk[0] = new TableStore(t.config(), shardIndex, numShards);
        }
        chunk[0].putRecord(new String(r.key(), java.nio.charset.StandardCharsets.UTF_8),
            r.values(), r.frequency(), r.step(), r.updates());
        if (chunk[0].size() == 16384) {
          acc[0] = TopK.merge(acc[0], TopK.run(chunk[0], queries, q, k, biasLastDim, metric,
              exclude), q, k);
          chunk[0] = null;
        }
        return true;
      });
      if (chunk[0] != null) {
        acc[0] = TopK.merge(acc[0], TopK.run(chunk[0], queries, q, k, biasLastDim, metric,
            exclude), q, k);
      }
      return acc[0];
    }
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
      abs = dataDir.resolve(directory).normalize();
    } catch (java.nio.file.InvalidPathException e) {
      throw TableException.invalid("checkpoint directory '%s' is not a valid path", directory);
    }
    if (!confined) {
      return abs;
    }
    if (!abs.startsWith(dataDir)) {
      throw TableException.invalid("checkpoint directory '%s' is outside this shard's data"
          + " directory: name checkpoints relative to the shard's --data-dir", directory);
    }
    try {
      Path existing = abs;
      while (existing != null && !java.nio.file.Files.exists(existing,
          java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        existing = existing.getParent();
      }
      if (existing != null && !existing.toRealPath().startsWith(dataDir.toRealPath())) {
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
   * Writes this shard's file of a checkpoint: a consistent cut, copied in memory under the
   * table's exclusive lock (mutations wait for the copy only), written to disk outside it.
   */
  public CheckpointFile save(String table, String directory, long step) {
    TableStore t = get(table);
    Path dir = resolve(directory);
    TableStore.Frozen copy;
    t.quiesce.writeLock().lock();
    try {
      t.samplers().invalidate();
      copy = t.freeze();
    } finally {
      t.quiesce.writeLock().unlock();
    }
    try {
      return CheckpointIo.write(copy, dir, step);
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
    Path dir = resolve(directory);
    for (CheckpointFile f : files) { // a file may not be a link to elsewhere either
      resolve(directory + "/" + f.getName());
    }
    TableStore fresh = CheckpointIo.read(dir, files, table, shardIndex, numShards);
    TableStore old = tables.get(table);
    long budget = memoryBudget;
    long after = bytesInUse() - (old == null ? 0 : old.bytesEstimate()) + fresh.bytesEstimate();
    if (budget > 0 && after > budget) {
      throw TableException.exhausted("shard %d: restoring table '%s' would take its tables to %d"
          + " MiB, past the memory budget of %d MiB; nothing was changed", shardIndex, table,
          after >> 20, budget >> 20);
    }
    ShardState s = state;
    if (s == null) {
      swap(table, fresh, null);
    } else {
      s.restored(table, fresh);
    }
    long restored = fresh.size();
    afterInsert(fresh); // a disk-tier table demotes down to its cap
    return restored;
  }

  /**
   * Evicts rows of a table (see {@link Eviction}): the victims are chosen and the table rebuilt
   * without them under its exclusive lock, logged (with now_step resolved, so that replay evicts
   * the same rows) and swapped in. Held under the catalogue lock, in the order swap takes them.
   */
  public dev.dynembed.table.v1.EvictResponse evict(dev.dynembed.table.v1.EvictRequest req) {
    checkReady();
    Eviction.check(req);
    long lsn = 0;
    Eviction.Result r;
    ShardState s = state;
    // a snapshot cut between a log rotation and its table copies must not see the store
    // replaced: the log holds the eviction, not the rows it kept
    synchronized (s == null ? new Object() : s.snapshotMutex()) {
      synchronized (catalogue) {
        TableStore old = get(req.getTable());
        old.quiesce.writeLock().lock();
        try {
          if (old.retired) {
            throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
                String.format("table '%s' was dropped or restored meanwhile; resend", old.name()));
          }
          dev.dynembed.table.v1.EvictRequest resolved = Eviction.resolve(req, old);
          r = Eviction.run(old, resolved);
          if (r.fresh() != null) {
            lsn = log(LogRecord.newBuilder().setEvict(resolved).build());
            old.retired = true;
            // the victims reach the disk tier before any call sees the fresh store
            r.fresh().quiesce.writeLock().lock();
            try {
              tables.put(old.name(), r.fresh());
              r.demote();
            } finally {
              r.fresh().quiesce.writeLock().unlock();
            }
          }
        } finally {
          old.quiesce.writeLock().unlock();
        }
      }
    }
    awaitDurable(lsn);
    return dev.dynembed.table.v1.EvictResponse.newBuilder().setEvicted(r.evicted())
        .setKeys(r.kept()).build();
  }

  /** Runs the caps' evictions, one at a time, off the callers' threads (created on first use). */
  private volatile java.util.concurrent.ExecutorService evictor;
  private final java.util.Set<String> evicting = ConcurrentHashMap.newKeySet();

  /**
   * Rows a shard keeps of a table with a cap (0: none): its share of max_keys, ceil(max_keys /
   * num_shards); with max_bytes, once its part uses more than its share of the bytes, the rows
   * that fit that share at the current bytes per row; the smaller of the two.
   */
  long capOf(TableStore t) {
    long max = t.config().getMaxKeys();
    long cap = max == 0 ? 0 : (max + numShards - 1) / numShards;
    long maxBytes = t.config().getMaxBytes();
    if (maxBytes > 0) {
      long share = (maxBytes + numShards - 1) / numShards;
      long used = t.bytesEstimate(); // O(1); bytes_used within a page of each kind
      long rows = t.size();
      if (used > share && rows > 0) {
        long fit = Math.max(1, (long) (rows * ((double) share / used)));
        cap = cap == 0 ? fit : Math.min(cap, fit);
      }
    }
    return cap;
  }

  /**
   * After a call that may have added rows: a table past its cap by 10% gets an eviction down to
   * the cap, in the background (one per table at a time). The cap is soft: rows keep arriving
   * while the eviction runs.
   */
  public void afterInsert(TableStore t) {
    long cap = capOf(t);
    if (cap == 0 || t.size() <= cap + Math.max(1, cap / 10) || !evicting.add(t.name())) {
      return;
    }
    java.util.concurrent.ExecutorService ex = evictor;
    if (ex == null) {
      synchronized (this) {
        if (evictor == null) {
          evictor = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "evict-shard-" + shardIndex);
            th.setDaemon(true);
            return th;
          });
        }
        ex = evictor;
      }
    }
    // a disk tier evicts (demotes) to 90% of the cap: promotions refill memory quickly, and
    // each eviction rebuilds the rows in memory, so more room per rebuild means fewer of them
    long target = t.config().getDiskTier() ? Math.max(1, cap - cap / 10) : cap;
    ex.execute(() -> {
      try {
        if (tables.get(t.name()) == t && !t.retired) {
          evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable(t.name())
              .setMaxKeys(target).setPolicy(t.config().getEvictionPolicy()).build());
        }
      } catch (RuntimeException e) { // dropped or restored meanwhile, or the log failed
        java.util.logging.Logger.getLogger(ShardEngine.class.getName()).warning(String.format(
            "shard %d: eviction of table '%s' to its cap failed: %s", shardIndex, t.name(),
            e.getMessage()));
      } finally {
        evicting.remove(t.name());
      }
    });
  }

  /** Waits until no cap eviction is queued or running (tests, benchmarks). */
  public void awaitEvictions() {
    java.util.concurrent.ExecutorService ex = evictor;
    if (ex == null) {
      return;
    }
    try {
      ex.submit(() -> { }).get();
      while (!evicting.isEmpty()) {
        ex.submit(() -> { }).get();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e);
    }
  }

  // ---------------------------------------------------------------- the data path

  /** The shard's one path for Read and Write calls, whatever their encoding. */
  public ShardCommands commands() {
    return commands;
  }

  /** A Write call in its protobuf form (gRPC, the data plane, tests): see {@link ShardCommands}. */
  public int[] write(WriteRequest req, java.util.function.BiFunction<TableStore,
      ApplyGradientsRequest, TableStore.CheckedGradients> check) {
    return commands.write(req.getCallId(), req.getItemsList(), ProtoItems.writes(req, check));
  }

  /** Answers one item of a read call. */
  public interface ReadItemRunner {
    /** @param noCount true for a resent call: count nothing (it was counted the first time) */
    ReadResult run(ReadItem item, boolean noCount);
  }

  /** A Read call in its protobuf form: see {@link ShardCommands#read}. */
  public ReadResponse read(ReadRequest req, ReadItemRunner runner) {
    return ReadResponse.newBuilder().addAllResults(
        commands.read(req.getCallId(), req.getItemsList(), ProtoItems.reads(runner))).build();
  }

  /**
   * Takes the tables' quiesce locks shared, in name order (a writer holds one table's lock at a
   * time, so ordered readers cannot deadlock behind queued writers), and checks that none was
   * retired meanwhile.
   */
  public static List<TableStore> lockShared(List<TableStore> stores) {
    List<TableStore> order = new ArrayList<>(new java.util.LinkedHashSet<>(stores));
    order.sort(java.util.Comparator.comparing(TableStore::name));
    List<TableStore> locked = new ArrayList<>(order.size());
    try {
      for (TableStore t : order) {
        t.quiesce.readLock().lock();
        locked.add(t);
        if (t.retired) {
          throw TableException.storeReplaced(t.name());
        }
      }
    } catch (RuntimeException e) {
      unlockShared(locked);
      throw e;
    }
    return locked;
  }

  public static void unlockShared(List<TableStore> locked) {
    for (TableStore t : locked) {
      t.quiesce.readLock().unlock();
    }
  }

  // ---------------------------------------------------------------- admission control

  /**
   * Sets the shard's memory budget for tables (0: none). A call that could take the tables past
   * it (counting every key it names as new: the worst case) is refused with RESOURCE_EXHAUSTED
   * before anything changes; reads of existing rows go on.
   */
  public void setMemoryBudget(long bytes) {
    if (bytes < 0) {
      throw TableException.invalid("memory budget must be >= 0 but was %d", bytes);
    }
    this.memoryBudget = bytes;
  }

  /** The memory budget in bytes (0: none). */
  public long memoryBudget() {
    return memoryBudget;
  }

  public void setMaxTables(int n) {
    if (n < 1) {
      throw TableException.invalid("max tables must be >= 1 but was %d", n);
    }
    this.maxTables = n;
  }

  /** Bytes the tables hold (estimate, O(tables)). */
  public long bytesInUse() {
    long used = 0;
    for (TableStore t : tables.values()) {
      used += t.bytesEstimate();
    }
    return used;
  }

  void checkBudget(long need, List<TableStore> stores) {
    long budget = memoryBudget;
    if (budget <= 0 || need == 0) {
      return;
    }
    long used = bytesInUse();
    if (used + need > budget) {
      throw TableException.exhausted("shard %d: memory budget of %d MiB reached: its %d tables"
          + " hold %d MiB and this call may add up to %d MiB (table '%s'); nothing was changed."
          + " Raise --memory-budget-mb, add shards, or drop tables", shardIndex, budget >> 20,
          tables.size(), used >> 20, (need + (1 << 20) - 1) >> 20, stores.get(0).name());
    }
  }

  // ---------------------------------------------------------------- durability

  /** Attaches the shard's log and snapshots (after recovery); from then on mutations are logged. */
  void attach(ShardState s) {
    this.state = s;
  }

  /** The log and snapshots, or null for a shard without (in process, or --wal off). */
  public ShardState state() {
    return state;
  }

  public CallLedger ledger() {
    return ledger;
  }

  Object catalogue() {
    return catalogue;
  }

  /** Installs a table as recovery rebuilt it (nothing logged). */
  void install(String name, TableStore t) {
    synchronized (catalogue) {
      attachCold(name, tables.get(name), t);
      if (t == null) {
        tables.remove(name);
      } else {
        tables.put(name, t);
      }
    }
  }

  /** Whether calls are taken: false while the shard recovers. */
  public boolean ready() {
    return ready;
  }

  public void setReady(boolean r) {
    this.ready = r;
  }

  void checkReady() {
    if (!ready) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
          "shard " + shardIndex + " is recovering its tables; resend later");
    }
  }

  long log(LogRecord r) {
    ShardState s = state;
    return s == null || r == null ? 0 : s.append(r);
  }

  void awaitDurable(long lsn) {
    ShardState s = state;
    if (s != null && lsn > 0) {
      s.awaitDurable(lsn);
    }
  }

  /** A resend answers only once everything logged so far is as durable as the policy says. */
  void awaitAll() {
    ShardState s = state;
    if (s != null) {
      s.awaitDurable(s.lastLsn());
    }
  }
}
