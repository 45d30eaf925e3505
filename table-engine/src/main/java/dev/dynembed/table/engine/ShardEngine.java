package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.GrowTableRequest;
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
 *
 * <h2>What it holds</h2>
 *
 * The catalogue (table name to its live {@link TableStore}), the shard's place in the cluster
 * (index, count, and the {@link SlotOwnership} of the slot map it routes by), the ledger of
 * applied calls ({@link CallLedger}: a resent call is answered, not applied twice), the journal
 * when the shard is durable ({@link ShardJournal}: {@link ShardState} logs and snapshots), the
 * storage tiers under the stores ({@link ColdTier}, {@link RedisTier}), the memory and reply
 * budgets, and readiness (recovering, or refused by a replicated shard's role).
 *
 * <h2>The engine and its helpers (docs/design/0000, 0008, 0012, 0016, 0021)</h2>
 *
 * The engine owns the state and the rules that bind it (locks, ownership, the log); each verb
 * family lives in a helper of the same package that holds only the narrow view of the engine
 * its nested {@code Engine} interface lists (over {@link ShardTables}; answered by a private
 * adapter, so that the rules stay off the engine's public surface): {@link ShardCommands} (reads
 * and writes as the data plane and the gRPC service send them: checked whole, logged, applied,
 * answered), {@link ShardCheckpoints} (save, restore), {@link ShardEvictions} (TTL, LFU/LRU caps,
 * the rebuild that retires a store), {@link ShardIndexes} (the approximate top-k indexes, rebuilt
 * off the callers' threads) and {@link SlotMoves} (live resharding: export, import, commit).
 *
 * <h2>Locks, in the order they are taken</h2>
 *
 * <ol>
 *   <li>the catalogue monitor ({@link #catalogue()}): create, drop, restore, a snapshot's start
 *       and recovery's installs, so that the catalogue and the log agree on which tables exist;
 *   <li>each table's {@link TableStore#quiesce}: shared by every mutation, exclusive for a copy
 *       (checkpoint, snapshot) or a swap of the store (eviction's rebuild, restore, a slot
 *       import's commit). Several tables are always locked in name order ({@link
 *       #lockLive(java.util.Collection, boolean)}, {@link #lockShared});
 *   <li>the store's own segment and row-stripe locks (see {@link TableStore}).
 * </ol>
 *
 * A store that was swapped out is marked {@code retired}; whoever looked it up before the swap
 * and locks it after must not use it: an exclusive holder takes the live one instead ({@link
 * #lockLive(String)}), a shared one is refused (UNAVAILABLE, {@code TableException.storeReplaced})
 * and the client resends the call to the live store. Nothing is merged into, copied from or
 * flushed out of a
 * retired store (docs/design/0023, "a cap's eviction").
 *
 * <h2>A write's path</h2>
 *
 * Check the whole call (keys owned by this shard under the slot map the client routed by, sizes,
 * budgets), reserve room in the log ({@link #reserveLog}: a full disk refuses the call before
 * anything changes), apply under the table's shared lock, append the record in the reserved
 * room ({@link #log(LogRecord, long)}), remember the call in the ledger, answer.
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
  private final Helpers helpers = new Helpers();
  private final ShardCommands commands = new ShardCommands(helpers);
  private final ShardCheckpoints checkpoints = new ShardCheckpoints(helpers);
  private final ShardEvictions evictions = new ShardEvictions(helpers);
  private final ShardIndexes indexes = new ShardIndexes(helpers);
  private volatile ShardJournal journal;
  private volatile boolean ready = true;
  private volatile String refusal;
  private volatile long memoryBudget; // 0: none
  private volatile int maxTables = 1024;
  private final SlotOwnership ownership;
  private volatile Path slotMapFile; // null: the map is not persisted

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
    this.ownership = new SlotOwnership(dev.dynembed.table.common.SlotMap.implicit(numShards));
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

  // ---------------------------------------------------------------- redis tier

  private volatile RedisTier redisTier;

  /** The shard's Redis tier (closed by {@link #close}); before the first redis-tier table. */
  public synchronized void setRedisTier(RedisTier tier) {
    if (redisTier != null) {
      throw new IllegalStateException("the redis tier is set already");
    }
    this.redisTier = tier;
  }

  /** The shard's Redis tier, or null. */
  public RedisTier redisTier() {
    return redisTier;
  }

  private RedisTier requireRedisTier(String table) {
    RedisTier r = redisTier;
    if (r == null) {
      throw TableException.invalid("table '%s': redis_tier needs a shard started with"
          + " --redis-tier redis://host:port (or redis-cluster://...); shard %d has no Redis"
          + " tier", table, shardIndex);
    }
    return r;
  }

  /**
   * A shard with no state of its own (an empty disk): creates the tables the Redis tier holds
   * under this shard's prefix, their rows left in Redis as cold keys (promoted on access). Call
   * before the shard takes calls. Does nothing if the shard has tables or no Redis tier.
   *
   * @return the tables loaded
   */
  public int loadFromRedisTier() {
    RedisTier r = redisTier;
    if (r == null || !tables.isEmpty()) {
      return 0;
    }
    byte[] map = r.loadSlotMap();
    if (map != null) { // slots moved: the rows under this prefix are the map's
      try {
        installNewerSlotMap(dev.dynembed.table.v1.SlotMap.parseFrom(map));
      } catch (com.google.protobuf.InvalidProtocolBufferException e) {
        throw TableException.dataLoss("redis tier (%s): the slot map under %s is not a SlotMap"
            + " (%s)", r.address(), r.prefix(), e.getMessage());
      }
    }
    int n = 0;
    for (TableConfig c : r.storedConfigs()) {
      TableStore t = create(c);
      if (t.cold() instanceof RedisTier.Table rt) {
        rt.loadCold();
      }
      n++;
    }
    return n;
  }

  /**
   * Gives a store that replaces {@code old} (or is new) its tier below memory: an eviction's
   * rebuild keeps the one it shares with the old store; a new, restored or recovered store starts
   * with an empty one (the old store's cold rows are dropped: a restore replaces the table, and a
   * checkpoint holds both tiers). The tier is told of the store that is now the table's.
   */
  private void attachCold(String name, TableStore old, TableStore fresh) {
    boolean shared = fresh != null && old != null && fresh.cold() != null
        && fresh.cold() == old.cold();
    if (!shared) {
      if (old != null && old.cold() != null) {
        old.cold().drop();
      }
      if (fresh != null && fresh.cold() == null) {
        if (fresh.config().getDiskTier()) {
          fresh.attachCold(coldTier().table(name, fresh.dim + fresh.slotFloats()));
        } else if (fresh.config().getRedisTier()) {
          fresh.attachCold(requireRedisTier(name).table(fresh.config(),
              fresh.dim + fresh.slotFloats()));
        }
      }
    }
    if (fresh != null && fresh.cold() != null) {
      fresh.cold().attached(fresh);
    }
  }

  /** Closes the tiers: the disk tier's directory is removed, the Redis tier flushed. */
  public synchronized void close() {
    indexes.close();
    evictions.close(); // no eviction may demote into the disk tier once it is closed
    if (coldTier != null) {
      coldTier.close();
      coldTier = null;
    }
    if (redisTier != null) {
      redisTier.close();
    }
  }

  public int numShards() {
    return numShards;
  }

  // ---------------------------------------------------------------- slot map

  private final SlotMoves moves = new SlotMoves(helpers);

  /** This shard's side of slot moves. */
  public SlotMoves moves() {
    return moves;
  }

  /** Whether keys are checked against the slot map (not while the log replays). */
  void enforceOwnership(boolean on) {
    ownership.enforced = on;
  }

  /** A store the catalogue takes in checks its keys against this shard's slot map. */
  private TableStore owned(TableStore t) {
    if (t != null) {
      t.ownership = ownership;
    }
    return t;
  }

  /**
   * The slot map this shard routes by: the last one installed, or the implicit map of its shard
   * count (epoch 0).
   */
  public dev.dynembed.table.common.SlotMap slotMap() {
    return ownership.map();
  }

  /**
   * Keeps the slot map in {@code file} (the shard's state directory): loads the map found there
   * and writes every map installed from now on (temporary file, fsync, rename). Before the shard
   * takes calls.
   */
  public synchronized void keepSlotMapIn(Path file) throws IOException {
    if (java.nio.file.Files.exists(file)) {
      dev.dynembed.table.common.SlotMap m;
      try {
        m = dev.dynembed.table.common.SlotMap.fromProto(dev.dynembed.table.v1.SlotMap.parseFrom(
            java.nio.file.Files.readAllBytes(file)));
      } catch (TableException | com.google.protobuf.InvalidProtocolBufferException e) {
        throw new IOException("slot map " + file + " cannot be read: " + e.getMessage(), e);
      }
      if (shardIndex >= m.numShards()) {
        throw new IOException("slot map " + file + " names " + m.numShards() + " shards; this is"
            + " shard " + shardIndex);
      }
      ownership.set(m);
    }
    slotMapFile = file;
  }

  /**
   * Installs a slot map of a higher epoch (or the current one again: idempotent). Waits for the
   * calls that hold tables' locks (they were checked against the old map) and routes every call
   * after it by the new one; persisted first where {@link #keepSlotMapIn} says.
   *
   * @return the map now installed
   */
  public synchronized dev.dynembed.table.common.SlotMap installSlotMap(
      dev.dynembed.table.common.SlotMap m) {
    return installSlotMap(m, true);
  }

  /**
   * As above; {@code logged}: the change is also a log record (followers of a replicated shard
   * install it in order with the writes); false when replaying one.
   */
  synchronized dev.dynembed.table.common.SlotMap installSlotMap(
      dev.dynembed.table.common.SlotMap m, boolean logged) {
    dev.dynembed.table.common.SlotMap cur = ownership.map();
    if (m.epoch() == cur.epoch()) {
      if (m.sameOwners(cur)) {
        if (logged) {
          awaitAll(); // a resend: answered once the map's record is as durable as promised
        }
        return cur;
      }
      throw TableException.of(dev.dynembed.table.common.ErrorCode.FAILED_PRECONDITION,
          String.format("shard %d already routes by another slot map at epoch %d; a changed map"
              + " needs a higher epoch", shardIndex, cur.epoch()), null, shardIndex, null, null);
    }
    if (m.epoch() < cur.epoch()) {
      throw TableException.of(dev.dynembed.table.common.ErrorCode.FAILED_PRECONDITION,
          String.format("shard %d routes by slot map epoch %d, newer than the %d offered",
              shardIndex, cur.epoch(), m.epoch()), null, shardIndex, null, null);
    }
    if (shardIndex >= m.numShards()) {
      throw TableException.invalid("a slot map of %d shards cannot be installed on shard %d",
          m.numShards(), shardIndex);
    }
    if (m.slots() != cur.slots() && (cur.epoch() > 0 || holdsRows())) {
      // a shard that never had a map and holds nothing (a shard added to a cluster) adopts the
      // cluster's slot count; any other keeps its own
      throw TableException.invalid("a cluster's slot count is fixed: shard %d has %d slots, the"
          + " map %d", shardIndex, cur.slots(), m.slots());
    }
    RedisTier redis = redisTier;
    if (redis != null) {
      redis.saveSlotMap(m.toProto().toByteArray()); // the rows' home keeps their map
    }
    Path file = slotMapFile;
    if (file != null) {
      try {
        dev.dynembed.table.common.Durable.writeAtomically(file, m.toProto().toByteArray());
      } catch (IOException e) {
        throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
            "shard " + shardIndex + " cannot write its slot map " + file + ": " + e, e);
      }
    }
    // calls check the epoch again once their tables are locked: taking every lock once orders
    // the change after the calls that hold them. The live stores' locks: a store a cap's
    // eviction replaced meanwhile would leave its successor's calls running across the change,
    // routed by the old map and checked by the new one (a trainer saw INVALID_ARGUMENT for a
    // key the map had just moved, issue 50)
    java.util.Collection<TableStore> all = lockLive(tables.keySet(), true).values();
    long lsn = 0;
    try {
      if (logged) { // after every write checked against the old map, before any after it
        lsn = log(LogRecord.newBuilder().setSlotMap(m.toProto()).build());
      }
      ownership.set(m); // once logged: a full disk refuses the change, nothing changed
    } finally {
      for (TableStore t : all) {
        t.quiesce.writeLock().unlock();
      }
    }
    awaitDurable(lsn);
    Runnable listener = slotMapListener;
    if (listener != null) {
      listener.run();
    }
    return m;
  }

  /**
   * Installs {@code p} unlogged if it is newer than the map routed by now (a replayed map record
   * or a snapshot's map; an older one is what the shard's map file already superseded).
   */
  void installNewerSlotMap(dev.dynembed.table.v1.SlotMap p) {
    dev.dynembed.table.common.SlotMap m = dev.dynembed.table.common.SlotMap.fromProto(p);
    if (m.epoch() > slotMap().epoch()) {
      installSlotMap(m, false);
    }
  }

  private volatile Runnable slotMapListener;

  /**
   * Runs {@code r} after every map installed from now on (it must not block: a cluster's
   * registration publishes the map in etcd from its own thread).
   */
  public void onSlotMapInstalled(Runnable r) {
    slotMapListener = r;
  }

  private boolean holdsRows() {
    for (TableStore t : tables.values()) {
      if (t.size() > 0) {
        return true;
      }
    }
    return false;
  }

  /**
   * Refuses a Read or Write call routed by another slot map than this shard's, before anything of
   * it is applied: MOVED when this shard's map is newer (the client re-routes), UNAVAILABLE when
   * older (this shard has not been given the new map yet; the client resends). {@code routedAt}
   * {@link ShardCommands#UNROUTED}: a call that needs no routing (in process, a log replay).
   */
  void checkRoutedAt(long routedAt) {
    if (routedAt == ShardCommands.UNROUTED) {
      return;
    }
    long e = ownership.map().epoch();
    if (routedAt != e) { // epochs are uint64 on the wire
      if (Long.compareUnsigned(routedAt, e) < 0) {
        throw TableException.moved(e, routedAt, shardIndex);
      }
      throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE, String.format(
          "shard %d routes by slot map epoch %d, older than the call's %s; resend", shardIndex,
          e, Long.toUnsignedString(routedAt)));
    }
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
        tables.put(config.getName(), owned(t));
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

  /**
   * Widens every row of a table to {@code dim} ({@code GrowTable}, {@link TableGrowth}): logged,
   * and done as an eviction's rebuild is, under the snapshot cut's mutex, the catalogue and the
   * table's exclusive lock. A table already that wide is answered as it is.
   */
  public TableStore grow(String name, int dim) {
    return grow(TableConfigs.grow(name, dim, null));
  }

  /** As above, new columns and new keys from {@code init} on (null: the table's initializer). */
  public TableStore grow(String name, int dim, dev.dynembed.table.v1.InitializerConfig init) {
    return grow(TableConfigs.grow(name, dim, init));
  }

  /** As above, as the request (the log's record) asks: see {@link TableGrowth}. */
  public TableStore grow(GrowTableRequest g) {
    String name = g.getTable();
    int dim = g.getDim();
    checkReady();
    long lsn = 0;
    TableStore fresh;
    ShardJournal j = journal;
    synchronized (j == null ? new Object() : j.snapshotMutex()) {
      synchronized (catalogue) {
        TableStore old = get(name);
        if (TableGrowth.check(old, g)) {
          return old;
        }
        old.quiesce.writeLock().lock();
        try {
          if (old.retired) {
            throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
                String.format("table '%s' was replaced meanwhile; resend", name));
          }
          if (old.moveTracker != null) {
            throw TableException.precondition("a slot move of table '%s' is in progress: grow"
                + " it once the move is done", name);
          }
          fresh = TableGrowth.widen(old, g);
          long budget = memoryBudget;
          long after = bytesInUse() - old.bytesEstimate() + fresh.bytesEstimate();
          if (budget > 0 && after > budget) {
            throw TableException.exhausted("shard %d: growing table '%s' to dim %d would take"
                + " its tables to %d MiB, past the memory budget of %d MiB; nothing was"
                + " changed", shardIndex, name, dim, after >> 20, budget >> 20);
          }
          lsn = log(LogRecord.newBuilder().setGrow(g).build());
          TableGrowth.widenCold(old, fresh, g); // a disk tier's rows, now the grow is logged
          old.retired = true;
          put(name, fresh);
        } finally {
          old.quiesce.writeLock().unlock();
        }
      }
    }
    awaitDurable(lsn);
    return fresh;
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
          indexes.dropped(name);
        } else {
          tables.put(name, owned(fresh));
          indexes.replaced(name);
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
        .setCounters(withAdmission(s, withIndex(s.name(), c != null ? c : s.counters())))
        .setIndex(indexes.info(s.name()))
        .build();
  }

  /** {@code c} with the count a key of {@code t} needs now (and the pressure it came from). */
  private dev.dynembed.table.v1.TableCounters withAdmission(TableStore t,
      dev.dynembed.table.v1.TableCounters c) {
    long budget = memoryBudget;
    // only a pressured table reads the shard's memory: the others need max(min_count, 1)
    double shard = t.pressured() && budget > 0 ? (double) bytesInUse() / budget : 0;
    int need = t.admissionCount(shard);
    var b = c.toBuilder().setAdmissionCount(need == Integer.MAX_VALUE ? 0 : need);
    if (t.pressured()) {
      b.setMemoryPressure(t.pressure(shard));
    }
    PairCounts pc = t.pairs();
    if (pc != null) {
      b.setPairsCounted(pc.total()).setPairsDropped(pc.dropped()).setPairAnchors(pc.anchors());
    }
    return b.build();
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

  /** A table's counters with its approximate index's bytes (in bytes_used too). */
  private dev.dynembed.table.v1.TableCounters withIndex(String table,
      dev.dynembed.table.v1.TableCounters c) {
    long b = indexes.bytes(table);
    return b == 0 ? c : c.toBuilder().setIndexBytes(b).setBytesUsed(c.getBytesUsed() + b).build();
  }

  /** Exact top-k ({@link #topK(String, float[], int, int, boolean, Metric, PackedKeys, int)}). */
  public TopKHits topK(String table, float[] queries, int q, int k, boolean biasLastDim,
      Metric metric, PackedKeys exclude) {
    return topK(table, queries, q, k, biasLastDim, metric, exclude, 0);
  }

  /** Most searched candidates per query of an approximate top-k. */
  public static final int MAX_SEARCH_BREADTH = 100_000;

  /**
   * The k best keys per query: from the table's approximate index with {@code breadth} > 0 when
   * it has one for this metric and bias option (design 0016), else by the exact scan (both
   * tiers of a disk-tier table).
   */
  public TopKHits topK(String table, float[] queries, int q, int k, boolean biasLastDim,
      Metric metric, PackedKeys exclude, int breadth) {
    TableStore t = get(table);
    if (breadth < 0 || breadth > MAX_SEARCH_BREADTH) {
      throw TableException.invalid("table '%s': search_breadth must be in [0, %d] but was %d",
          table, MAX_SEARCH_BREADTH, Integer.toUnsignedLong(breadth));
    }
    TopK.check(t, queries, q, k, biasLastDim);
    ColdRows cold = t.cold();
    if (breadth > 0 && cold == null) {
      TopKHits h = indexes.topK(t, queries, q, k, biasLastDim, metric, exclude, breadth);
      if (h != null) {
        return h;
      }
    }
    if (cold == null || cold.size() == 0) {
      return TopK.run(t, queries, q, k, biasLastDim, metric, exclude);
    }
    // the disk tier's snapshot first, then memory: a row promoted in between is scored twice
    // (merged once), none is missed
    try (ColdRows.View v = cold.view()) {
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
   * Whether a top-k of {@code q} queries at this breadth is a short search of the table's index
   * (at most {@value #SHORT_SEARCH_CANDIDATES} candidates in all) rather than a scan: servers
   * answer those on the thread that read the call, as they answer reads.
   */
  public boolean isShortSearch(String table, int q, Metric metric, boolean biasLastDim,
      int breadth) {
    TableStore t = lookup(table);
    return t != null && t.cold() == null && q > 0
        && (long) q * breadth <= SHORT_SEARCH_CANDIDATES
        && indexes.searches(t, metric, biasLastDim, breadth);
  }

  /** Candidates of a top-k call answered on the thread that read it ({@link #isShortSearch}). */
  public static final int SHORT_SEARCH_CANDIDATES = 4096;

  // ---------------------------------------------------------------- checkpoints, evictions

  /**
   * The checkpoint directory a client named: relative to {@code --data-dir}, or absolute but
   * inside it ({@link ShardCheckpoints#resolve}).
   */
  public Path resolve(String directory) {
    return checkpoints.resolve(directory);
  }

  /** Writes this shard's file of a checkpoint ({@link ShardCheckpoints#save}). */
  public CheckpointFile save(String table, String directory, long step) {
    return checkpoints.save(table, directory, step);
  }

  /** Rebuilds a table from checkpoint files of any shard count ({@link ShardCheckpoints}). */
  public long restore(String table, String directory, List<CheckpointFile> files) {
    return checkpoints.restore(table, directory, files);
  }

  /**
   * Restores a table for a reader of the whole checkpoint: every row in memory, without the
   * caps and tiers it was written with ({@link dev.dynembed.table.common.TableConfigs#uncapped}),
   * so that no eviction runs while the reader scans it.
   */
  public long restoreForReading(String table, String directory, List<CheckpointFile> files) {
    return checkpoints.restore(table, directory, files,
        dev.dynembed.table.common.TableConfigs::uncapped);
  }

  /** Evicts rows of a table ({@link ShardEvictions#evict}). */
  public dev.dynembed.table.v1.EvictResponse evict(dev.dynembed.table.v1.EvictRequest req) {
    return evictions.evict(req);
  }

  /** Rows this shard keeps of a capped table (0: no cap). */
  long capOf(TableStore t) {
    return evictions.capOf(t);
  }

  /** After a call that may have added rows: schedules the cap's eviction if it is passed. */
  public void afterInsert(TableStore t) {
    evictions.afterInsert(t);
  }

  /**
   * Builds (or rebuilds) a table's approximate index off the request threads (design 0016);
   * with {@code wait}, answers once it is built.
   */
  public dev.dynembed.table.v1.IndexInfo buildIndex(dev.dynembed.table.v1.BuildIndexRequest req) {
    checkReady();
    return indexes.build(req);
  }

  /** Waits until no index build is queued or running (tests, benchmarks). */
  public void awaitIndexes() {
    indexes.awaitBuilds();
  }

  /** Waits until no cap eviction is queued or running (tests, benchmarks). */
  public void awaitEvictions() {
    evictions.awaitEvictions();
  }

  // ---------------------------------------------------------------- the data path

  /** The shard's one path for Read and Write calls, whatever their encoding. */
  public ShardCommands commands() {
    return commands;
  }

  /** A Write call in its protobuf form (gRPC, the data plane, tests): see {@link ShardCommands}. */
  public int[] write(WriteRequest req, java.util.function.BiFunction<TableStore,
      ApplyGradientsRequest, TableStore.CheckedGradients> check) {
    return commands.write(req.getCallId(), ShardCommands.routedAt(req.getMapEpoch()),
        req.getItemsList(), ProtoItems.writes(req, check));
  }

  /** Answers one item of a read call. */
  public interface ReadItemRunner {
    /** @param noCount true for a resent call: count nothing (it was counted the first time) */
    ReadResult run(ReadItem item, boolean noCount);
  }

  /** A Read call in its protobuf form: see {@link ShardCommands#read}. */
  public ReadResponse read(ReadRequest req, ReadItemRunner runner) {
    return ReadResponse.newBuilder().addAllResults(
        commands.read(req.getCallId(), ShardCommands.routedAt(req.getMapEpoch()),
            req.getItemsList(), ProtoItems.reads(runner))).build();
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

  private volatile ReplyBudget replies = new ReplyBudget(ReplyBudget.defaultCapacity());

  /** Sets the bytes of replies the shard holds at once ({@link ReplyBudget}). */
  public void setReplyBudget(long bytes) {
    this.replies = new ReplyBudget(bytes);
  }

  /** What the shard's replies may take at once; the transports reserve each reply's size. */
  public ReplyBudget replies() {
    return replies;
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
    return used + indexes.totalBytes();
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
  void attach(ShardJournal s) {
    this.journal = s;
  }

  /** The log and snapshots, or null for a shard without (in process, or --wal off). */
  public ShardJournal journal() {
    return journal;
  }

  public CallLedger ledger() {
    return ledger;
  }

  private final List<Path> reserved = new java.util.concurrent.CopyOnWriteArrayList<>();

  /**
   * Refuses checkpoint directories inside {@code dir} from now on: the shard's own state (its
   * log and snapshots, its disk tier), which a checkpoint written there would corrupt.
   */
  public void reserveDirectory(Path dir) {
    reserved.add(dir.toAbsolutePath().normalize());
  }

  /** Directories no checkpoint may be inside ({@link #reserveDirectory}). */
  List<Path> reservedDirectories() {
    return reserved;
  }

  /**
   * The table's live store, locked exclusively (the caller unlocks): a store that was replaced (a
   * cap's eviction rebuilds off the callers' threads; a restore) between its lookup and its lock
   * is let go and the new one taken, so that nothing is merged into or copied from a retired one.
   *
   * @throws TableException NOT_FOUND if the table was dropped
   */
  TableStore lockLive(String name) {
    while (true) {
      TableStore t = get(name);
      t.quiesce.writeLock().lock();
      if (!t.retired) {
        return t;
      }
      t.quiesce.writeLock().unlock();
    }
  }

  /** Puts a store in the catalogue (an eviction's rebuilt table; the caller holds the locks). */
  void put(String name, TableStore t) {
    tables.put(name, owned(t));
    if (t.cold() != null) {
      t.cold().attached(t);
    }
    indexes.replaced(name);
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
        indexes.dropped(name);
      } else {
        tables.put(name, owned(t));
        indexes.replaced(name);
      }
    }
  }

  /**
   * Whether calls are taken: false while the shard recovers, and while its role says no (a
   * follower of a replicated shard, a primary deposed: {@link #refuse}).
   */
  public boolean ready() {
    return ready && refusal == null;
  }

  public void setReady(boolean r) {
    this.ready = r;
  }

  /**
   * Refuses every call with UNAVAILABLE and {@code reason} (null: takes calls again), whatever
   * the recovery does: the role of a replicated shard's process (docs/design/0019).
   */
  public void refuse(String reason) {
    this.refusal = reason;
  }

  private volatile String readOnly;

  /**
   * Makes this shard read-only with {@code reason} (null: writable again): every call that could
   * change a table (writes, inserting or counting reads, creates, drops, restores, evictions,
   * slot moves) is refused with FAILED_PRECONDITION and the reason; finds, samples, top-k,
   * scans, describes and checkpoints are answered. A serving replica's role
   * (docs/design/0024-vectors-in.md): its tables change only by its training shard's log.
   */
  public void setReadOnly(String reason) {
    this.readOnly = reason;
  }

  /** Why this shard takes no changes, or null when it does. */
  public String readOnly() {
    return readOnly;
  }

  /** Refuses {@code call} with FAILED_PRECONDITION when this shard is read-only. */
  public void checkWritable(String call) {
    String r = readOnly;
    if (r != null) {
      throw TableException.precondition("%s: %s is refused (%s)", "shard " + shardIndex, call, r);
    }
  }

  /** Why calls are refused now (UNAVAILABLE's description), or null when they are taken. */
  public String notReadyMessage() {
    String r = refusal;
    if (r != null) {
      return r;
    }
    return ready ? null : "shard " + shardIndex + " is recovering its tables; resend later";
  }

  void checkReady() {
    String why = notReadyMessage();
    if (why != null) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE, why);
    }
  }

  /**
   * Forgets every table and applied call (a follower about to load its primary's snapshot); the
   * disk state is the caller's to replace.
   */
  public void clearForResync() {
    synchronized (catalogue) {
      for (String name : new ArrayList<>(tables.keySet())) {
        TableStore old = tables.get(name);
        old.quiesce.writeLock().lock();
        try {
          old.retired = true;
          install(name, null);
        } finally {
          old.quiesce.writeLock().unlock();
        }
      }
    }
    ledger.clear();
  }

  long log(LogRecord r) {
    ShardJournal s = journal;
    return s == null || r == null ? 0 : s.append(r);
  }

  /**
   * {@link #lockLive(String)} for each of {@code names}, in name order (the order every caller
   * takes several tables' locks in); a table dropped meanwhile is left out with {@code
   * skipDropped}, else NOT_FOUND. When it throws, none stays locked.
   */
  java.util.TreeMap<String, TableStore> lockLive(java.util.Collection<String> names,
      boolean skipDropped) {
    java.util.TreeMap<String, TableStore> live = new java.util.TreeMap<>();
    try {
      for (String name : new java.util.TreeSet<>(names)) {
        try {
          live.put(name, lockLive(name));
        } catch (TableException e) {
          if (!skipDropped || e.code() != dev.dynembed.table.common.ErrorCode.NOT_FOUND) {
            throw e;
          }
        }
      }
    } catch (RuntimeException e) {
      for (TableStore t : live.values()) {
        t.quiesce.writeLock().unlock();
      }
      throw e;
    }
    return live;
  }

  /** Appends a record in the room {@code reservation} holds ({@link #reserveLog}). */
  long log(LogRecord r, long reservation) {
    ShardJournal s = journal;
    return s == null || r == null ? 0 : s.append(r, reservation);
  }

  /**
   * Reserves room in the log for a record of at most {@code bytes}, before its change is applied
   * (0 without a log); RESOURCE_EXHAUSTED naming the directory when the disk is full.
   */
  long reserveLog(long bytes) {
    ShardJournal s = journal;
    return s == null ? 0 : s.reserve(bytes);
  }

  /** Gives back a reservation whose record was not appended. */
  void releaseLog(long reservation) {
    ShardJournal s = journal;
    if (s != null && reservation > 0) {
      s.release(reservation);
    }
  }

  void awaitDurable(long lsn) {
    ShardJournal s = journal;
    if (s != null && lsn > 0) {
      s.awaitDurable(lsn);
    }
  }

  /** A resend answers only once everything logged so far is as durable as the policy says. */
  void awaitAll() {
    ShardJournal s = journal;
    if (s != null) {
      s.awaitDurable(s.lastLsn());
    }
  }

  // ---------------------------------------------------------------- the helpers' views

  /**
   * The engine as its helpers see it: each holds this adapter through its own narrow {@code
   * Engine} interface (what it may use), and the rules stay package-private on the engine.
   */
  private final class Helpers implements ShardCommands.Engine, ShardCheckpoints.Engine,
      ShardEvictions.Engine, ShardIndexes.Engine, SlotMoves.Engine {
    @Override
    public int shardIndex() {
      return shardIndex;
    }

    @Override
    public void checkWritable(String call) {
      ShardEngine.this.checkWritable(call);
    }

    @Override
    public int numShards() {
      return numShards;
    }

    @Override
    public TableStore get(String name) {
      return ShardEngine.this.get(name);
    }

    @Override
    public TableStore lookup(String name) {
      return ShardEngine.this.lookup(name);
    }

    @Override
    public List<TableStore> tables() {
      return ShardEngine.this.tables();
    }

    @Override
    public Object catalogue() {
      return catalogue;
    }

    @Override
    public void put(String name, TableStore t) {
      ShardEngine.this.put(name, t);
    }

    @Override
    public void swap(String name, TableStore fresh, LogRecord record) {
      ShardEngine.this.swap(name, fresh, record);
    }

    @Override
    public TableStore lockLive(String name) {
      return ShardEngine.this.lockLive(name);
    }

    @Override
    public java.util.TreeMap<String, TableStore> lockLive(java.util.Collection<String> names,
        boolean skipDropped) {
      return ShardEngine.this.lockLive(names, skipDropped);
    }

    @Override
    public void checkReady() {
      ShardEngine.this.checkReady();
    }

    @Override
    public void checkRoutedAt(long routedAt) {
      ShardEngine.this.checkRoutedAt(routedAt);
    }

    @Override
    public void checkBudget(long need, List<TableStore> stores) {
      ShardEngine.this.checkBudget(need, stores);
    }

    @Override
    public void afterInsert(TableStore t) {
      ShardEngine.this.afterInsert(t);
    }

    @Override
    public long memoryBudget() {
      return memoryBudget;
    }

    @Override
    public long bytesInUse() {
      return ShardEngine.this.bytesInUse();
    }

    @Override
    public dev.dynembed.table.common.SlotMap slotMap() {
      return ownership.map();
    }

    @Override
    public dev.dynembed.table.common.SlotMap installSlotMap(
        dev.dynembed.table.common.SlotMap m) {
      return ShardEngine.this.installSlotMap(m);
    }

    @Override
    public CallLedger ledger() {
      return ledger;
    }

    @Override
    public ShardJournal journal() {
      return journal;
    }

    @Override
    public long log(LogRecord r) {
      return ShardEngine.this.log(r);
    }

    @Override
    public long log(LogRecord r, long reservation) {
      return ShardEngine.this.log(r, reservation);
    }

    @Override
    public long reserveLog(long bytes) {
      return ShardEngine.this.reserveLog(bytes);
    }

    @Override
    public void releaseLog(long reservation) {
      ShardEngine.this.releaseLog(reservation);
    }

    @Override
    public void awaitDurable(long lsn) {
      ShardEngine.this.awaitDurable(lsn);
    }

    @Override
    public void awaitAll() {
      ShardEngine.this.awaitAll();
    }

    @Override
    public java.nio.file.Path dataDir() {
      return dataDir;
    }

    /** Whether checkpoint directories must stay inside the data directory. */
    @Override
    public boolean confined() {
      return confined;
    }

    @Override
    public List<java.nio.file.Path> reservedDirectories() {
      return ShardEngine.this.reservedDirectories();
    }

    @Override
    public RedisTier redisTier() {
      return ShardEngine.this.redisTier();
    }

    @Override
    public ShardEvictions evictions() {
      return evictions;
    }
  }
}
