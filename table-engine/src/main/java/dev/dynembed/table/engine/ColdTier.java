package dev.dynembed.table.engine;

import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ColdRows.Record;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.CompressionType;
import org.rocksdb.DBOptions;
import org.rocksdb.LRUCache;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Snapshot;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * The disk tier of one shard (docs/design/0014-storage-tiers.md): an embedded RocksDB holding the
 * cold rows of the tables with {@code disk_tier}, one column family per table, key = the key's
 * UTF-8 bytes, value = the record (row and slots as little-endian float32, then frequency, last
 * step and update count as int64).
 *
 * <p>It is a cache of memory, not a store of record: the write-ahead log and the snapshots, which
 * hold both tiers, are what survives a crash. So it is wiped when opened, written without
 * RocksDB's own log, and never synced; a restart rebuilds it by demoting again.
 */
public final class ColdTier implements AutoCloseable {
  static {
    RocksDB.loadLibrary();
  }

  private final Path dir;
  private final DBOptions dbOptions;
  private final ColumnFamilyOptions cfOptions;
  private final LRUCache cache;
  private final RocksDB db;
  private final ColumnFamilyHandle defaultFamily;
  private final WriteOptions writes = new WriteOptions().setDisableWAL(true);
  private final ConcurrentHashMap<String, Table> tables = new ConcurrentHashMap<>();

  /**
   * Opens an empty disk tier in {@code dir} (whatever was there is deleted first).
   *
   * @param cacheBytes RocksDB's block cache (reads of recently read blocks stay in memory)
   */
  public ColdTier(Path dir, long cacheBytes) {
    this.dir = dir.toAbsolutePath().normalize();
    try {
      Dirs.deleteTree(this.dir);
      Files.createDirectories(this.dir);
    } catch (IOException e) {
      throw new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
          "cannot prepare the disk tier's directory " + this.dir + ": " + e.getMessage());
    }
    cache = new LRUCache(cacheBytes);
    cfOptions = new ColumnFamilyOptions()
        .setTableFormatConfig(new BlockBasedTableConfig().setBlockCache(cache)
            .setFilterPolicy(new BloomFilter(10, false)) // a miss (a new key) costs no disk read
            .setBlockSize(16 << 10))
        .setCompressionType(CompressionType.LZ4_COMPRESSION);
    dbOptions = new DBOptions().setCreateIfMissing(true).setCreateMissingColumnFamilies(true)
        .setMaxBackgroundJobs(2);
    List<ColumnFamilyHandle> handles = new ArrayList<>();
    try {
      db = RocksDB.open(dbOptions, this.dir.toString(),
          List.of(new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY, cfOptions)), handles);
    } catch (RocksDBException e) {
      throw failed("opening " + this.dir, e);
    }
    defaultFamily = handles.get(0);
  }

  private static TableException failed(String what, RocksDBException e) {
    return new TableException(dev.dynembed.table.common.ErrorCode.INTERNAL,
        "disk tier: " + what + " failed: " + e.getMessage());
  }

  /** The cold part of a table, created empty on first use. */
  public Table table(String name, int recordFloats) {
    return tables.computeIfAbsent(name, n -> new Table(n, recordFloats));
  }

  /** Deletes a table's cold rows (drop, restore). */
  public void drop(String name) {
    Table t = tables.remove(name);
    if (t != null) {
      t.dropFamily();
    }
  }

  public Path directory() {
    return dir;
  }

  @Override
  public void close() {
    for (Table t : tables.values()) {
      synchronized (t) {
        if (!t.dropped) {
          t.family.close();
        }
        t.closed = true;
      }
    }
    defaultFamily.close();
    db.close();
    writes.close();
    dbOptions.close();
    cfOptions.close();
    cache.close();
    try {
      Dirs.deleteTree(dir);
    } catch (IOException ignored) {
      // a leftover directory; wiped at the next open
    }
  }

  /** A table's column family. */
  public final class Table extends ColdKeys {
    private final String name;
    /** Floats of a record (row and slots); changed only by {@link #widen}, under this lock. */
    private volatile int recordFloats;
    private final ColumnFamilyHandle family;
    /** Views open (a checkpoint being written); a dropped family is closed after the last. */
    private int openViews;
    private boolean dropped;
    /** Set by the tier's close: every later call is refused (the handles are gone). */
    private boolean closed;

    private Table(String name, int recordFloats) {
      this.name = name;
      this.recordFloats = recordFloats;
      try {
        // a unique family name per life of the table: a dropped family may still be closing
        this.family = db.createColumnFamily(new ColumnFamilyDescriptor(
            (name + "#" + System.nanoTime()).getBytes(StandardCharsets.UTF_8), cfOptions));
      } catch (RocksDBException e) {
        throw failed("creating the column family of table '" + name + "'", e);
      }
    }

    @Override
    public void drop() {
      ColdTier.this.drop(name);
    }

    byte[] encode(float[] src, int off, long freq, long step, long updates) {
      return ColdRows.encode(src, off, recordFloats, freq, step, updates);
    }

    Record decode(byte[] key, byte[] v) {
      return decode(key, v, recordFloats);
    }

    /** A record of {@code floats} floats (a width it had before a grow). */
    Record decode(byte[] key, byte[] v, int floats) {
      return ColdRows.decode(key, v, floats, name, "disk-tier");
    }

    /**
     * Rewrites every cold record as {@code widen} makes it, {@code floats} floats wide (a grow of
     * the table, under its exclusive lock): read from one snapshot, written back in batches of
     * 4,096. Keys, frequencies and counts stay. A view opened before reads the records it saw,
     * at their width; a scan in progress starts again.
     */
    @Override
    public synchronized void widen(int floats, java.util.function.UnaryOperator<Record> widen) {
      checkLive();
      if (scan != null) {
        scan.close();
        scan = null;
      }
      int was = recordFloats;
      Snapshot snap = db.getSnapshot();
      try (ReadOptions ro = new ReadOptions().setFillCache(false).setSnapshot(snap);
          RocksIterator it = db.newIterator(family, ro)) {
        WriteBatch batch = new WriteBatch();
        try {
          int n = 0;
          for (it.seekToFirst(); it.isValid(); it.next()) {
            Record r = widen.apply(decode(it.key(), it.value(), was));
            batch.put(family, r.key(), ColdRows.encode(r.values(), 0, floats, r.frequency(),
                r.step(), r.updates()));
            if (++n % 4096 == 0) {
              db.write(writes, batch);
              batch.close();
              batch = new WriteBatch();
            }
          }
          db.write(writes, batch);
        } finally {
          batch.close();
        }
      } catch (RocksDBException e) {
        throw failed("widening table '" + name + "'", e);
      } finally {
        db.releaseSnapshot(snap);
      }
      recordFloats = floats;
    }

    @Override
    public synchronized Record peek(byte[] key) {
      checkLive();
      try {
        byte[] v = db.get(family, key);
        return v == null ? null : decode(key, v);
      } catch (RocksDBException e) {
        throw failed("reading table '" + name + "'", e);
      }
    }

    /**
     * The key's cold record, removed from disk, or null (a promotion). The table's RocksDB calls
     * are serialised on it (each takes microseconds; see docs/design/0014 for why).
     */
    @Override
    public synchronized Record take(byte[] key) {
      checkLive();
      try {
        byte[] v = db.get(family, key);
        if (v == null) {
          return null;
        }
        db.delete(family, writes, key);
        Record r = decode(key, v);
        counts.remove(new String(key, StandardCharsets.UTF_8));
        frequency.addAndGet(-r.frequency());
        promotions.incrementAndGet();
        return r;
      } catch (RocksDBException e) {
        throw failed("reading table '" + name + "'", e);
      }
    }

    /** Writes demoted records in one batch. */
    @Override
    public synchronized void putAll(List<Record> records) {
      if (records.isEmpty()) {
        return;
      }
      checkLive();
      long f = 0;
      try (WriteBatch batch = new WriteBatch()) {
        for (Record r : records) {
          batch.put(family, r.key(), encode(r.values(), 0, r.frequency(), r.step(),
              r.updates()));
          f += r.frequency();
        }
        db.write(writes, batch);
      } catch (RocksDBException e) {
        throw failed("writing table '" + name + "'", e);
      }
      for (Record r : records) {
        counts.put(new String(r.key(), StandardCharsets.UTF_8), r.frequency());
      }
      frequency.addAndGet(f);
      demotions.addAndGet(records.size());
    }

    /** Deletes keys (an explicit eviction); returns how many were on disk. */
    @Override
    public synchronized long remove(List<byte[]> keyList) {
      checkLive();
      long n = 0;
      long f = 0;
      try (WriteBatch batch = new WriteBatch()) {
        for (byte[] k : keyList) {
          byte[] v = db.get(family, k);
          if (v != null) {
            batch.delete(family, k);
            f += decode(k, v).frequency();
            counts.remove(new String(k, StandardCharsets.UTF_8));
            n++;
          }
        }
        db.write(writes, batch);
      } catch (RocksDBException e) {
        throw failed("deleting from table '" + name + "'", e);
      }
      frequency.addAndGet(-f);
      return n;
    }

    /**
     * Refuses a call on a dropped family (a store retired by a drop or a restore that a caller
     * still holds): its handle may be closed, and RocksDB does not check handles.
     */
    private void checkLive() {
      if (closed) {
        throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
            "table '" + name + "': the shard's disk tier is closed (the shard is shutting down)");
      }
      if (dropped) {
        throw TableException.storeReplaced(name);
      }
    }

    /**
     * A consistent view of the cold rows as they are now (the caller holds the table's lock
     * exclusively, so no demotion or promotion straddles it); iterate with {@link View#each}.
     */
    @Override
    public synchronized View view() {
      checkLive();
      openViews++;
      return new View(db.getSnapshot());
    }

    /** The scan reading the cold rows page by page (one per table), or null. */
    private ColdScan scan;

    /**
     * Up to {@code n} cold records from position {@code pos} of a scan: the scan begun at
     * position 0 continues on its snapshot when asked for the position it reached; any other
     * position starts a new snapshot and skips to it.
     */
    @Override
    public synchronized List<Record> page(long pos, int n) {
      checkLive();
      if (scan == null || scan.position != pos) {
        if (scan != null) {
          scan.close();
        }
        scan = new ColdScan(view());
        for (; scan.position < pos && scan.it.isValid(); scan.position++) {
          scan.it.next();
        }
      }
      List<Record> out = new ArrayList<>(Math.min(n, 4096));
      while (out.size() < n && scan.it.isValid()) {
        out.add(decode(scan.it.key(), scan.it.value()));
        scan.it.next();
        scan.position++;
      }
      if (!scan.it.isValid()) {
        scan.close();
        scan = null;
      }
      return out;
    }

    /** An iterator over one snapshot of the cold rows and how far it has gone. */
    private final class ColdScan implements AutoCloseable {
      final View view;
      final ReadOptions options;
      final RocksIterator it;
      long position;

      ColdScan(View view) {
        this.view = view;
        this.options = new ReadOptions().setSnapshot(view.snapshot).setFillCache(false);
        this.it = db.newIterator(family, options);
        it.seekToFirst();
      }

      @Override
      public void close() {
        it.close();
        options.close();
        view.close();
      }
    }

    /** Drops the family; its handle closes once no view reads it (iterators keep its data). */
    private synchronized void dropFamily() {
      dropped = true;
      if (scan != null) {
        scan.close();
        scan = null;
      }
      try {
        db.dropColumnFamily(family);
      } catch (RocksDBException e) {
        throw failed("dropping the column family of table '" + name + "'", e);
      } finally {
        if (openViews == 0) {
          family.close();
        }
      }
    }

    private synchronized void viewClosed() {
      if (--openViews == 0 && dropped) {
        family.close();
      }
    }

    /** A snapshot of the table's cold rows; close it to release the snapshot. */
    public final class View implements ColdRows.View {
      private final Snapshot snapshot;
      /** The records' width when the view was opened (a grow may widen them meanwhile). */
      private final int floats = recordFloats;

      private View(Snapshot snapshot) {
        this.snapshot = snapshot;
      }

      /** Calls {@code out} with every record, in key order, until it returns false. */
      @Override
      public void each(java.util.function.Predicate<Record> out) {
        try (ReadOptions ro = new ReadOptions().setSnapshot(snapshot).setFillCache(false);
            RocksIterator it = db.newIterator(family, ro)) {
          for (it.seekToFirst(); it.isValid(); it.next()) {
            if (!out.test(decode(it.key(), it.value(), floats))) {
              return;
            }
          }
        }
      }

      @Override
      public void close() {
        db.releaseSnapshot(snapshot);
        viewClosed();
      }
    }
  }
}
