package dev.dynembed.table.engine;

import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.common.Durable;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.LogRecord;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.RestoredTable;
import dev.dynembed.table.v1.SnapshotManifest;
import dev.dynembed.table.v1.SnapshotTable;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.v1.FindOrInsertRequest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Stream;

/**
 * A shard's durable state under {@code STATE_DIR/shard-I} (default {@code DATA_DIR/state};
 * docs/design/0008-durability.md):
 * the write-ahead log ({@code wal/}) and snapshots ({@code snapshots/snap-LSN/}, the current one
 * named by {@code snapshots/CURRENT}). {@link #recover} loads the current snapshot and replays
 * the log after it; a snapshot is taken in the background whenever the log has grown by the
 * configured bytes since the last one, and after a recovery that replayed anything. A durable
 * snapshot lets the log before it, older snapshots and restored-table copies go.
 *
 * <h2>Its parts</h2>
 *
 * <ul>
 *   <li><b>The journal</b> ({@link ShardJournal}, which the engine calls): records appended to
 *       the {@link ShardLog} in room reserved before their change is applied ({@link #reserve},
 *       {@link #append}; docs/design/0023, full disks), made durable by the log's policy
 *       ({@link #awaitDurable}, which on a replicated primary also waits for the followers).
 *   <li><b>Recovery</b> ({@link #recover}): the current snapshot loaded, the log after it
 *       replayed through the same checks as a live call ({@link #checkWrite}), a torn tail cut;
 *       restored tables and slot imports come back from the files their records name.
 *   <li><b>Snapshots</b> ({@link #snapshot}, on the {@code snapshot-shard} thread): the log
 *       rotated under the catalogue's monitor (the snapshot's start), then each table copied
 *       under its exclusive lock, one at a time (writes to it wait for the copy only; the copy
 *       notes the LSN it covers, from which recovery replays that table), written outside the
 *       locks, and the snapshot made current.
 *       {@code snapshotMutex} keeps a snapshot from deleting what another step still needs (a
 *       restored table's copy before its record is logged, the files being linked for a
 *       follower).
 *   <li><b>Replication</b> (docs/design/0019): as primary, every appended record goes to the
 *       {@link ReplicationHook} in LSN order ({@link #replicateTo}); snapshots are linked for a
 *       joining follower ({@link #linkCurrentSnapshot}) and the log read back for a rejoining one
 *       ({@link #readLog}, {@link #logBytesAfter}); as follower, records are applied and logged
 *       at the primary's LSNs ({@link #applyReplicated}) and a received snapshot replaces the
 *       state ({@link #installReceived}).
 * </ul>
 *
 * <p>One process owns a state directory at a time (a lock file; starting a second, or this
 * shard's directory as another shard, is refused).
 */
public final class ShardState implements AutoCloseable, ShardJournal {
  private static final Logger log = Logger.getLogger(ShardState.class.getName());
  static final int FORMAT_VERSION = 1;
  private static final String CURRENT = "CURRENT";
  private static final String MANIFEST = "MANIFEST";
  private static final String IDENTITY = "SHARD";

  /** What recovery did, for the start-up line and tests. */
  /**
   * What a start recovered: tables from the snapshot and log, and (a shard with no state of its
   * own) tables loaded from its Redis tier.
   */
  public record Recovery(int tables, long snapshotLsn, long replayedRecords, long nextLsn,
      double seconds, int redisTables) {}

  private final ShardEngine engine;
  private final Path walDir;
  private final Path snapDir;
  private final ShardLog wal;
  private final long snapshotBytes;
  private final ExecutorService snapshotter;
  private final AtomicBoolean snapshotQueued = new AtomicBoolean();
  private final Object snapshotMutex = new Object();
  private volatile Recovery recovery;
  /** Per table, the first LSN not in the recovered snapshot; records before it are skipped. */
  private Map<String, Long> thresholds = Map.of();
  private long startLsn = 1;
  private volatile ReplicationHook replication;
  private volatile long lastSnapshotBytes;
  private volatile long lastSnapshotMillis;

  /** Called at each step of a snapshot (tests make it throw there: a crash at that point). */
  public interface StepHook {
    void at(String step) throws IOException;
  }

  private volatile StepHook steps = s -> {};

  public void onStep(StepHook hook) {
    this.steps = hook;
  }

  private java.nio.channels.FileChannel lockChannel;
  private java.nio.channels.FileLock lock;

  private ShardState(ShardEngine engine, Path root, ShardLog wal, long snapshotBytes) {
    this.engine = engine;
    this.walDir = root.resolve("wal");
    this.snapDir = root.resolve("snapshots");
    this.wal = wal;
    this.snapshotBytes = snapshotBytes;
    this.snapshotter = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "snapshot-shard-" + engine.shardIndex());
      t.setDaemon(true);
      return t;
    });
  }

  /** The state directory of shard {@code index}: {@code STATE_DIR/shard-I}. */
  public static Path root(Path stateDir, int index) {
    return stateDir.toAbsolutePath().resolve("shard-" + index);
  }

  /**
   * Rebuilds {@code engine}'s tables from {@code STATE_DIR/shard-I} (snapshot, then log; a
   * table-server's state dir is {@code DATA_DIR/state} unless {@code --state-dir}) and attaches
   * the log, so that every later mutation is logged. The engine takes no calls meanwhile.
   *
   * @param snapshotBytes log bytes after which a snapshot is taken
   * @param onLogFailure told of the first I/O error of the log (the process should exit)
   */
  public static ShardState recover(ShardEngine engine, Path stateDir, ShardLog.Fsync policy,
      long snapshotBytes, Consumer<IOException> onLogFailure) throws IOException {
    long t0 = System.nanoTime();
    engine.setReady(false);
    Path root = root(stateDir, engine.shardIndex());
    Files.createDirectories(root);
    // one process per state directory (RocksDB's LOCK file): a second shard started on the same
    // directory would interleave its log and snapshots with this one's
    java.nio.channels.FileChannel lockChannel = java.nio.channels.FileChannel.open(
        root.resolve("LOCK"), java.nio.file.StandardOpenOption.CREATE,
        java.nio.file.StandardOpenOption.WRITE);
    java.nio.channels.FileLock lock;
    try {
      lock = lockChannel.tryLock();
    } catch (java.nio.channels.OverlappingFileLockException e) {
      lock = null;
    }
    if (lock == null) {
      lockChannel.close();
      throw TableException.precondition("the state of shard %d under this data directory is in"
          + " use by another table-server process", engine.shardIndex());
    }
    try {
      return recover(engine, root, policy, snapshotBytes, onLogFailure, lockChannel, lock, t0);
    } catch (IOException | RuntimeException e) {
      lock.release();
      lockChannel.close();
      throw e;
    }
  }

  private static ShardState recover(ShardEngine engine, Path root, ShardLog.Fsync policy,
      long snapshotBytes, Consumer<IOException> onLogFailure,
      java.nio.channels.FileChannel lockChannel, java.nio.channels.FileLock lock, long t0)
      throws IOException {
    checkIdentity(root, engine);
    Path snapDir = root.resolve("snapshots");
    Path walDir = root.resolve("wal");
    SnapshotManifest m = readCurrent(snapDir);
    Map<String, Long> thresholds = new HashMap<>();
    long start = 1;
    long snapshotTime = 0;
    if (m != null) {
      if (m.getShardIndex() != engine.shardIndex() || m.getNumShards() != engine.numShards()) {
        throw TableException.precondition("snapshot %s belongs to shard %d of %d, not %d of %d",
            snapDir, m.getShardIndex(), m.getNumShards(), engine.shardIndex(),
            engine.numShards());
      }
      Path dir = snapDir.resolve(snapshotName(m.getStartLsn()));
      if (m.hasSlotMap()) { // a follower's snapshot from its primary: the map comes with it
        engine.installNewerSlotMap(m.getSlotMap());
      }
      for (SnapshotTable st : m.getTablesList()) {
        engine.install(st.getTable(), CheckpointIo.readAll(dir, List.of(st.getFile()),
            st.getTable(), engine.shardIndex(), engine.numShards()));
        thresholds.put(st.getTable(), st.getLsn());
      }
      engine.ledger().restore(m.getClientsList());
      start = m.getStartLsn();
      snapshotTime = java.time.Instant.parse(m.getCreatedAt()).toEpochMilli();
    }
    // a slot import prepared before a crash: its staged rows are gone with the process (the
    // source still holds them; resharding again copies them anew)
    Dirs.deleteTree(walDir.resolve(SlotMoves.PENDING));
    long from = start;
    long[] replayed = {0};
    // records replay as they were applied: their keys were this shard's when they came, even
    // where slots have moved away since. Rows the map no longer gives the shard stay: only a
    // move's DropUnowned (a logged eviction, once the destination committed) removes them; a
    // sweep here would drop a source's rows between the flip and the destination's commit, or a
    // destination's merged rows before its map was installed
    engine.enforceOwnership(false);
    long next;
    try {
      next = ShardLog.replay(walDir, start, (lsn, payload) -> {
        replay(engine, walDir, LogRecord.parseFrom(payload), lsn, thresholds, from);
        replayed[0]++;
      });
    } finally {
      engine.enforceOwnership(true);
    }
    ShardLog wal = new ShardLog(walDir, policy, next, onLogFailure);
    ShardState s = new ShardState(engine, root, wal, snapshotBytes);
    s.thresholds = thresholds;
    s.startLsn = start;
    s.lastSnapshotMillis = snapshotTime;
    s.lockChannel = lockChannel;
    s.lock = lock;
    int recovered = engine.tables().size();
    engine.attach(s);
    int fromRedis = m == null && replayed[0] == 0
        ? engine.loadFromRedisTier() // no state of its own: the Redis tier's tables, if any
        : 0;
    s.recovery = new Recovery(recovered, start, replayed[0], next,
        (System.nanoTime() - t0) / 1e9, fromRedis);
    if (replayed[0] > 0) {
      s.snapshot(); // the next start replays nothing of this; the replayed log can go
    }
    engine.setReady(true);
    return s;
  }

  public Recovery recovery() {
    return recovery;
  }

  /**
   * Applies one log record whose effects on a table count only if the record comes at or after
   * that table's snapshot position (its {@code thresholds} entry, else the snapshot's start).
   */
  private static void replay(ShardEngine engine, Path walDir, LogRecord r, long lsn,
      Map<String, Long> thresholds, long start) throws IOException {
    switch (r.getOpCase()) {
      case CREATE -> {
        if (lsn >= thresholds.getOrDefault(r.getCreate().getName(), start)) {
          engine.install(r.getCreate().getName(),
              new TableStore(r.getCreate(), engine.shardIndex(), engine.numShards()));
        }
      }
      case DROP -> {
        if (lsn >= thresholds.getOrDefault(r.getDrop(), start)) {
          engine.install(r.getDrop(), null);
        }
      }
      case RESTORE -> {
        RestoredTable rt = r.getRestore();
        if (lsn >= thresholds.getOrDefault(rt.getTable(), start)) {
          engine.install(rt.getTable(), CheckpointIo.read(walDir.resolve(rt.getDirectory()),
              rt.getFilesList(), rt.getTable(), engine.shardIndex(), engine.slotMap(), c -> c));
        }
      }
      case GROW -> {
        String name = r.getGrow().getTable();
        TableStore t = engine.lookup(name);
        if (t != null && lsn >= thresholds.getOrDefault(name, start)
            && t.dim < r.getGrow().getDim()) {
          TableStore grown = TableGrowth.widen(t, r.getGrow());
          TableGrowth.widenCold(t, grown, r.getGrow());
          engine.install(name, grown);
        }
      }
      case SLOT_MAP -> engine.installNewerSlotMap(r.getSlotMap());
      case IMPORT_SLOTS -> {
        Path dir = walDir.resolve(r.getImportSlots().getDirectory());
        for (dev.dynembed.table.v1.ImportedLayer layer : r.getImportSlots().getLayersList()) {
          TableStore t = live(engine, layer.getTable(), lsn, thresholds, start);
          if (t != null) {
            SlotMoves.merge(CheckpointIo.read(dir.resolve(layer.getSubdirectory()),
                List.of(layer.getFile()), layer.getTable(), engine.shardIndex(), 1), t);
          }
        }
      }
      case EVICT -> {
        String name = r.getEvict().getTable();
        TableStore t = engine.lookup(name);
        if (t != null && lsn >= thresholds.getOrDefault(name, start)) {
          Eviction.Result ev = Eviction.run(t, r.getEvict());
          if (ev.fresh() != null) {
            engine.install(name, ev.fresh());
            ev.demote(); // a cap's victims go to the table's tier, as when first evicted
          }
        }
      }
      case WRITE -> {
        int[] out = new int[r.getWrite().getItemsCount()];
        for (int i = 0; i < out.length; i++) {
          ApplyGradientsRequest item = r.getWrite().getItems(i);
          TableStore t = live(engine, item.getTable(), lsn, thresholds, start);
          if (t != null) {
            out[i] = t.apply(checkWrite(t, item), item.getStep());
          }
        }
        engine.ledger().replayed(r.getWrite().getCallId(), lsn, out);
      }
      case INSERT -> {
        for (ReadItem item : r.getInsert().getItemsList()) {
          FindOrInsertRequest f = item.getFindOrInsert();
          TableStore t = live(engine, f.getTable(), lsn, thresholds, start);
          if (t != null) {
            int[] occ = null;
            if (f.getOccurrencesCount() > 0) {
              occ = f.getOccurrencesList().stream().mapToInt(Integer::intValue).toArray();
            }
            if (f.getAdmissionLogged()) { // admitted under pressure: the logged rows, no other
              AdmissionContext.replaying(f.getAdmitted().toByteArray());
            }
            try {
              t.findOrInsert(PackedKeys.fromProto(f.getKeys(), t.maxKeyBytes, "keys"), occ,
                  !f.getNoCount(), (float[]) null, null, null);
            } finally {
              AdmissionContext.close();
            }
          }
        }
        engine.ledger().replayed(r.getInsert().getCallId(), lsn, null);
      }
      default -> throw TableException.dataLoss("log record %d is empty or of an unknown kind"
          + " (%s): written by a newer version?", lsn, r.getOpCase());
    }
  }

  /** The table a replayed record applies to, or null when the record predates its snapshot. */
  private static TableStore live(ShardEngine engine, String name, long lsn,
      Map<String, Long> thresholds, long start) {
    if (lsn < thresholds.getOrDefault(name, start)) {
      return null;
    }
    return engine.lookup(name); // null: dropped later in the log: nothing to apply
  }

  // ---------------------------------------------------------------- the running shard

  @Override
  public long append(LogRecord r) {
    return append(r, 0);
  }

  @Override
  public long append(LogRecord r, long reservation) {
    long lsn = wal.append(r, reservation);
    maybeSnapshot();
    return lsn;
  }

  @Override
  public long reserve(long bytes) {
    return wal.reserve(bytes);
  }

  @Override
  public void release(long reservation) {
    wal.release(reservation);
  }

  private void maybeSnapshot() {
    // like Redis's AOF rewrite: once the log holds the configured bytes and at least as many as
    // the last snapshot wrote, so snapshots never write more than the log does
    if (wal.bytesSinceRotate() >= Math.max(snapshotBytes, lastSnapshotBytes)
        && snapshotQueued.compareAndSet(false, true)) {
      snapshotter.execute(() -> {
        try {
          snapshot();
        } catch (IOException | RuntimeException e) {
          log.log(Level.WARNING, "snapshot of shard " + engine.shardIndex() + " failed; the log"
              + " keeps growing until one succeeds", e);
        } finally {
          snapshotQueued.set(false);
        }
      });
    }
  }

  @Override
  public void awaitDurable(long lsn) {
    wal.awaitDurable(lsn);
    ReplicationHook r = replication;
    if (r != null && lsn > 0) {
      r.awaitReplicated(lsn);
    }
  }

  /** Returns once record {@code lsn} is on the disk, whatever the fsync policy. */
  public void forceThrough(long lsn) {
    wal.forceThrough(lsn);
  }

  // ---------------------------------------------------------------- replication (design 0019)

  /** Whether a replication hook ships this shard's records to followers. */
  public boolean replicating() {
    return replication != null;
  }

  /** Whether {@code hook} is the one shipping this shard's records. */
  public boolean replicatingTo(ReplicationHook hook) {
    return replication == hook;
  }

  /**
   * Makes this shard a primary whose records {@code hook} ships to followers (null: none). Every
   * record appended from now on is handed to it in LSN order, and every mutating call waits for
   * {@link ReplicationHook#awaitReplicated} before it is answered.
   */
  public void replicateTo(ReplicationHook hook) {
    this.replication = hook;
    wal.tail(hook == null ? null : (bytes, lsn) -> hook.appended(lsn, parseRecord(bytes)));
  }

  /** Parses a copy the log made for the tail; its bytes fields alias it (no second copy). */
  private static LogRecord parseRecord(byte[] bytes) {
    com.google.protobuf.CodedInputStream in =
        com.google.protobuf.CodedInputStream.newInstance(bytes);
    in.enableAliasing(true);
    try {
      return LogRecord.parseFrom(in);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("a log record just serialized does not parse", e);
    }
  }

  /** The log directory: a follower writes a restored table's files there before its record. */
  public Path walDirectory() {
    return walDir;
  }

  /**
   * A follower's step: applies its primary's record {@code lsn} as recovery would and appends it
   * to this shard's own log under the same LSN, so that this process can take over as primary
   * with every table and the call ledger. Records come one at a time, in order; a gap is
   * DATA_LOSS (the follower must load a snapshot again).
   */
  public synchronized void applyReplicated(long lsn, LogRecord r) throws IOException {
    long expected = wal.lastLsn() + 1;
    if (lsn != expected) {
      throw TableException.dataLoss("replicated record %d arrived where record %d was expected",
          lsn, expected);
    }
    // its room in the log first, as the live path: a full disk refuses the record before it is
    // applied (the primary sends it again), never after (a resend would apply it twice)
    long[] reservation = {wal.reserve(r.getSerializedSize())};
    try {
      applyAndLog(r, lsn, reservation);
    } finally {
      wal.release(reservation[0]); // the record was not appended: its room goes back
    }
    maybeSnapshot();
  }

  /**
   * A follower's record applied and appended in the room {@code reservation[0]} holds; the
   * append takes the room (zeroed here), even when it fails.
   */
  private void applyAndLog(LogRecord r, long lsn, long[] reservation) throws IOException {
    switch (r.getOpCase()) {
      case WRITE, INSERT -> {
        // under the tables' shared locks, as the live path: a snapshot's copy of a table sees
        // the record applied and logged, or neither
        List<String> names = new java.util.ArrayList<>();
        if (r.hasWrite()) {
          r.getWrite().getItemsList().forEach(i -> names.add(i.getTable()));
        } else {
          r.getInsert().getItemsList().forEach(i -> names.add(i.getFindOrInsert().getTable()));
        }
        List<TableStore> stores = new java.util.ArrayList<>();
        for (String n : new java.util.TreeSet<>(names)) {
          TableStore t = engine.lookup(n);
          if (t != null) {
            stores.add(t);
          }
        }
        List<TableStore> locked = ShardEngine.lockShared(stores);
        try {
          replay(engine, walDir, r, lsn, thresholds, startLsn);
          long room = reservation[0];
          reservation[0] = 0;
          wal.append(r, room);
        } finally {
          ShardEngine.unlockShared(locked);
        }
      }
      default -> {
        // a store replaced or removed: as the live path does, under the snapshot cut's mutex and
        // the catalogue, the old store retired under its exclusive lock
        synchronized (snapshotMutex) {
          synchronized (engine.catalogue()) {
            String name = switch (r.getOpCase()) {
              case CREATE -> r.getCreate().getName();
              case DROP -> r.getDrop();
              case RESTORE -> r.getRestore().getTable();
              case EVICT -> r.getEvict().getTable();
              case GROW -> r.getGrow().getTable();
              default -> null;
            };
            TableStore old = name == null ? null : engine.lookup(name);
            if (old != null) {
              old.quiesce.writeLock().lock();
            }
            try {
              replay(engine, walDir, r, lsn, thresholds, startLsn);
              long room = reservation[0];
              reservation[0] = 0;
              wal.append(r, room);
              if (old != null && engine.lookup(name) != old) {
                old.retired = true;
              }
            } finally {
              if (old != null) {
                old.quiesce.writeLock().unlock();
              }
            }
          }
        }
      }
    }
  }

  /**
   * Hard-links the files of the current snapshot into {@code into} (which must not exist) and
   * returns its start LSN: the links survive the snapshot's deletion by a later one, so a
   * follower can be sent them while this shard keeps snapshotting.
   */
  public long linkCurrentSnapshot(Path into) throws IOException {
    synchronized (snapshotMutex) { // no snapshot deletes it while the links are made
      SnapshotManifest m = readCurrent(snapDir);
      if (m == null) {
        throw new IOException("no snapshot in " + snapDir);
      }
      Path dir = snapDir.resolve(snapshotName(m.getStartLsn()));
      Files.createDirectories(into);
      try (Stream<Path> files = Files.list(dir)) {
        for (Path f : files.toList()) {
          Files.createLink(into.resolve(f.getFileName()), f);
        }
      }
      return m.getStartLsn();
    }
  }

  /**
   * Cuts the log of shard {@code index} under {@code stateDir} after record {@code lsn}: a
   * deposed primary's tail (or what a follower got from it) that the new primary's log does not
   * hold, so that the process rejoins from its own log (docs/design/0023). The caller has closed
   * the {@link ShardState} of that directory; {@link #recover} then replays up to {@code lsn}.
   * The files of restores and slot imports logged after it go too.
   *
   * @return false, changing nothing, when it cannot: the current snapshot was taken after
   *     {@code lsn} (it holds records to be cut) or the log does not hold record {@code lsn}
   */
  public static boolean cutLogAfter(Path stateDir, int index, long lsn) throws IOException {
    Path root = root(stateDir, index);
    SnapshotManifest m = readCurrent(root.resolve("snapshots"));
    if (m != null && m.getStartLsn() > lsn + 1) {
      return false;
    }
    Path walDir = root.resolve("wal");
    if (!ShardLog.cutAfter(walDir, lsn)) {
      return false;
    }
    try (Stream<Path> s = Files.list(walDir)) {
      for (Path p : s.toList()) {
        String n = p.getFileName().toString();
        if (n.startsWith("restore-") && Long.parseLong(n.substring(8)) > lsn
            || n.startsWith(SlotMoves.IMPORTED) && !n.equals(SlotMoves.PENDING)
            && Long.parseLong(n.substring(SlotMoves.IMPORTED.length())) > lsn) {
          Dirs.deleteTree(p);
        }
      }
    }
    return true;
  }

  /**
   * Replaces the state under {@code stateDir}'s directory of shard {@code index} by a snapshot
   * received from a primary (its files in {@code received}, which is moved): the log and older
   * snapshots are deleted, the received one becomes current. The caller has closed the {@link
   * ShardState} of that directory; {@link #recover} then loads the snapshot.
   */
  public static void installReceived(Path stateDir, int index, Path received, long start)
      throws IOException {
    Path root = root(stateDir, index);
    Path snaps = root.resolve("snapshots");
    Dirs.deleteTree(root.resolve("wal"));
    Dirs.deleteTree(snaps);
    Files.createDirectories(snaps);
    for (Path f : listFiles(received)) {
      Durable.fsync(f);
    }
    Durable.fsyncDirectory(received);
    Files.move(received, snaps.resolve(snapshotName(start)), StandardCopyOption.ATOMIC_MOVE);
    Durable.fsyncDirectory(snaps);
    Durable.writeAtomically(snaps.resolve(CURRENT),
        snapshotName(start).getBytes(StandardCharsets.UTF_8));
  }

  private static List<Path> listFiles(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.toList();
    }
  }

  @Override
  public long lastLsn() {
    return wal.lastLsn();
  }

  /**
   * The start LSN of the current snapshot: the log holds every record from it on (and the
   * restored tables' and slot imports' files those records name); 1 before the first snapshot.
   */
  public long snapshotStart() throws IOException {
    synchronized (snapshotMutex) {
      SnapshotManifest m = readCurrent(snapDir);
      return m == null ? 1 : m.getStartLsn();
    }
  }

  /** About how many bytes of this shard's log hold the records after {@code lsn}. */
  public long logBytesAfter(long lsn) throws IOException {
    return wal.bytesAfter(lsn);
  }

  /** The size of the last snapshot this process wrote or recovered (0: none yet). */
  public long lastSnapshotBytes() {
    return lastSnapshotBytes;
  }

  /** Receives records read back from the log. */
  public interface LogReader {
    void accept(long lsn, LogRecord record) throws IOException;
  }

  /**
   * Reads records {@code fromLsn..toLsn} of this shard's log, in order, changing nothing (a
   * primary sending a rejoining follower the records it lacks: docs/design/0023). They must
   * have been appended already; one that a snapshot deleted meanwhile is an IOException.
   */
  public void readLog(long fromLsn, long toLsn, LogReader reader) throws IOException {
    if (fromLsn > toLsn) {
      return;
    }
    ShardLog.read(walDir, fromLsn, toLsn, (lsn, payload) -> {
      LogRecord r;
      try {
        r = LogRecord.parseFrom(payload);
      } catch (com.google.protobuf.InvalidProtocolBufferException e) {
        throw new IOException("record " + lsn + " of the log does not parse", e);
      }
      reader.accept(lsn, r);
    });
  }

  /** Log bytes a restart would replay now. */
  @Override
  public long logBytesSinceSnapshot() {
    return wal.bytesSinceRotate();
  }

  /** Seconds since the last durable snapshot (this process's or the one recovered), or NaN. */
  @Override
  public double snapshotAgeSeconds() {
    long t = lastSnapshotMillis;
    return t == 0 ? Double.NaN : (System.currentTimeMillis() - t) / 1e3;
  }

  public ShardLog.Fsync policy() {
    return wal.policy();
  }

  /** Whether a mutating call may wait before it answers: for the disk, or for followers. */
  @Override
  public boolean waitsForDisk() {
    ReplicationHook r = replication;
    return wal.policy() == ShardLog.Fsync.ALWAYS || r != null && r.mayHoldAnswers();
  }

  /**
   * Swaps in a restored table: it is first written as a checkpoint file under {@code
   * wal/restore-LSN/}, which the RESTORE record names, so recovery can rebuild it.
   */
  /**
   * Held by a snapshot from its log rotation to its last table copy: a call that replaces a
   * store (a restore, an eviction) holds it too, so that no snapshot skips the replaced store
   * after its cut (the log alone could not rebuild an evicted table).
   */
  @Override
  public Object snapshotMutex() {
    return snapshotMutex;
  }

  @Override
  public void restored(String table, TableStore fresh) {
    synchronized (snapshotMutex) { // no snapshot deletes the copy before its record is logged
      Path dir = walDir.resolve("restore-" + String.format("%020d", wal.lastLsn() + 1));
      CheckpointFile f;
      try {
        Dirs.deleteTree(dir);
        f = CheckpointIo.write(fresh.freeze(), dir, 0); // not shared yet: no lock needed
        Durable.fsyncDirectory(dir);
        Durable.fsyncDirectory(walDir);
      } catch (IOException e) {
        throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
            String.format("table '%s': keeping the restored table for recovery failed: %s",
                table, e.getMessage()));
      }
      engine.swap(table, fresh, LogRecord.newBuilder().setRestore(RestoredTable.newBuilder()
          .setTable(table).setDirectory(dir.getFileName().toString()).addFiles(f)).build());
    }
  }

  /**
   * Writes a snapshot of every table and makes it current; then the log before it, older
   * snapshots and restored-table copies are deleted. Each table is copied in memory under its
   * exclusive lock (its writes wait for the copy, not for the disk) and written from the copy.
   */
  public void snapshot() throws IOException {
    synchronized (snapshotMutex) {
      long t0 = System.nanoTime();
      long start;
      List<TableStore> stores;
      synchronized (engine.catalogue()) {
        start = wal.rotate();
        stores = engine.tables();
      }
      steps.at("rotated");
      Path tmp = snapDir.resolve(snapshotName(start) + ".tmp");
      SnapshotManifest.Builder m;
      long bytes = 0;
      Path dir;
      try {
        Dirs.deleteTree(tmp);
        Files.createDirectories(tmp);
        m = SnapshotManifest.newBuilder()
            .setFormatVersion(FORMAT_VERSION).setShardIndex(engine.shardIndex())
            .setNumShards(engine.numShards()).setStartLsn(start)
            .setCreatedAt(java.time.Instant.now().toString());
        if (engine.slotMap().epoch() > 0) {
          m.setSlotMap(engine.slotMap().toProto());
        }
        stores.sort(Comparator.comparing(TableStore::name));
        for (TableStore t : stores) {
          TableStore.Frozen copy;
          long lsn;
          t.quiesce.writeLock().lock(); // held for the copy, not for the disk write
          try {
            if (t.retired) {
              continue; // dropped or replaced after the cut: the log holds what happened
            }
            lsn = wal.lastLsn() + 1;
            copy = t.freeze();
          } finally {
            t.quiesce.writeLock().unlock();
          }
          CheckpointFile f = CheckpointIo.write(copy, tmp, 0);
          m.addTables(SnapshotTable.newBuilder().setTable(t.name()).setFile(f).setLsn(lsn));
          bytes += f.getBytes();
          steps.at("table written");
        }
        m.addAllClients(engine.ledger().snapshot(start));
        Durable.writeAtomically(tmp.resolve(MANIFEST), m.build().toByteArray());
        Durable.fsyncDirectory(tmp);
        steps.at("manifest written");
        dir = snapDir.resolve(snapshotName(start));
        Dirs.deleteTree(dir);
        Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
      } catch (IOException | RuntimeException e) {
        // a full disk, most often: what was written goes, so that it does not hold the space the
        // next try needs (the log still holds everything)
        try {
          Dirs.deleteTree(tmp);
        } catch (IOException again) {
          e.addSuppressed(again);
        }
        throw e;
      }
      Durable.fsyncDirectory(snapDir);
      steps.at("renamed");
      Durable.writeAtomically(snapDir.resolve(CURRENT),
          snapshotName(start).getBytes(StandardCharsets.UTF_8));
      steps.at("current written");
      lastSnapshotMillis = System.currentTimeMillis();
      log.info(String.format("shard %d: snapshot at log record %d: %d tables, %.1f MB written in"
          + " %.2f s", engine.shardIndex(), start, m.getTablesCount(), bytes / 1e6,
          (System.nanoTime() - t0) / 1e9));
      lastSnapshotBytes = bytes;
      // durable from here: what it covers can go
      wal.deleteBefore(start);
      steps.at("log truncated");
      try (Stream<Path> s = Files.list(snapDir)) {
        for (Path p : s.toList()) {
          String n = p.getFileName().toString();
          if (n.startsWith("snap-") && !n.equals(snapshotName(start))) {
            Dirs.deleteTree(p);
            steps.at("old snapshot deleted");
          }
        }
      }
      try (Stream<Path> s = Files.list(walDir)) {
        for (Path p : s.toList()) {
          String n = p.getFileName().toString();
          if (n.startsWith("restore-") && Long.parseLong(n.substring(8)) < start
              || n.startsWith(SlotMoves.IMPORTED) && !n.equals(SlotMoves.PENDING)
              && Long.parseLong(n.substring(SlotMoves.IMPORTED.length())) < start) {
            Dirs.deleteTree(p);
          }
        }
      }
    }
  }

  /** Flushes the log; with {@code snapshot}, first writes a snapshot if the log grew since. */
  public void close(boolean snapshot) throws IOException {
    snapshotter.shutdownNow();
    try {
      if (snapshot && wal.bytesSinceRotate() > 0) {
        snapshot();
      }
    } finally {
      try {
        wal.close();
      } finally {
        unlock();
      }
    }
  }

  /**
   * Stops as a kill would (tests): background snapshots end, the log's file is closed without a
   * flush of anything, and the directory lock goes, so that another engine can recover it.
   */
  public void crash() throws IOException, InterruptedException {
    snapshotter.shutdownNow();
    snapshotter.awaitTermination(1, java.util.concurrent.TimeUnit.MINUTES);
    wal.abandon();
    unlock();
  }

  private void unlock() throws IOException {
    if (lock != null) {
      lock.release();
      lockChannel.close();
      lock = null;
    }
  }

  @Override
  public void close() throws IOException {
    close(false);
  }

  // ---------------------------------------------------------------- files

  static String snapshotName(long startLsn) {
    return String.format("snap-%020d", startLsn);
  }

  private static SnapshotManifest readCurrent(Path snapDir) throws IOException {
    Path current = snapDir.resolve(CURRENT);
    if (!Files.exists(current)) {
      return null;
    }
    String name = Files.readString(current, StandardCharsets.UTF_8).trim();
    if (!name.matches("snap-\\d{20}")) {
      throw TableException.dataLoss("%s names '%s', which is not a snapshot", current, name);
    }
    try {
      SnapshotManifest m = SnapshotManifest.parseFrom(
          Files.readAllBytes(snapDir.resolve(name).resolve(MANIFEST)));
      if (m.getFormatVersion() != FORMAT_VERSION) {
        throw TableException.precondition("snapshot %s has format %d; this shard reads %d", name,
            m.getFormatVersion(), FORMAT_VERSION);
      }
      return m;
    } catch (NoSuchFileException e) {
      throw TableException.dataLoss("snapshot %s named by %s has no manifest", name, current);
    }
  }

  /** A data directory keeps one shard's state: starting it as another shard is refused. */
  private static void checkIdentity(Path root, ShardEngine engine) throws IOException {
    Path id = root.resolve(IDENTITY);
    String mine = "shard " + engine.shardIndex() + " of " + engine.numShards();
    if (Files.exists(id)) {
      String theirs = Files.readString(id, StandardCharsets.UTF_8).trim();
      if (!theirs.equals(mine)) {
        throw TableException.precondition("%s holds the state of %s, but this is %s: start with"
            + " the same --shard-index and --num-shards, or use another --data-dir", root,
            theirs, mine);
      }
    } else {
      Durable.writeAtomically(id, (mine + "\n").getBytes(StandardCharsets.UTF_8));
    }
  }

  /** Checks one item of a write (plain or pooled) whole; also how a logged write is replayed. */
  public static TableStore.CheckedGradients checkWrite(TableStore t, ApplyGradientsRequest req) {
    PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
    if (req.hasPairs()) {
      if (req.hasPool() || !req.getGradients().isEmpty() || !req.getAssignValues().isEmpty()
          || req.getAssignFrequenciesCount() > 0) {
        throw TableException.invalid("table '%s': a pair report carries anchors and partners"
            + " only (no gradients, bags or rows); nothing was applied", t.name());
      }
      var p = req.getPairs();
      return t.checkPairs(keys, PackedKeys.fromProto(p.getPartners(), t.maxKeyBytes, "partners"),
          p.getCountsCount() == 0 ? null
              : p.getCountsList().stream().mapToInt(Integer::intValue).toArray());
    }
    if (!req.getAssignValues().isEmpty()) {
      if (req.hasPool() || !req.getGradients().isEmpty()) {
        throw TableException.invalid("table '%s': an assign carries rows only (no gradients, no"
            + " bags); nothing was applied", t.name());
      }
      Rows.floatCount(req.getAssignValues(), "assign_values");
      return t.checkAssign(keys, Rows.decode(req.getAssignValues()),
          req.getAssignFrequenciesCount() == 0 ? null
              : req.getAssignFrequenciesList().stream().mapToLong(Long::longValue).toArray());
    }
    if (req.getAssignFrequenciesCount() > 0) {
      throw TableException.invalid("table '%s': assign_frequencies without assign_values;"
          + " nothing was applied", t.name());
    }
    Rows.floatCount(req.getGradients(), "gradients");
    if (req.hasPool()) {
      return PooledRows.checkGradients(t, keys, KeyBags.fromProto(req.getPool(), keys.size()),
          Rows.decode(req.getGradients()), req.getLearningRate());
    }
    return t.checkGradients(keys, Rows.decode(req.getGradients()), req.getLearningRate());
  }
}
