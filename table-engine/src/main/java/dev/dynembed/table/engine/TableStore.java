package dev.dynembed.table.engine;

import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One table on one shard: string keys to float rows, with optimizer slots and per-key metadata.
 *
 * <h2>Layout (no per-key objects)</h2>
 *
 * Rows, metadata and keys in fixed-size pages ({@link StorePages}), a key index of 64
 * linear-probing segments ({@link StoreIndex}).
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
 * <h2>Three layers of one object</h2>
 *
 * {@link StorePages} (row, metadata and key pages, allocation, row accessors, batch checks,
 * frozen copies), {@link StoreIndex} (the key index, the lock-free lookup, memory accounting) and
 * this class (the operations: find, find-or-insert, admission, gradients, the disk tier,
 * counters). Layers of a class hierarchy rather than separate objects: a lookup reads the index
 * and the pages as fields of one object (no indirection per access on the hot path, JMH {@code
 * StoreBench}), and the publication protocol (a row id enters the index only after its key, row
 * and slots are written) stays in the two layers that own it. The readers that live elsewhere
 * ({@link CheckpointIo}, {@link Samplers}, {@link TopK}) use the package-private accessors of
 * {@link StorePages} and no field directly.
 */
public final class TableStore extends StoreIndex {

  private static final int STRIPES = 1024;

  private final RowInitializer initializer;


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
  /** admission_pressure: the count a key needs rises with the memory held (design 0027). */
  private final boolean pressured;
  /** This shard's share of max_bytes (0 = none): the table's part of the pressure. */
  private final long share;
  /**
   * Admission counts of keys without a row (min_count &gt; 1), by 64-bit key hash: no key bytes
   * and no row until admitted. Two keys whose hashes collide share a count (odds ~n^2/2^65).
   */
  java.util.concurrent.ConcurrentHashMap<Long, Long> pending =
      new java.util.concurrent.ConcurrentHashMap<>();
  /** With admission_sketch_kib: the counts of keys awaiting admission, instead of {@link #pending}. */
  final AdmissionSketch sketch;
  /** With cooccurrence: the pairs reported for this shard's anchors (design 0026), else null. */
  private PairCounts pairs;
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
  volatile ColdRows cold;

  /**
   * @param config a config already passed through {@link TableConfigs#normalize}
   */
  public TableStore(TableConfig config, int shardIndex, int numShards) {
    super(config, shardIndex, numShards);
    this.minCount = config.getMinCount();
    this.pressured = config.hasAdmissionPressure();
    this.share = config.getMaxBytes() > 0
        ? (config.getMaxBytes() + numShards - 1) / numShards : 0;
    this.sketch = config.getAdmissionSketchKib() > 0
        ? new AdmissionSketch(config.getAdmissionSketchKib()) : null;
    this.initializer = new RowInitializer(config.getInitializer());
    for (int i = 0; i < STRIPES; i++) {
      stripes[i] = new Object();
    }
    this.samplers = new Samplers(this);
    if (config.hasCooccurrence()) {
      var c = config.getCooccurrence();
      this.pairs = new PairCounts(c.getPartnersPerKey(), c.getMaxAnchors(), c.getSketchKib());
    }
  }

  /** The co-occurrence counts (cooccurrence), or null. */
  public PairCounts pairs() {
    return pairs;
  }

  /** Partner draws of a batch of anchors: anchor i's are keys [sum(counts[&lt;i]), + counts[i]). */
  public record PartnerDraws(PackedKeys keys, float[] probability, int[] counts) {}

  /**
   * {@code n} partners of each anchor drawn with replacement from its co-occurrence summary
   * ({@link PairCounts#sample}); none for an anchor without a partner of positive weight. The
   * k-th occurrence of an anchor in the batch draws with its own stream of {@code seed}, so the
   * draws do not depend on where in the batch (or on which client split) an anchor stands.
   */
  public PartnerDraws drawPartners(PackedKeys anchors, int n, PairCounts.Weight weight,
      long seed) {
    if (pairs == null) {
      throw TableException.invalid("table '%s' keeps no co-occurrence counts (create it with"
          + " cooccurrence, table-cli create --cooccurrence): no partners to draw", name());
    }
    checkKeys(anchors, "anchors");
    if (n < 1 || n > 4096) {
      throw TableException.invalid("table '%s': num_draws must be in [1, 4096] but was %d",
          name(), Integer.toUnsignedLong(n));
    }
    if ((long) n * anchors.size() > Limits.MAX_NUM_SAMPLED) {
      throw TableException.exhausted("table '%s': %d anchors x %d draws exceed the limit of %d"
          + " draws per call", name(), anchors.size(), n, Limits.MAX_NUM_SAMPLED);
    }
    PackedKeys.Builder keys = new PackedKeys.Builder(anchors.size() * n);
    float[] prob = new float[anchors.size() * n];
    int[] counts = new int[anchors.size()];
    java.util.HashMap<Long, Integer> seen = new java.util.HashMap<>();
    int at = 0;
    for (int i = 0; i < anchors.size(); i++) {
      long h = anchors.hash(i);
      int k = seen.merge(h, 1, Integer::sum) - 1;
      long s = seed ^ (h * 0x9E3779B97F4A7C15L) ^ ((long) k * 0xC2B2AE3D27D4EB4FL);
      PairCounts.Draws d = pairs.sample(h, n, weight, s);
      counts[i] = d.keys().length;
      for (int j = 0; j < d.keys().length; j++) {
        byte[] b = d.keys()[j].getBytes(java.nio.charset.StandardCharsets.UTF_8);
        keys.add(b, 0, b.length);
        prob[at++] = (float) d.probability()[j];
      }
    }
    return new PartnerDraws(keys.build(), java.util.Arrays.copyOf(prob, at), counts);
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
    ColdRows c = prefetchCold(keys);
    try {
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
    } finally {
      if (c != null) {
        c.endPrefetch();
      }
    }
  }

  /** Reads ahead the batch's cold records ({@link ColdRows#prefetch}); returns the tier or null. */
  private ColdRows prefetchCold(PackedKeys keys) {
    ColdRows c = cold;
    if (c != null) {
      c.prefetch(keys);
    }
    return c;
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
    AdmissionContext ctx = pressured ? AdmissionContext.current() : null;
    byte[] logged = ctx == null ? null : ctx.logged;
    byte[] had = ctx != null && logged == null ? new byte[(n + 7) >>> 3] : null;
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    ColdRows ahead = null;
    try {
      ahead = prefetchCold(keys);
      int need = pressured && logged == null ? admissionCount(ctx) : 0;
      long added = 0;
      for (int i = 0; i < n; i++) {
        if ((i & (WARM_CHUNK - 1)) == 0) {
          warm(keys, i, Math.min(n, i + WARM_CHUNK));
        }
        long occ = occurrences == null ? 1L : (long) occurrences[i];
        int row;
        if (pressured) {
          row = lookup(keys, i);
          if (row >= 0 && count) {
            LONGS.getAndAdd(metaPages[row >>> pageShift], (row & pageMask) * META + M_FREQ, occ);
            added += occ;
          } else if (row < 0) {
            row = admitUnderPressure(keys, i, occ, count, need, logged, ctx);
          }
          if (row >= 0 && had != null) {
            had[i >>> 3] |= (byte) (1 << (i & 7));
          }
        } else if (minCount <= 1) {
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
      if (had != null) {
        ctx.admitted = had;
      }
      SlotMoves.Tracker mt = moveTracker;
      if (mt != null) {
        mt.touched(keys); // after the change: an export that drains the key reads it
      }
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
      if (ahead != null) {
        ahead.endPrefetch();
      }
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

  /**
   * Counts key i (without a row when looked up) in the admission sketch and creates its row when
   * admitted: by the logged decision in a replay, else when its count reaches {@code need} and
   * the shard's budget has room for it. A call that does not count still creates a key while no
   * pressure raises the count above 1. Under the sketch's lock, as {@link #countForAdmission}.
   *
   * @return the row, or -1 while the key is not admitted
   */
  private int admitUnderPressure(PackedKeys keys, int i, long occ, boolean count, int need,
      byte[] logged, AdmissionContext ctx) {
    synchronized (sketch) {
      int row = lookup(keys, i); // admitted by a racing caller meanwhile?
      if (row >= 0) {
        if (count) {
          creditFrequency(row, occ);
        }
        return row;
      }
      long total = count ? sketch.add(keys.hash(i), occ) : sketch.estimate(keys.hash(i));
      boolean admit;
      if (logged != null) {
        admit = (logged[i >>> 3] & (1 << (i & 7))) != 0;
      } else {
        admit = total >= need || (!count && need <= 1);
        if (admit && ctx != null) {
          long bytes = bytesForNewKeys(1, keys.length(i));
          admit = bytes <= ctx.room;
          if (admit) {
            ctx.room -= bytes;
          }
        }
      }
      if (!admit) {
        return -1;
      }
      row = lookupOrInsert(keys, i);
      if (total > 0) {
        creditFrequency(row, total);
      }
      return row;
    }
  }

  /**
   * The count a key needs for a row now ({@code TableConfig.admission_pressure}): from the shard's
   * memory in {@code ctx} (null: none known) and this table's bytes over its max_bytes share;
   * {@link Integer#MAX_VALUE} while the shard's budget is full.
   */
  int admissionCount(AdmissionContext ctx) {
    return admissionCount(ctx == null ? 0 : ctx.shardPressure());
  }

  /**
   * The count a key needs for a row now, given the shard's bytes in use over its budget ({@code
   * shardPressure}, 0 without a budget): {@link Integer#MAX_VALUE} while that is full and the
   * table's admission tightens under pressure.
   */
  public int admissionCount(double shardPressure) {
    if (pressured && shardPressure >= 1) {
      return Integer.MAX_VALUE;
    }
    return dev.dynembed.table.common.TableConfigs.admissionCount(config(),
        pressure(shardPressure));
  }

  /** The pressure admission_pressure reads: the larger of the shard's and the table's. */
  public double pressure(double shardPressure) {
    return Math.max(shardPressure, tablePressure());
  }

  /** This table's bytes over its share of max_bytes, at most 1 (0 without max_bytes). */
  double tablePressure() {
    return share > 0 ? Math.min(1, (double) bytesEstimate() / share) : 0;
  }

  /** Whether the count a key needs rises with memory pressure (admission_pressure). */
  public boolean pressured() {
    return pressured;
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
   * admission, min_count &gt; 1 or admission_pressure, keys without a row are skipped: their
   * gradients are dropped).
   *
   * @param gradients FLOAT [n, dim], row i for key i
   * @param learningRate &gt; 0 overrides the configured rate; 0 uses it
   * @return number of distinct keys updated
   */
  public int applyGradients(PackedKeys keys, float[] gradients, float learningRate, long step) {
    return apply(checkGradients(keys, gradients, learningRate), step);
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
    if (c.assign) {
      return assign(c, step);
    }
    if (c.partners != null) {
      return countPairs(c);
    }
    BatchDedup dedup = c.dedup;
    PackedKeys keys = c.keys;
    float[] g = c.summed;
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    ColdRows cr = null;
    boolean unitStep = c.lr <= 1f && optimizer.unitStep();
    try {
      cr = prefetchCold(keys);
      int applied = 0;
      for (int u = 0; u < dedup.uniqueCount(); u++) {
        int row = minCount <= 1 && !pressured ? lookupOrInsert(keys, dedup.firstPosition(u))
            : lookup(keys, dedup.firstPosition(u));
        if (row < 0) {
          continue; // not admitted: its gradient is dropped
        }
        if (update(row, g, u * dim, c.lr, step, unitStep)) {
          applied++;
        }
      }
      updates.add(applied);
      lastStep.accumulateAndGet(step, Math::max);
      SlotMoves.Tracker mt = moveTracker;
      if (mt != null) {
        mt.touched(keys);
      }
      return applied;
    } finally {
      if (cr != null) {
        cr.endPrefetch();
      }
      q.unlock();
    }
  }



  /**
   * Counts a checked pair report into the co-occurrence counts. The caller applies reports in
   * the order it logs them ({@link ShardCommands}: Space-Saving depends on the order).
   *
   * @return the pairs counted (not dropped for an anchor past max_anchors)
   */
  private int countPairs(CheckedGradients c) {
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    try {
      PackedKeys a = c.keys;
      PackedKeys p = c.partners;
      int counted = 0;
      for (int i = 0; i < a.size(); i++) {
        if (pairs.add(a.hash(i), p.hash(i), p.keyBytes(i),
            c.pairCounts == null ? 1 : c.pairCounts[i])) {
          counted++;
        }
      }
      return counted;
    } finally {
      q.unlock();
    }
  }

  /**
   * Sets the checked rows (an import): each key created if missing, whatever the admission
   * count (a pending count of it is dropped: the key has a row now), its row set, its optimizer
   * slots set as a new row's, its update count reset and its step set; its frequency set when
   * frequencies were given. Setting the same rows twice leaves what setting them once does.
   *
   * @return the number of keys assigned
   */
  private int assign(CheckedGradients c, long step) {
    PackedKeys keys = c.keys;
    ReentrantReadWriteLock.ReadLock q = quiesce.readLock();
    q.lock();
    ColdRows cr = null;
    try {
      cr = prefetchCold(keys);
      for (int i = 0; i < keys.size(); i++) { // distinct keys (checked)
        int row = lookupOrInsert(keys, i);
        if (minCount > 1 && sketch == null) {
          pending.remove(keys.hash(i));
        }
        float[] page = rowPages[row >>> pageShift];
        long[] meta = metaPages[row >>> pageShift];
        int base = (row & pageMask) * rowFloats;
        int m = (row & pageMask) * META;
        synchronized (stripes[row & (STRIPES - 1)]) {
          System.arraycopy(c.summed, i * dim, page, base, dim);
          java.util.Arrays.fill(page, base + dim, base + rowFloats, 0f); // as a new row's
          optimizer.initSlots(page, base + dim);
          meta[m + M_UPDATES] = 0;
          meta[m + M_STEP] = step;
          if (c.frequencies != null) {
            long old = meta[m + M_FREQ];
            meta[m + M_FREQ] = c.frequencies[i];
            totalFrequency.add(c.frequencies[i] - old);
          }
        }
      }
      updates.add(keys.size());
      lastStep.accumulateAndGet(step, Math::max);
      SlotMoves.Tracker mt = moveTracker;
      if (mt != null) {
        mt.touched(keys);
      }
      return keys.size();
    } finally {
      if (cr != null) {
        cr.endPrefetch();
      }
      q.unlock();
    }
  }

  /**
   * Applies one row's gradient (at {@code g[gOff]}) with the optimizer. An update of unit step
   * (SGD or Adagrad, rate and gradient at most 1: {@code unitStep} says the first two) moves each
   * value by at most 1 and is applied as it is; any other is checked, and not applied to the row
   * if it would leave it out of range (docs/design/0009: "Rows stay finite and bounded").
   *
   * @return whether the row was updated
   */
  private boolean update(int row, float[] g, int gOff, float lr, long step, boolean unitStep) {
    float[] page = rowPages[row >>> pageShift];
    long[] meta = metaPages[row >>> pageShift];
    int base = (row & pageMask) * rowFloats;
    int m = (row & pageMask) * META;
    if (unitStep && FloatKernels.maxAbs(g, gOff, dim) <= 1f) {
      synchronized (stripes[row & (STRIPES - 1)]) {
        long t = meta[m + M_UPDATES] + 1;
        meta[m + M_UPDATES] = t;
        meta[m + M_STEP] = step;
        optimizer.apply(page, base, page, base + dim, g, gOff, lr, t);
      }
      return true;
    }
    float[] before = new float[rowFloats];
    synchronized (stripes[row & (STRIPES - 1)]) {
      long t = meta[m + M_UPDATES] + 1;
      System.arraycopy(page, base, before, 0, rowFloats);
      optimizer.apply(page, base, page, base + dim, g, gOff, lr, t);
      if (outOfRange(page, base)) { // the row keeps its values
        System.arraycopy(before, 0, page, base, rowFloats);
        refusedUpdates.increment();
        return false;
      }
      meta[m + M_UPDATES] = t;
      meta[m + M_STEP] = step;
    }
    return true;
  }

  private final java.util.concurrent.atomic.LongAdder refusedUpdates =
      new java.util.concurrent.atomic.LongAdder();

  /**
   * Whether an updated row left the range every row keeps: weights within ±{@link
   * Limits#MAX_ROW_VALUE} (so that scores stay finite), slots finite.
   */
  private boolean outOfRange(float[] page, int base) {
    return !(FloatKernels.maxAbs(page, base, dim) <= Limits.MAX_ROW_VALUE) // NaN too
        || rowFloats > dim && FloatKernels.firstNonFinite(page, base + dim, rowFloats - dim) >= 0;
  }

  /** Row updates not applied because they would have left a row out of range. */
  public long refusedUpdates() {
    return refusedUpdates.sum();
  }

  /** Row id of key i, or -1: in memory ({@link #lookupHot}), else promoted from the disk tier. */
  int lookup(PackedKeys keys, int i) {
    int row = lookupHot(keys, i);
    return row >= 0 || cold == null ? row : promote(keys, i);
  }


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
      byte[] key = keys.keyBytes(i);
      ColdRows.Record r = cold.take(key);
      if (r == null) {
        return -1;
      }
      row = place(s, m, keys, i, r.values(), 0, r.frequency(), r.step(), r.updates());
      totalFrequency.add(r.frequency());
      SlotMoves.Tracker mt = moveTracker;
      if (mt != null) {
        mt.touched(keys, i); // it changed tiers: a move's scan of either tier may have missed it
      }
      return row;
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
    this.pairs = old.pairs; // and the co-occurrence counts
  }

  /** Attaches the table's disk tier (before the store is published). */
  void attachCold(ColdRows c) {
    this.cold = c;
  }

  /** The keys held only in the tier below memory (empty without one): a weakly consistent view. */
  public java.util.List<String> coldKeys() {
    ColdRows c = cold;
    java.util.List<String> out = new java.util.ArrayList<>();
    if (c != null) {
      for (java.util.Map.Entry<String, Long> e : c.counts()) {
        out.add(e.getKey());
      }
    }
    return out;
  }

  /** The table's disk tier, or null. */
  ColdRows cold() {
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
   * The slot move this store's slots are leaving by, or null: keys its writes touch in the moving
   * slots are recorded for the move's catch-up ({@link SlotMoves}).
   */
  volatile SlotMoves.Tracker moveTracker;

  /**
   * Sets key i's stored record (row then optimizer slots, and metadata), creating the key if it is
   * missing and replacing it otherwise: a slot move's import. The caller holds {@link #quiesce}
   * exclusively, or the store is not published.
   */
  void setRecord(PackedKeys keys, int i, float[] record, int off, long freq, long step,
      long upd) {
    int row = lookupOrInsert(keys, i);
    float[] page = rowPages[row >>> pageShift];
    long[] meta = metaPages[row >>> pageShift];
    int base = (row & pageMask) * rowFloats;
    int m = (row & pageMask) * META;
    synchronized (stripes[row & (STRIPES - 1)]) {
      System.arraycopy(record, off, page, base, rowFloats);
      long old = meta[m + M_FREQ];
      meta[m + M_FREQ] = freq;
      meta[m + M_STEP] = step;
      meta[m + M_UPDATES] = upd;
      totalFrequency.add(freq - old);
    }
    lastStep.accumulateAndGet(step, Math::max);
  }

  /** Rows of the store (row ids are 0 .. size-1; a store never frees one). */
  int rowCount() {
    return numRows;
  }

  /** Copies row {@code row}'s record (row then slots) into {@code out} at {@code off}. */
  void copyRecord(int row, float[] out, int off) {
    synchronized (stripes[row & (STRIPES - 1)]) {
      System.arraycopy(rowPages[row >>> pageShift], (row & pageMask) * rowFloats, out, off,
          rowFloats);
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
    return restoreRow(keys, i, record, recOff, freq, step, upd) >= 0;
  }

  /** As {@link #restoreRecord}, returning the row placed, or -1 if the key was present. */
  int restoreRow(
      PackedKeys keys, int i, float[] record, int recOff, long freq, long step, long upd) {
    long m = KeyHashing.mix(keys.hash(i));
    Segment s = segments[(int) (m >>> (64 - SEGMENT_BITS))];
    if (probe(s.slots, tagOf(m), keys, i) >= 0) {
      return -1;
    }
    int row = place(s, m, keys, i, record, recOff, freq, step, upd);
    totalFrequency.add(freq);
    lastStep.accumulateAndGet(step, Math::max);
    return row;
  }

  // ---------------------------------------------------------------- write-behind (redis tier)

  /**
   * Per row, the update count and the frequency Redis last got ({@code [2 row]}, {@code [2 row +
   * 1]}; -1 for never): written by the redis tier's flusher under {@link #quiesce} shared, and by
   * an eviction's rebuild before the store is published. Null until then.
   */
  private long[] flushed;

  /**
   * Collects rows changed since Redis last got them ({@link #markFlushed}), from row {@code from}
   * on, until {@code max} are found: each as a record read under its row's stripe lock (a
   * consistent row, slots and update count). The caller holds {@link #quiesce} shared.
   *
   * @param marks receives (row, updates, frequency) per record, 3 x max longs
   * @return the row to continue from ({@link #size()} when every row was looked at)
   */
  int changedRows(int from, int max, java.util.List<ColdRows.Record> out, long[] marks) {
    int n = numRows;
    long[] fl = flushedFor(n);
    int r = from;
    for (; r < n && out.size() < max; r++) {
      if (!isReady(r)) {
        continue; // still being inserted: next pass
      }
      long[] meta = metaPages[r >>> pageShift];
      int m = (r & pageMask) * META;
      long upd;
      long freq;
      float[] rec;
      synchronized (stripes[r & (STRIPES - 1)]) {
        upd = meta[m + M_UPDATES];
        freq = meta[m + M_FREQ];
        if (fl[2 * r] == upd && fl[2 * r + 1] == freq) {
          continue;
        }
        int base = (r & pageMask) * rowFloats;
        rec = Arrays.copyOfRange(rowPages[r >>> pageShift], base, base + rowFloats);
      }
      int k = out.size();
      marks[3 * k] = r;
      marks[3 * k + 1] = upd;
      marks[3 * k + 2] = freq;
      out.add(new ColdRows.Record(keyBytes(r), rec, freq, meta[m + M_STEP], upd));
    }
    return r;
  }

  /** Records that Redis holds the first {@code count} records of a {@link #changedRows} call. */
  void markFlushed(long[] marks, int count) {
    long[] fl = flushed;
    for (int k = 0; k < count; k++) {
      int r = (int) marks[3 * k];
      fl[2 * r] = marks[3 * k + 1];
      fl[2 * r + 1] = marks[3 * k + 2];
    }
  }

  /**
   * Carries what Redis holds of {@code old}'s row to this store's {@code row} (an eviction's
   * rebuild, before this store is published; the caller holds old's lock exclusively).
   */
  void carryFlushed(int row, TableStore old, int oldRow) {
    long[] src = old.flushed;
    if (src == null || 2L * oldRow + 1 >= src.length || row < 0) {
      return;
    }
    long[] fl = flushedFor(row + 1);
    fl[2 * row] = src[2 * oldRow];
    fl[2 * row + 1] = src[2 * oldRow + 1];
  }

  /** {@link #flushed}, grown to hold {@code rows} rows (new ones -1: never flushed). */
  private long[] flushedFor(int rows) {
    long[] fl = flushed;
    if (fl == null || fl.length < 2L * rows) {
      int old = fl == null ? 0 : fl.length;
      fl = Arrays.copyOf(fl == null ? new long[0] : fl, (int) Math.min(Integer.MAX_VALUE - 8,
          Math.max(1024, Math.max(2L * rows, 2L * old))));
      Arrays.fill(fl, old, fl.length, -1L);
      flushed = fl;
    }
    return fl;
  }

  private byte[] keyBytes(int row) {
    PackedKeys.Builder b = new PackedKeys.Builder(1);
    appendKey(row, b);
    return b.build().keyBytes(0);
  }



  @Override
  long admissionBytes() {
    return (long) PENDING_BYTES * pending.size() + (sketch == null ? 0 : sketch.bytes())
        + (pairs == null ? 0 : pairs.bytes());
  }

  @Override
  long bookkeepingBytes() {
    long[] fl = flushed;
    return fl == null ? 0 : 16 + 8L * fl.length;
  }

  @Override
  boolean admitsOnFirstSight() {
    return minCount <= 1;
  }

  /** Rows updated since this store began (the counters' updates). */
  long updatesTotal() {
    return updates.sum();
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
    long[] stats = keyStats(n);
    ColdRows c = cold;
    TableCounters.Builder b = TableCounters.newBuilder();
    if (c != null) {
      c.addCounters(b);
    }
    return b
        .setKeys(n + b.getColdKeys())
        .setBytesUsed(bytesUsed())
        .setBytesRaw(4L * rowFloats * n)
        .setTotalFrequency(totalFrequency.sum() + (c == null ? 0 : c.frequency()))
        .setUpdates(updates.sum())
        .setLastStep(lastStep.get())
        .setPendingKeys(pending.size())
        .setFrozenKeys(stats == null ? 0 : stats[0])
        .setGradientNormSum(stats == null ? 0 : Double.longBitsToDouble(stats[1]))
        .build();
  }

  /**
   * With a key policy's statistics: {frozen rows, bits of the sum of their gradient-norm means}
   * over the rows in memory (a scan: O(rows), as a describe or a metrics scrape asks); else null.
   */
  private long[] keyStats(int n) {
    int slot = dev.dynembed.table.common.KeyPolicies.statsSlot(config.getOptimizer());
    if (slot < 0) {
      return null;
    }
    int at = dim * (1 + slot);
    long frozen = 0;
    double sum = 0;
    for (int r = 0; r < n; r++) {
      if (isReady(r)) {
        float[] page = rowPages[r >>> pageShift];
        int base = (r & pageMask) * rowFloats + at;
        sum += page[base];
        frozen += page[base + 1] != 0f ? 1 : 0;
      }
    }
    return new long[] {frozen, Double.doubleToLongBits(sum)};
  }
}
