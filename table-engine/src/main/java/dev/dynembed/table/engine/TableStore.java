package dev.dynembed.table.engine;

import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.concurrent.locks.StampedLock;

/**
 * One table on one shard: string keys to float rows, with optimizer slots and per-key metadata.
 *
 * <h2>Layout (no per-key objects)</h2>
 *
 * <ul>
 *   <li><b>Rows</b>: each key has a dense row id. Its record {@code [w | slots]} ({@link
 *       #rowFloats} floats) lives in a float page: {@code rowPages[id >>> pageShift]} at {@code
 *       (id & pageMask) * rowFloats}. Pages are fixed-size, so growth wastes at most one page
 *       (never the 2x of a doubling array).
 *   <li><b>Metadata</b>: {@link #META} longs per row in long pages: key reference (arena offset
 *       &lt;&lt; 16 | length), frequency, last-update step, update count.
 *   <li><b>Keys</b>: UTF-8 bytes appended to 1 MiB byte pages (a key never spans pages).
 *   <li><b>Index</b>: 64 segments of linear-probing {@code long[]} (32-bit hash tag | row id + 1
 *       per entry, one word), each guarded by its own {@link StampedLock}; segment, slot and tag
 *       come from {@code mix(xxh3(key))}, so the bits used by {@code shard = hash mod n} do not
 *       skew them.
 * </ul>
 *
 * <h2>Concurrency (docs/design/0003-update-consistency.md)</h2>
 *
 * Lookups take a segment's read lock, inserts its write lock. A row is fully written (key, row,
 * slots) before its id is published in the index, and scans see a row only once its key reference
 * is set (release/acquire). Updates of one row are serialized by 1024 lock stripes, so optimizer
 * slots are never torn by two writers; reads of a row being updated are not locked (each float is
 * read atomically, a row may mix old and new values: the Hogwild relaxation). Frequencies are
 * atomic increments. Mutating calls hold the table's {@link #quiesce} lock shared; a checkpoint
 * holds it exclusively, so a saved table is a consistent cut.
 *
 * <h2>Why one class of ~900 lines</h2>
 *
 * Index, row pages, key pages and admission share one publication protocol: a row id becomes
 * visible in the index only after its key, row and slots are written, and the lock-free
 * lookup's validation depends on the index and the pages being replaced together. Split into
 * classes, every lookup (the hot path: a few hundred nanoseconds per key, JMH {@code StoreBench})
 * would cross an object boundary per page access and the protocol would be spread over files.
 * The readers that live elsewhere ({@link CheckpointIo}, {@link Samplers}, {@link TopK}) use the
 * package-private accessors at the end of this file and no field directly.
 */
public final class TableStore {
  static final int META = 4;
  static final int M_KEYREF = 0;
  static final int M_FREQ = 1;
  static final int M_STEP = 2;
  static final int M_UPDATES = 3;

  private static final int SEGMENT_BITS = 6;
  private static final int KEY_PAGE_BYTES = 1 << 20;
  private static final int STRIPES = 1024;
  private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);

  private final TableConfig config;
  public final int dim;
  final int rowFloats;
  public final int maxKeyBytes;
  final int shardIndex;
  final int numShards;
  private final RowOptimizer optimizer;
  private final RowInitializer initializer;

  private final int pageShift;
  private final int pageMask;
  private volatile float[][] rowPages = new float[0][];
  private volatile long[][] metaPages = new long[0][];
  private volatile byte[][] keyPages = new byte[0][];
  private int keyPageUsed = KEY_PAGE_BYTES; // forces a first page
  private long keyBytes;
  private volatile int numRows;
  private final Object allocLock = new Object();

  private final Segment[] segments = new Segment[1 << SEGMENT_BITS];
  private final Object[] stripes = new Object[STRIPES];
  public final ReentrantReadWriteLock quiesce = new ReentrantReadWriteLock();
  /**
   * Set, under {@link #quiesce} held exclusively, when a drop or a restore replaces this store:
   * a mutating call that holds the lock shared checks it and fails instead of acknowledging a
   * change to a discarded store.
   */
  public volatile boolean retired;

  private final LongAdder totalFrequency = new LongAdder();
  private final int minCount;
  /**
   * Admission counts of keys without a row (min_count &gt; 1), by 64-bit key hash: no key bytes
   * and no row until admitted. Two keys whose hashes collide share a count (odds ~n^2/2^65).
   */
  private java.util.concurrent.ConcurrentHashMap<Long, Long> pending =
      new java.util.concurrent.ConcurrentHashMap<>();
  /** With admission_sketch_kib: the counts of keys awaiting admission, instead of {@link #pending}. */
  private final AdmissionSketch sketch;
  private final LongAdder updates = new LongAdder();
  /** This store's identity for scans: a new store (eviction, restore, restart) has another. */
  final long generation = java.util.concurrent.ThreadLocalRandom.current().nextLong(1,
      Long.MAX_VALUE);
  private final AtomicLong lastStep = new AtomicLong();
  private final Samplers samplers;
  /**
   * The table's rows on disk (disk_tier), shared by the stores that replace this one, or null.
   * Attached before the store is published.
   */
  private volatile ColdTier.Table cold;

  /**
   * @param config a config already passed through {@link TableConfigs#normalize}
   */
  public TableStore(TableConfig config, int shardIndex, int numShards) {
    this.config = config;
    this.dim = config.getDim();
    this.maxKeyBytes = config.getMaxKeyBytes();
    this.minCount = config.getMinCount();
    this.sketch = config.getAdmissionSketchKib() > 0
        ? new AdmissionSketch(config.getAdmissionSketchKib()) : null;
    this.shardIndex = shardIndex;
    this.numShards = numShards;
    this.optimizer = RowOptimizer.create(config.getOptimizer(), dim);
    this.initializer = new RowInitializer(config.getInitializer());
    this.rowFloats = dim * (1 + optimizer.slots());
    // about 64K floats (256 KiB) per page, at least 16 rows
    int rowsPerPage = Integer.highestOneBit(Math.max(16, (1 << 16) / rowFloats));
    this.pageShift = Integer.numberOfTrailingZeros(rowsPerPage);
    this.pageMask = rowsPerPage - 1;
    for (int i = 0; i < segments.length; i++) {
      segments[i] = new Segment();
    }
    for (int i = 0; i < STRIPES; i++) {
      stripes[i] = new Object();
    }
    this.samplers = new Samplers(this);
  }

  public TableConfig config() {
    return config;
  }

  public String name() {
    return config.getName();
  }

  public int dim() {
    return dim;
  }

  /** Number of keys with a row. */
  public int size() {
    return numRows;
  }

  // ---------------------------------------------------------------- lookups

  /**
   * Rows of existing keys. Missing keys get zeros and a clear bit in {@code found}.
   *
   * @param out FLOAT [n, dim], row-major
   * @param found bitmap, bit i = key i found (LSB first), at least ceil(n/8) bytes
   */
  public void find(PackedKeys keys, float[] out, byte[] found) {
    find(keys, RowSink.of(out), found);
  }

  /** As {@link #find(PackedKeys, float[], byte[])}, writing rows to {@code out}. */
  public void find(PackedKeys keys, RowSink out, byte[] found) {
    checkKeys(keys, "keys");
    int n = keys.size();
    for (int i = 0; i < n; i++) {
      if ((i & (WARM_CHUNK - 1)) == 0) {
        warm(keys, i, Math.min(n, i + WARM_CHUNK));
      }
      int row = lookup(keys, i);
      if (row >= 0) {
        copyRow(row, out, i);
        found[i >>> 3] |= (byte) (1 << (i & 7));
      } else {
        out.zeros(i, dim);
      }
    }
  }

  /**
   * Rows of the keys, creating missing ones from the initializer; each key's frequency grows by
   * its occurrence count (1 per position when {@code occurrences} is null). With admission
   * ({@code min_count} &gt; 1) see {@link #findOrInsert(PackedKeys, int[], boolean, float[], byte[],
   * long[])}.
   *
   * @param occurrences INT [n] counts, each &gt;= 1, or null
   * @param out FLOAT [n, dim], row-major
   */
  public void findOrInsert(PackedKeys keys, int[] occurrences, float[] out) {
    findOrInsert(keys, occurrences, true, out, null, null);
  }

  /**
   * Rows of the keys, creating admitted ones. With {@code count}, each key's count grows by its
   * occurrences: a key with a row adds them to its frequency; a key without one adds them to its
   * admission count and gets its row (frequency = that count) once the count reaches the table's
   * {@code min_count}. Keys not admitted read as zeros with their {@code found} bit clear.
   *
   * @param occurrences INT [n] counts, each &gt;= 1, or null for 1 each
   * @param count false: nothing is counted (keys are still created when min_count &lt;= 1)
   * @param out FLOAT [n, dim] row-major, or null for no rows
   * @param found bitmap of admitted keys (LSB first, ceil(n/8) bytes, cleared by the caller), or null
   * @param frequencies LONG [n] each key's count after the call, or null
   */
  public void findOrInsert(PackedKeys keys, int[] occurrences, boolean count, float[] out,
      byte[] found, long[] frequencies) {
    findOrInsert(keys, occurrences, count, out == null ? null : RowSink.of(out), found,
        frequencies);
  }

  /** As above, writing rows to {@code out} (null: no rows). */
  public void findOrInsert(PackedKeys keys, int[] occurrences, boolean count, RowSink out,
      byte[] found, long[] frequencies) {
    findOrInsert(keys, occurrences, count, out, found, frequencies, null, null);
  }

  /**
   * As above; also writes each key's optimizer slots as row i of {@code slots} (rows of {@link
   * #slotFloats()} values, zeros for a key without a row) and its update count, when those are
   * not null. A reader of the slots can replay an update exactly as this store applies it.
   */
  public void findOrInsert(PackedKeys keys, int[] occurrences, boolean count, RowSink out,
      byte[] found, long[] frequencies, RowSink slots, long[] updateCounts) {
    checkKeys(keys, "keys");
    int n = keys.size();
    if (occurrences != null) {
      if (occurrences.length != n) {
        throw TableException.invalid("table '%s': %d occurrence counts for %d keys",
            name(), occurrences.length, n);
      }
      for (int i = 0; i < n; i++) {
        if (occurrences[i] < 1) {
          throw TableException.invalid("table '%s': occurrence count of key %d is %d; it must be"
              + " >= 1", name(), i, Integer.toUnsignedLong(occurrences[i]));
        }
      }
    }
    int[] rows = frequencies == null ? null : new int[n];
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    try {
      long added = 0;
      for (int i = 0; i < n; i++) {
        if ((i & (WARM_CHUNK - 1)) == 0) {
          warm(keys, i, Math.min(n, i + WARM_CHUNK));
        }
        long occ = occurrences == null ? 1L : (long) occurrences[i];
        int row;
        if (minCount <= 1) {
          row = lookupOrInsert(keys, i);
          if (count) {
            LONGS.getAndAdd(metaPages[row >>> pageShift], (row & pageMask) * META + M_FREQ, occ);
            added += occ;
          }
        } else {
          row = lookup(keys, i);
          if (row >= 0 && count) {
            LONGS.getAndAdd(metaPages[row >>> pageShift], (row & pageMask) * META + M_FREQ, occ);
            added += occ;
          } else if (row < 0 && count) {
            row = countForAdmission(keys, i, occ);
          }
        }
        if (row >= 0) {
          if (out != null) {
            copyRow(row, out, i);
          }
          if (slots != null) {
            copySlots(row, slots, i);
          }
          if (updateCounts != null) {
            updateCounts[i] = meta(row, M_UPDATES);
          }
          if (found != null) {
            found[i >>> 3] |= (byte) (1 << (i & 7));
          }
        } else {
          if (out != null) {
            out.zeros(i, dim);
          }
          if (slots != null) {
            slots.zeros(i, slotFloats());
          }
        }
        if (rows != null) {
          rows[i] = row;
        }
      }
      totalFrequency.add(added);
      for (int i = 0; rows != null && i < n; i++) { // counts after the whole call
        if (rows[i] >= 0) {
          frequencies[i] = meta(rows[i], M_FREQ);
        } else {
          if (sketch != null) {
            frequencies[i] = sketch.estimate(keys.hash(i));
          } else {
            Long c = pending.get(keys.hash(i));
            frequencies[i] = c == null ? 0 : c;
          }
        }
      }
    } finally {
      q.unlock();
    }
  }

  /**
   * Adds {@code occ} to the admission count of key i (which had no row when looked up) and
   * creates its row once the count reaches min_count. Runs under the pending entry's lock, so
   * a key is admitted once and no count is lost to a racing caller.
   *
   * @return the row, or -1 while the key is not admitted
   */
  private int countForAdmission(PackedKeys keys, int i, long occ) {
    if (sketch != null) {
      synchronized (sketch) { // as the map's entry lock: admitted once, no count lost
        int row = lookup(keys, i);
        if (row >= 0) {
          creditFrequency(row, occ);
          return row;
        }
        long total = sketch.add(keys.hash(i), occ);
        if (total < minCount) {
          return -1;
        }
        row = lookupOrInsert(keys, i);
        creditFrequency(row, total);
        return row;
      }
    }
    int[] admitted = {-1};
    pending.compute(keys.hash(i), (h, c) -> {
      int row = lookup(keys, i); // admitted by a racing caller meanwhile?
      if (row >= 0) {
        creditFrequency(row, occ);
        admitted[0] = row;
        return c;
      }
      long total = (c == null ? 0 : c) + occ;
      if (total < minCount) {
        return total;
      }
      row = lookupOrInsert(keys, i);
      creditFrequency(row, total);
      admitted[0] = row;
      return null;
    });
    return admitted[0];
  }

  /** Keys counted but not admitted yet, as (key hash, count): for checkpoints. */
  public java.util.Map<Long, Long> pendingCounts() {
    return pending;
  }

  /** Adds {@code n} occurrences to a row's frequency and to the table's total. */
  private void creditFrequency(int row, long n) {
    LONGS.getAndAdd(metaPages[row >>> pageShift], (row & pageMask) * META + M_FREQ, n);
    totalFrequency.add(n);
  }

  /** The admission sketch, or null when pending keys are counted exactly. */
  public AdmissionSketch admissionSketch() {
    return sketch;
  }

  /**
   * Restores an admission count (checkpoint restore), or stages one in a table built by a backend
   * that keeps its counts elsewhere (the Redis backend's checkpoints).
   */
  public void restorePending(long hash, long count) {
    pending.merge(hash, count, Long::sum);
  }

  /**
   * Applies gradient rows with the table's optimizer. The batch is checked whole first (width,
   * NaN/Inf); duplicate keys are summed; keys without a row are created, then updated (with
   * admission, min_count &gt; 1, keys not yet admitted are skipped: their gradients are dropped).
   *
   * @param gradients FLOAT [n, dim], row i for key i
   * @param learningRate &gt; 0 overrides the configured rate; 0 uses it
   * @return number of distinct keys updated
   */
  public int applyGradients(PackedKeys keys, float[] gradients, float learningRate, long step) {
    return apply(checkGradients(keys, gradients, learningRate), step);
  }

  /** A gradient batch that passed {@link #checkGradients}: it can be applied without failing. */
  public static final class CheckedGradients {
    final TableStore table;
    final PackedKeys keys;
    final BatchDedup dedup;
    final float[] summed; // one row per distinct key
    final float lr;

    private CheckedGradients(TableStore table, PackedKeys keys, BatchDedup dedup, float[] summed,
        float lr) {
      this.table = table;
      this.keys = keys;
      this.dedup = dedup;
      this.summed = summed;
      this.lr = lr;
    }
  }

  /**
   * Checks a gradient batch whole (keys, width, NaN/Inf, learning rate) and sums duplicate keys,
   * changing nothing: a multi-table write checks every batch before applying any.
   */
  public CheckedGradients checkGradients(PackedKeys keys, float[] gradients, float learningRate) {
    checkKeys(keys, "keys");
    int n = keys.size();
    GradientChecks.check(name(), keys, dim, maxKeyBytes, gradients, learningRate);
    float lr = learningRate > 0f ? learningRate : config.getOptimizer().getLearningRate();
    BatchDedup dedup = BatchDedup.of(keys);
    float[] g = gradients;
    if (!dedup.allDistinct()) {
      g = new float[dedup.uniqueCount() * dim];
      for (int i = 0; i < n; i++) {
        int u = dedup.uniqueOf(i) * dim;
        if (dedup.firstPosition(dedup.uniqueOf(i)) == i) {
          System.arraycopy(gradients, i * dim, g, u, dim);
        } else {
          FloatKernels.axpy(1f, gradients, i * dim, g, u, dim);
        }
      }
    }
    return new CheckedGradients(this, keys, dedup, g, lr);
  }

  /**
   * Applies a checked batch of this table.
   *
   * @param step recorded as each updated key's last-update step
   * @return number of distinct keys updated
   */
  public int apply(CheckedGradients c, long step) {
    if (c.table != this) {
      throw new IllegalArgumentException("gradients checked by table '" + c.table.name()
          + "' cannot be applied to another store");
    }
    BatchDedup dedup = c.dedup;
    PackedKeys keys = c.keys;
    float[] g = c.summed;
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    try {
      int applied = 0;
      for (int u = 0; u < dedup.uniqueCount(); u++) {
        int row = minCount <= 1 ? lookupOrInsert(keys, dedup.firstPosition(u))
            : lookup(keys, dedup.firstPosition(u));
        if (row < 0) {
          continue; // not admitted: its gradient is dropped
        }
        applied++;
        float[] page = rowPages[row >>> pageShift];
        long[] meta = metaPages[row >>> pageShift];
        int base = (row & pageMask) * rowFloats;
        int m = (row & pageMask) * META;
        synchronized (stripes[row & (STRIPES - 1)]) {
          long t = meta[m + M_UPDATES] + 1;
          meta[m + M_UPDATES] = t;
          meta[m + M_STEP] = step;
          optimizer.apply(page, base, page, base + dim, g, u * dim, c.lr, t);
        }
      }
      updates.add(applied);
      lastStep.accumulateAndGet(step, Math::max);
      return applied;
    } finally {
      q.unlock();
    }
  }

  private void checkKeys(PackedKeys keys, String what) {
    int n = keys.size();
    if (n == 0) {
      throw TableException.invalid("table '%s': the batch of %s is empty", name(), what);
    }
    if (n > Limits.MAX_BATCH_KEYS || (long) n * dim > Limits.MAX_BATCH_FLOATS) {
      throw TableException.exhausted(
          "table '%s': a batch of %d keys at dim %d exceeds the limits (%d keys, %d floats)",
          name(), n, dim, Limits.MAX_BATCH_KEYS, Limits.MAX_BATCH_FLOATS);
    }
    for (int i = 0; i < n; i++) {
      int len = keys.length(i);
      if (len == 0) {
        throw TableException.invalid("table '%s': %s %d is empty", name(), what, i);
      }
      if (len > maxKeyBytes) {
        throw TableException.invalid(
            "table '%s': %s %d is %d bytes long; the table's max_key_bytes is %d",
            name(), what, i, len, maxKeyBytes);
      }
      if (numShards > 1) {
        int owner = KeyHashing.shardOf(keys.hash(i), numShards);
        if (owner != shardIndex) {
          throw TableException.invalid(
              "table '%s': key '%s' belongs to shard %d of %d, not to this shard %d"
                  + " (client and server disagree on the shard count)",
              name(), keys.key(i), owner, numShards, shardIndex);
        }
      }
    }
  }

  // ---------------------------------------------------------------- index

  private static final class Segment {
    final StampedLock lock = new StampedLock();
    /** Replaced whole on growth; entries are written once (empty to full) and never moved. */
    volatile long[] slots = new long[16];
    int size;
  }

  /**
   * An index entry: the high 32 bits of {@code mix(hash)} as a tag (they also choose the slot,
   * and the top 6 of them the segment), the row id + 1 in the low 32 bits; 0 is empty. Tag and
   * row share one word, so a probe costs one cache miss, and growth needs no rehash.
   */
  private static long entry(int tag, int row) {
    return ((long) tag << 32) | (row + 1L);
  }

  private static int tagOf(long m) {
    return (int) (m >>> 32);
  }

  /**
   * Row id of key i, or -1. Lock-free in the common case: an optimistic read of the segment
   * (plain loads, then {@code validate}), so the cache misses of consecutive keys overlap instead
   * of being serialized by a lock's fence; it falls back to the read lock if an insert raced.
   */
  int lookup(PackedKeys keys, int i) {
    int row = lookupHot(keys, i);
    return row >= 0 || cold == null ? row : promote(keys, i);
  }

  /** Row id of key i in memory, or -1: the disk tier is not consulted. */
  int lookupHot(PackedKeys keys, int i) {
    long m = KeyHashing.mix(keys.hash(i));
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    long stamp = s.lock.tryOptimisticRead();
    if (stamp != 0) {
      int row = probe(s.slots, tagOf(m), keys, i);
      if (s.lock.validate(stamp)) {
        return row;
      }
    }
    stamp = s.lock.readLock();
    try {
      return probe(s.slots, tagOf(m), keys, i);
    } finally {
      s.lock.unlockRead(stamp);
    }
  }

  /** Keys per {@link #warm} pass: their cache lines (~7 per key) fit in L2 together. */
  static final int WARM_CHUNK = 128;

  /**
   * Brings the cache lines that looking up keys [from, to) will touch (index slot, key record,
   * key bytes, row) into the cache, one kind at a time over the whole chunk: each pass's loads
   * are independent of each other, so the core overlaps their misses, where a key-by-key lookup
   * walks a chain of four dependent misses per key (slot, then record, then key bytes, then
   * row) that out-of-order execution can hardly overlap across keys. Plain, racy reads: the
   * result is only a cache state; {@link #lookup} still decides, validated, what a key's row is.
   */
  private void warm(PackedKeys keys, int from, int to) {
    int len = to - from;
    long[] refs = warmRefs.get();
    long sink = 0;
    for (int j = 0; j < len; j++) { // 1: the index slot of each key (its first probe)
      long m = KeyHashing.mix(keys.hash(from + j));
      long[] slots = segments[(int) (m >>> (64 - SEGMENT_BITS))].slots;
      long e = slots[tagOf(m) & (slots.length - 1)];
      refs[j] = tagOf(e) == tagOf(m) ? (int) e - 1 : -1; // candidate row (0 entry: -1)
    }
    long[][] mp = metaPages;
    float[][] rp = rowPages;
    for (int j = 0; j < len; j++) { // 2: the candidate row's key record, and the row itself
      int row = (int) refs[j];
      if (row >= 0 && (row >>> pageShift) < mp.length && (row >>> pageShift) < rp.length) {
        refs[j] = mp[row >>> pageShift][(row & pageMask) * META + M_KEYREF];
        float[] page = rp[row >>> pageShift];
        int base = (row & pageMask) * rowFloats;
        sink += Float.floatToRawIntBits(page[base]) + Float.floatToRawIntBits(page[base + dim - 1]);
      } else {
        refs[j] = 0;
      }
    }
    byte[][] kp = keyPages;
    for (int j = 0; j < len; j++) { // 3: the key bytes the lookup compares
      long ref = refs[j];
      if (ref > 0) {
        long off = ref >>> 16;
        int kpage = (int) (off / KEY_PAGE_BYTES);
        if (kpage < kp.length) {
          sink += kp[kpage][(int) (off % KEY_PAGE_BYTES)];
        }
      }
    }
    warmSink = sink; // keeps the loads from being removed as dead code
  }

  private final ThreadLocal<long[]> warmRefs = ThreadLocal.withInitial(() -> new long[WARM_CHUNK]);
  @SuppressWarnings("unused")
  private long warmSink;

  /**
   * Moves key i's record from the disk tier into memory, if it is there: its row, slots and
   * metadata as demoted. Under the segment's write lock, as an insert, so a key is promoted once;
   * the caller holds {@link #quiesce} shared, so no checkpoint cut sees it in neither tier.
   *
   * @return the row, or -1 if the key is on disk neither
   */
  private int promote(PackedKeys keys, int i) {
    long m = KeyHashing.mix(keys.hash(i));
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    long stamp = s.lock.writeLock();
    try {
      int row = probe(s.slots, tagOf(m), keys, i);
      if (row >= 0) {
        return row;
      }
      byte[] key = Arrays.copyOfRange(keys.bytes(), keys.offset(i), keys.offset(i)
          + keys.length(i));
      ColdTier.Record r = cold.take(key);
      if (r == null) {
        return -1;
      }
      return place(s, m, keys, i, r.values(), 0, r.frequency(), r.step(), r.updates());
    } finally {
      s.lock.unlockWrite(stamp);
    }
  }

  /**
   * Takes over a replaced store's admission counts, without copying them (an eviction's rebuild:
   * the old store is retired under its exclusive lock, before this one is published).
   */
  void adoptPending(TableStore old) {
    this.pending = old.pending;
  }

  /** Attaches the table's disk tier (before the store is published). */
  void attachCold(ColdTier.Table c) {
    this.cold = c;
  }

  /** The table's disk tier, or null. */
  ColdTier.Table cold() {
    return cold;
  }

  /** Row id of key i, created (from the initializer) if missing. */
  int lookupOrInsert(PackedKeys keys, int i) {
    int row = lookup(keys, i);
    if (row >= 0) {
      return row;
    }
    long h = keys.hash(i);
    long m = KeyHashing.mix(h);
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    long stamp = s.lock.writeLock();
    try {
      row = probe(s.slots, tagOf(m), keys, i);
      if (row >= 0) {
        return row;
      }
      reserveSlot(s); // may allocate: before the row exists, so an OutOfMemoryError leaves none
      row = allocate(keys.bytes(), keys.offset(i), keys.length(i));
      float[] page = rowPages[row >>> pageShift];
      int base = (row & pageMask) * rowFloats;
      initializer.fill(h, page, base, dim);
      optimizer.initSlots(page, base + dim);
      publish(row);
      insert(s, tagOf(m), row);
      return row;
    } finally {
      s.lock.unlockWrite(stamp);
    }
  }

  /**
   * Linear probe. May run without the lock (see {@link #lookup}): it gives up after one lap and
   * treats anything half-written as a miss; the caller's {@code validate} discards such results.
   */
  private int probe(long[] slots, int tag, PackedKeys keys, int i) {
    int mask = slots.length - 1;
    int slot = tag & mask;
    for (int n = 0; n <= mask; n++) {
      long e = slots[slot];
      if (e == 0) {
        return -1;
      }
      if ((int) (e >>> 32) == tag && keyEquals((int) e - 1, keys, i)) {
        return (int) e - 1;
      }
      slot = (slot + 1) & mask;
    }
    return -1;
  }

  /**
   * Grows the segment's index now if one more entry would need it, so that the {@link #insert}
   * that follows a row's publication never allocates: a row published but missing from the index
   * (an OutOfMemoryError in between) would be seen by scans and checkpoints but never by lookups.
   */
  private static void reserveSlot(Segment s) {
    if ((s.size + 1) * 4 > s.slots.length * 3) {
      grow(s);
    }
  }

  /** Adds an entry; the caller has {@link #reserveSlot reserved} room for it. */
  private void insert(Segment s, int tag, int row) {
    long[] slots = s.slots;
    int mask = slots.length - 1;
    int slot = tag & mask;
    while (slots[slot] != 0) {
      slot = (slot + 1) & mask;
    }
    slots[slot] = entry(tag, row);
    s.size++;
  }

  private static void grow(Segment s) {
    long[] old = s.slots;
    long[] t = new long[old.length * 2];
    int mask = t.length - 1;
    for (long e : old) {
      if (e != 0) {
        int slot = (int) (e >>> 32) & mask;
        while (t[slot] != 0) {
          slot = (slot + 1) & mask;
        }
        t[slot] = e;
      }
    }
    s.slots = t;
  }

  /** Whether row's key equals key i; false for anything not (yet) visible to this thread. */
  private boolean keyEquals(int row, PackedKeys keys, int i) {
    long[][] mp = metaPages;
    int page = row >>> pageShift;
    if (page >= mp.length) {
      return false;
    }
    long ref = mp[page][(row & pageMask) * META + M_KEYREF];
    int len = (int) (ref & 0xFFFF);
    if (ref <= 0 || len != keys.length(i)) {
      return false;
    }
    long off = ref >>> 16;
    byte[][] kp = keyPages;
    int kpage = (int) (off / KEY_PAGE_BYTES);
    int p = (int) (off % KEY_PAGE_BYTES);
    if (kpage >= kp.length || p + len > KEY_PAGE_BYTES) {
      return false;
    }
    return keys.keyEquals(i, kp[kpage], p, len);
  }

  // ---------------------------------------------------------------- allocation

  /** Reserves a row id and stores the key bytes; the key reference is published later. */
  private int allocate(byte[] key, int off, int len) {
    synchronized (allocLock) {
      int row = numRows;
      if (row == Integer.MAX_VALUE) {
        throw TableException.exhausted("table '%s' holds the maximum of %d keys", name(), row);
      }
      int page = row >>> pageShift;
      if (page >= rowPages.length) {
        float[][] rp = Arrays.copyOf(rowPages, page + 1);
        rp[page] = new float[(pageMask + 1) * rowFloats];
        long[][] mp = Arrays.copyOf(metaPages, page + 1);
        mp[page] = new long[(pageMask + 1) * META];
        rowPages = rp;
        metaPages = mp;
      }
      if (keyPageUsed + len > KEY_PAGE_BYTES) {
        byte[][] kp = Arrays.copyOf(keyPages, keyPages.length + 1);
        kp[kp.length - 1] = new byte[KEY_PAGE_BYTES];
        keyPages = kp;
        keyPageUsed = 0;
      }
      long keyOff = (long) (keyPages.length - 1) * KEY_PAGE_BYTES + keyPageUsed;
      System.arraycopy(key, off, keyPages[keyPages.length - 1], keyPageUsed, len);
      keyPageUsed += len;
      keyBytes += len;
      // the sign bit marks "not yet published"; publish() clears it with release semantics
      metaPages[page][(row & pageMask) * META + M_KEYREF] = ((keyOff << 16) | len) | Long.MIN_VALUE;
      numRows = row + 1;
      return row;
    }
  }

  private void publish(int row) {
    long[] meta = metaPages[row >>> pageShift];
    int at = (row & pageMask) * META + M_KEYREF;
    LONGS.setRelease(meta, at, meta[at] & Long.MAX_VALUE);
  }

  /** Whether a row is fully written (scans skip rows still being inserted). */
  boolean isReady(int row) {
    return (long) LONGS.getAcquire(metaPages[row >>> pageShift], (row & pageMask) * META + M_KEYREF)
        > 0L;
  }

  // ---------------------------------------------------------------- frozen copies

  /**
   * A consistent copy of the store for writing a checkpoint without holding its lock: rows,
   * slots and metadata copied page by page, key pages shared (key bytes are never rewritten),
   * pending admission counts copied. Taken by {@link #freeze} under {@link #quiesce} held
   * exclusively: the lock is held for a memory copy (~0.3 s a GB), not for the disk write.
   */
  public static final class Frozen {
    final TableStore table; // config and layout only: never read for rows
    final int rows;
    private final float[][] rowPages;
    private final long[][] metaPages;
    private final byte[][] keyPages;
    private final java.util.Map<Long, Long> pending;
    private final int[] sketchCounters; // null without a sketch
    /** The disk tier's rows at the cut (closed by the checkpoint writer), or null. */
    final ColdTier.Table.View cold;

    private Frozen(TableStore t, boolean withCold) {
      this.table = t;
      this.rows = t.numRows;
      int pages = rows == 0 ? 0 : ((rows - 1) >>> t.pageShift) + 1;
      this.rowPages = new float[pages][];
      this.metaPages = new long[pages][];
      for (int p = 0; p < pages; p++) {
        rowPages[p] = t.rowPages[p].clone();
        metaPages[p] = t.metaPages[p].clone();
      }
      this.keyPages = t.keyPages;
      this.pending = withCold ? new java.util.HashMap<>(t.pending) : java.util.Map.of();
      this.sketchCounters = t.sketch == null ? null : t.sketch.counters();
      this.cold = withCold && t.cold != null ? t.cold.view() : null;
    }

    /** The admission sketch's counters (null without one); its width is the table's. */
    int[] sketchCounters() {
      return sketchCounters;
    }

    int size() {
      return rows;
    }

    boolean isReady(int row) {
      return metaPages[row >>> table.pageShift][(row & table.pageMask) * META + M_KEYREF] > 0L;
    }

    float[] rowPage(int row) {
      return rowPages[row >>> table.pageShift];
    }

    int rowBase(int row) {
      return (row & table.pageMask) * table.rowFloats;
    }

    long meta(int row, int field) {
      return metaPages[row >>> table.pageShift][(row & table.pageMask) * META + field];
    }

    void appendKey(int row, PackedKeys.Builder b) {
      long ref = meta(row, M_KEYREF);
      long off = ref >>> 16;
      b.add(keyPages[(int) (off / KEY_PAGE_BYTES)], (int) (off % KEY_PAGE_BYTES),
          (int) (ref & 0xFFFF));
    }

    public java.util.Map<Long, Long> pendingCounts() {
      return pending;
    }
  }

  /**
   * A frozen copy of this store; the caller holds {@link #quiesce} exclusively (or is the only
   * user of the store), so that the copy is a cut no mutation straddles.
   */
  public Frozen freeze() {
    return new Frozen(this, true);
  }

  /**
   * A frozen copy of the rows in memory only, without the admission counts (an eviction's
   * rebuild, which adopts them: {@link #adoptPending}).
   */
  Frozen freezeHot() {
    return new Frozen(this, false);
  }

  // ---------------------------------------------------------------- row access for scans

  float[] rowPage(int row) {
    return rowPages[row >>> pageShift];
  }

  int rowBase(int row) {
    return (row & pageMask) * rowFloats;
  }

  long meta(int row, int field) {
    return metaPages[row >>> pageShift][(row & pageMask) * META + field];
  }

  void copyRow(int row, float[] out, int outOff) {
    System.arraycopy(rowPages[row >>> pageShift], (row & pageMask) * rowFloats, out, outOff, dim);
  }

  /** Writes a row's weights as row {@code i} of {@code out}. */
  void copyRow(int row, RowSink out, int i) {
    out.row(i, rowPages[row >>> pageShift], (row & pageMask) * rowFloats, dim);
  }

  /** Floats of optimizer slots beside each row's weights (slots x dim). */
  public int slotFloats() {
    return rowFloats - dim;
  }

  /**
   * Writes a row's optimizer slots as row {@code i} of {@code out} (rows of {@link
   * #slotFloats()}). Read without the row's stripe lock, as weights are: a slot row may mix the
   * values before and after a concurrent update.
   */
  void copySlots(int row, RowSink out, int i) {
    if (rowFloats > dim) {
      out.row(i, rowPages[row >>> pageShift], (row & pageMask) * rowFloats + dim, rowFloats - dim);
    }
  }

  /** Appends the key of a row to a builder. */
  void appendKey(int row, PackedKeys.Builder b) {
    long ref = meta(row, M_KEYREF);
    long off = ref >>> 16;
    b.add(keyPages[(int) (off / KEY_PAGE_BYTES)], (int) (off % KEY_PAGE_BYTES), (int) (ref & 0xFFFF));
  }

  String key(int row) {
    PackedKeys.Builder b = new PackedKeys.Builder(1);
    appendKey(row, b);
    return b.build().key(0);
  }

  /**
   * A key's stored record (weights, optimizer slots, metadata), for inspection and tests. Equality
   * is by value, bit for bit.
   */
  public record Record(float[] weights, float[][] slots, long frequency, long lastStep,
      long updates) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Record r && Arrays.equals(weights, r.weights)
          && Arrays.deepEquals(slots, r.slots) && frequency == r.frequency
          && lastStep == r.lastStep && updates == r.updates;
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(weights) * 31 + Arrays.deepHashCode(slots);
    }

    @Override
    public String toString() {
      return "Record[weights=" + Arrays.toString(weights) + ", slots="
          + Arrays.deepToString(slots) + ", frequency=" + frequency + ", lastStep=" + lastStep
          + ", updates=" + updates + "]";
    }
  }

  /** The record of one key (weights, optimizer slots, metadata), or null. Counts nothing. */
  public Record record(String key) {
    PackedKeys k = PackedKeys.of(key);
    int row = lookup(k, 0);
    if (row < 0) {
      return null;
    }
    float[] page = rowPage(row);
    int base = rowBase(row);
    float[] w = Arrays.copyOfRange(page, base, base + dim);
    float[][] slots = new float[optimizer.slots()][];
    for (int s = 0; s < slots.length; s++) {
      slots[s] = Arrays.copyOfRange(page, base + (s + 1) * dim, base + (s + 2) * dim);
    }
    return new Record(w, slots, meta(row, M_FREQ), meta(row, M_STEP), meta(row, M_UPDATES));
  }

  /** Every key with a row, in row order. */
  public java.util.List<String> keys() {
    int n = numRows;
    java.util.List<String> out = new java.util.ArrayList<>(n);
    for (int r = 0; r < n; r++) {
      if (isReady(r)) {
        out.add(key(r));
      }
    }
    return out;
  }

  /**
   * Inserts a key's stored record: {@code record} holds the row then the optimizer slots ({@link
   * #slotFloats()} floats). For tables built outside the engine (a backend's checkpoint or
   * snapshot) before any other thread sees the table.
   *
   * @return false if the key was already present
   */
  public boolean putRecord(String key, float[] record, long freq, long step, long updates) {
    if (record.length != dim + slotFloats()) {
      throw new IllegalArgumentException("table '" + name() + "': a record has " + (dim
          + slotFloats()) + " floats, not " + record.length);
    }
    return restoreRecord(PackedKeys.of(key), 0, record, 0, freq, step, updates);
  }

  /**
   * Candidate draws over this store's keys (see {@link ShardEngine#sample(TableStore, PackedKeys,
   * int, SamplerKind, float, long, boolean, boolean)}).
   */
  public SampleCandidates sample(PackedKeys positives, int numSampled,
      dev.dynembed.table.v1.SamplerKind kind, float alpha, long seed, boolean distinct,
      boolean noneIfEmpty) {
    return samplers.sample(positives, numSampled, kind, alpha, seed, distinct, noneIfEmpty);
  }

  Samplers samplers() {
    return samplers;
  }

  long totalFrequency() {
    return totalFrequency.sum();
  }

  // ---------------------------------------------------------------- restore

  /**
   * Inserts a restored record. Called only on a table that no other thread sees yet.
   *
   * @return false if the key was already present (a corrupt checkpoint)
   */
  boolean restoreRecord(
      PackedKeys keys, int i, float[] record, int recOff, long freq, long step, long upd) {
    long m = KeyHashing.mix(keys.hash(i));
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    if (probe(s.slots, tagOf(m), keys, i) >= 0) {
      return false;
    }
    place(s, m, keys, i, record, recOff, freq, step, upd);
    lastStep.accumulateAndGet(step, Math::max);
    return true;
  }

  /**
   * Inserts key i, absent from segment {@code s}, with a whole record (row and slots) and its
   * metadata: a restored or promoted row. The caller holds the segment's write lock or is the
   * store's only user.
   *
   * @return the row
   */
  private int place(Segment s, long m, PackedKeys keys, int i, float[] record, int recOff,
      long freq, long step, long upd) {
    reserveSlot(s);
    int row = allocate(keys.bytes(), keys.offset(i), keys.length(i));
    System.arraycopy(record, recOff, rowPages[row >>> pageShift], rowBase(row), rowFloats);
    long[] meta = metaPages[row >>> pageShift];
    int mo = (row & pageMask) * META;
    meta[mo + M_FREQ] = freq;
    meta[mo + M_STEP] = step;
    meta[mo + M_UPDATES] = upd;
    publish(row);
    insert(s, tagOf(m), row);
    totalFrequency.add(freq);
    return row;
  }

  // ---------------------------------------------------------------- stats

  /**
   * Heap bytes held by the store: pages, key arena, index arrays, and the counts of keys awaiting
   * admission (the exact map's entries, estimated, or the sketch's counters).
   */
  public long bytesUsed() {
    long b = (long) PENDING_BYTES * pending.size() + (sketch == null ? 0 : sketch.bytes());
    for (float[] p : rowPages) {
      b += 16 + 4L * p.length;
    }
    for (long[] p : metaPages) {
      b += 16 + 8L * p.length;
    }
    for (byte[] p : keyPages) {
      b += 16 + p.length;
    }
    for (Segment s : segments) {
      long stamp = s.lock.readLock();
      try {
        b += 32 + 16 + 8L * s.slots.length;
      } finally {
        s.lock.unlockRead(stamp);
      }
    }
    return b;
  }

  /** Bytes of an admission count waiting in {@link #pending} (boxed map entry). */
  static final int PENDING_BYTES = 96;
  /** Index bytes per key (a {@code long} slot at load <= 3/4, with doubling slack). */
  private static final int INDEX_BYTES = 21;

  /**
   * What the store holds, estimated in O(1) for admission control: rows, slots, metadata, key
   * bytes, index and pending counts (within a page of {@link #bytesUsed}).
   */
  public long bytesEstimate() {
    long n = numRows;
    return n * (4L * rowFloats + 8L * META + INDEX_BYTES) + keyBytes
        + (long) PENDING_BYTES * pending.size() + (sketch == null ? 0 : sketch.bytes());
  }

  /** The most {@code keys} new keys of {@code keyBytes} bytes in all can add. */
  public long bytesForNewKeys(long keys, long keyBytes) {
    long perKey = minCount <= 1 ? 4L * rowFloats + 8L * META + INDEX_BYTES : PENDING_BYTES
        + 4L * rowFloats + 8L * META + INDEX_BYTES;
    return keys * perKey + keyBytes;
  }

  /** Live bytes, without the unused tail of the last pages: the figure that scales with keys. */
  public long bytesPerKeyLive() {
    int n = numRows;
    if (n == 0) {
      return 0;
    }
    long index = 0;
    for (Segment s : segments) {
      long stamp = s.lock.readLock();
      try {
        index += 8L * s.slots.length;
      } finally {
        s.lock.unlockRead(stamp);
      }
    }
    return (4L * rowFloats * n + 8L * META * n + keyBytes + index) / n;
  }

  public TableCounters counters() {
    // shared: an eviction that is moving rows to the disk tier finishes first, so that its rows
    // are counted in one tier or the other
    quiesce.readLock().lock();
    try {
      return countersLocked();
    } finally {
      quiesce.readLock().unlock();
    }
  }

  /**
   * The counters, or null if this store was replaced (an eviction's rebuild, a restore) before
   * they could be read: its rows are then partly in the store that replaced it.
   */
  TableCounters countersIfLive() {
    quiesce.readLock().lock();
    try {
      return retired ? null : countersLocked();
    } finally {
      quiesce.readLock().unlock();
    }
  }

  private TableCounters countersLocked() {
    int n = numRows;
    ColdTier.Table c = cold;
    long coldKeys = c == null ? 0 : c.size();
    return TableCounters.newBuilder()
        .setKeys(n + coldKeys)
        .setColdKeys(coldKeys)
        .setPromotions(c == null ? 0 : c.promotions())
        .setDemotions(c == null ? 0 : c.demotions())
        .setBytesUsed(bytesUsed())
        .setBytesRaw(4L * rowFloats * n)
        .setTotalFrequency(totalFrequency.sum() + (c == null ? 0 : c.frequency()))
        .setUpdates(updates.sum())
        .setLastStep(lastStep.get())
        .setPendingKeys(pending.size())
        .build();
  }
}
