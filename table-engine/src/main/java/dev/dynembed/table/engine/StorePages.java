package dev.dynembed.table.engine;

import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * The memory of a {@link TableStore}: row pages, metadata pages and the key arena, row allocation and publication, and the row accessors that
 * the readers elsewhere ({@link CheckpointIo}, {@link Samplers}, {@link TopK}) use. The bottom
 * layer of the store; {@link StoreIndex} adds the key index, {@link TableStore} the operations.
 * Layers of one object, not objects: a lookup reads these fields as its own (no indirection on
 * the hot path), and the publication protocol (a row's key, row and slots written before its id
 * enters the index) is the same one as before the split.
 *
 * <ul>
 *   <li><b>Rows</b>: each key has a dense row id. Its record {@code [w | slots]} ({@link
 *       #rowFloats} floats) lives in a float page: {@code rowPages[id >>> pageShift]} at {@code
 *       (id & pageMask) * rowFloats}. Pages are fixed-size, so growth wastes at most one page
 *       (never the 2x of a doubling array).
 *   <li><b>Metadata</b>: {@link #META} longs per row in long pages: key reference (arena offset
 *       &lt;&lt; 16 | length), frequency, last-update step, update count.
 *   <li><b>Keys</b>: UTF-8 bytes appended to 1 MiB byte pages (a key never spans pages).
 * </ul>
 */
abstract class StorePages {
  static final int META = 4;
  static final int M_KEYREF = 0;
  static final int M_FREQ = 1;
  static final int M_STEP = 2;
  static final int M_UPDATES = 3;
  static final int KEY_PAGE_BYTES = 1 << 20;
  static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);

  final TableConfig config;
  final int shardIndex;
  final int numShards;
  /**
   * The engine's slot map (set when the engine takes the store in); null: the implicit map of
   * {@code numShards} (a store outside an engine, a test).
   */
  volatile SlotOwnership ownership;
  public final int dim;
  final int rowFloats;
  public final int maxKeyBytes;
  final RowOptimizer optimizer;

  final int pageShift;
  final int pageMask;
  volatile float[][] rowPages = new float[0][];
  volatile long[][] metaPages = new long[0][];
  volatile byte[][] keyPages = new byte[0][];
  int keyPageUsed = KEY_PAGE_BYTES; // forces a first page
  long keyBytes;
  volatile int numRows;
  final Object allocLock = new Object();


  StorePages(TableConfig config, int shardIndex, int numShards) {
    this.config = config;
    this.shardIndex = shardIndex;
    this.numShards = numShards;
    this.dim = config.getDim();
    this.maxKeyBytes = config.getMaxKeyBytes();
    this.optimizer = RowOptimizer.create(config.getOptimizer(), dim);
    this.rowFloats = dim * (1 + optimizer.slots());
    // about 64K floats (256 KiB) per page, at least 16 rows
    int rowsPerPage = Integer.highestOneBit(Math.max(16, (1 << 16) / rowFloats));
    this.pageShift = Integer.numberOfTrailingZeros(rowsPerPage);
    this.pageMask = rowsPerPage - 1;
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

  /** Whether row's key equals key i; false for anything not (yet) visible to this thread. */
  boolean keyEquals(int row, PackedKeys keys, int i) {
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
  int allocate(byte[] key, int off, int len) {
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

  void publish(int row) {
    long[] meta = metaPages[row >>> pageShift];
    int at = (row & pageMask) * META + M_KEYREF;
    LONGS.setRelease(meta, at, meta[at] & Long.MAX_VALUE);
  }

  /** Whether a row is fully written (scans skip rows still being inserted). */
  boolean isReady(int row) {
    return (long) LONGS.getAcquire(metaPages[row >>> pageShift], (row & pageMask) * META + M_KEYREF)
        > 0L;
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
    return keyAt(row).key(0);
  }

  /** Row {@code row}'s key as a batch of one (its hash computed when asked). */
  PackedKeys keyAt(int row) {
    PackedKeys.Builder b = new PackedKeys.Builder(1);
    appendKey(row, b);
    return b.build();
  }

  // ---------------------------------------------------------------- batches

  /** A gradient batch that passed {@link #checkGradients}: it can be applied without failing. */
  public static final class CheckedGradients {
    final TableStore table;
    final PackedKeys keys;
    final BatchDedup dedup;
    final float[] summed; // one row per distinct key
    final float lr;
    /** An assign (import): {@code summed} holds the keys' new rows, not gradients. */
    final boolean assign;
    /** With assign: each key's new frequency, or null to leave counts. */
    final long[] frequencies;
    /** A pair report: {@code keys} are the anchors, these their partners (else null). */
    PackedKeys partners;
    /** With partners: each pair's count. */
    int[] pairCounts;

    private CheckedGradients(TableStore table, PackedKeys keys, BatchDedup dedup, float[] summed,
        float lr) {
      this(table, keys, dedup, summed, lr, false, null);
    }

    private CheckedGradients(TableStore table, PackedKeys keys, BatchDedup dedup, float[] summed,
        float lr, boolean assign, long[] frequencies) {
      this.table = table;
      this.keys = keys;
      this.dedup = dedup;
      this.summed = summed;
      this.lr = lr;
      this.assign = assign;
      this.frequencies = frequencies;
    }
  }

  /**
   * Checks rows to assign whole ({@link GradientChecks#checkAssign}: width, range, distinct
   * keys, one frequency per key), changing nothing; applied by {@link TableStore#apply} like a
   * gradient batch, so that an assign is logged, replicated and de-duplicated as writes are.
   *
   * @param frequencies each key's new frequency, or null to leave counts
   */
  public CheckedGradients checkAssign(PackedKeys keys, float[] values, long[] frequencies) {
    checkKeys(keys, "keys");
    BatchDedup dedup = GradientChecks.checkAssign(name(), keys, dim, maxKeyBytes, values,
        frequencies);
    return new CheckedGradients((TableStore) this, keys, dedup, values, 0f, true, frequencies);
  }

  /**
   * Checks a report of co-occurring pairs whole (the table keeps co-occurrence counts, anchors
   * owned here, partners one per anchor and of valid length, counts &gt;= 1), changing nothing;
   * applied by {@link TableStore#apply} like a gradient batch, so that it is logged, replicated
   * and de-duplicated as writes are.
   *
   * @param counts each pair's count, or null for 1 each
   */
  public CheckedGradients checkPairs(PackedKeys anchors, PackedKeys partners, int[] counts) {
    if (!config.hasCooccurrence()) {
      throw TableException.invalid("table '%s' keeps no co-occurrence counts (create it with"
          + " cooccurrence, table-cli create --cooccurrence): pairs refused", name());
    }
    checkKeys(anchors, "anchors");
    int n = anchors.size();
    if (partners.size() != n) {
      throw TableException.invalid("table '%s': %d anchors but %d partners (one per anchor)",
          name(), n, partners.size());
    }
    if (counts != null && counts.length != n) {
      throw TableException.invalid("table '%s': %d anchors but %d pair counts (one per anchor, or"
          + " none for 1 each)", name(), n, counts.length);
    }
    for (int i = 0; i < n; i++) {
      int len = partners.length(i);
      if (len == 0 || len > maxKeyBytes) {
        throw TableException.invalid("table '%s': partner %d is %d bytes long (1 to the table's"
            + " max_key_bytes %d)", name(), i, len, maxKeyBytes);
      }
      if (counts != null && counts[i] < 1) {
        throw TableException.invalid("table '%s': pair %d has count %d (each must be >= 1)",
            name(), i, Integer.toUnsignedLong(counts[i]));
      }
    }
    CheckedGradients c = new CheckedGradients((TableStore) this, anchors, null, new float[0], 0f);
    c.partners = partners;
    c.pairCounts = counts;
    return c;
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
    if (!(lr <= Limits.MAX_LEARNING_RATE)) { // a table's own rate from an older config
      throw TableException.invalid("table '%s': learning rate %s is above the limit of %s;"
          + " nothing was applied", name(), lr, Limits.MAX_LEARNING_RATE);
    }
    GradientChecks.checkSummed(name(), g, dim, lr,
        u -> keys.key(dedup.firstPosition(u)), !dedup.allDistinct());
    return new CheckedGradients((TableStore) this, keys, dedup, g, lr);
  }

  void checkKeys(PackedKeys keys, String what) {
    int n = keys.size();
    if (n == 0) {
      throw TableException.invalid("table '%s': the batch of %s is empty", name(), what);
    }
    if (n > Limits.MAX_BATCH_KEYS || (long) n * dim > Limits.MAX_BATCH_FLOATS) {
      throw TableException.exhausted(
          "table '%s': a batch of %d keys at dim %d exceeds the limits (%d keys, %d floats)",
          name(), n, dim, Limits.MAX_BATCH_KEYS, Limits.MAX_BATCH_FLOATS);
    }
    // one map for the whole batch, read once: the check runs per key on the hot path
    SlotOwnership o = ownership;
    dev.dynembed.table.common.SlotMap m = o != null ? o.map() : null;
    boolean sharded = m != null ? o.enforced && m.numShards() > 1 : numShards > 1;
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
      if (sharded) {
        int owner = m != null ? m.ownerOf(keys.hash(i))
            : KeyHashing.shardOf(keys.hash(i), numShards);
        if (owner != shardIndex) {
          throw TableException.invalid(
              "table '%s': key '%s' belongs to shard %d of %d, not to this shard %d"
                  + " (client and server disagree on the shard count or slot map%s)",
              name(), keys.key(i), owner, m != null ? m.numShards() : numShards, shardIndex,
              m != null ? ", epoch " + m.epoch() : "");
        }
      }
    }
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
    final ColdRows.View cold;

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
      this.pairs = withCold && t.pairs() != null ? t.pairs().copy() : null;
    }

    /** The co-occurrence counts at the cut (null without them). */
    final PairCounts pairs;

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
    return new Frozen((TableStore) this, true);
  }

  /**
   * A frozen copy of the rows in memory only, without the admission counts (an eviction's
   * rebuild, which adopts them: {@link #adoptPending}).
   */
  Frozen freezeHot() {
    return new Frozen((TableStore) this, false);
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
}
