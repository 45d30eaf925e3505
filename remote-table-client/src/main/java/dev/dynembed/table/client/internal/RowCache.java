package dev.dynembed.table.client.internal;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.RowTraffic;
import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.atomic.LongAdder;

/**
 * A trainer-side cache of one table's hot rows with bounded staleness (docs/design/
 * 0022-row-cache.md): rows with their optimizer slots, shared by the client's threads.
 *
 * <ul>
 *   <li><b>Clock.</b> Every gradient batch written through the cache is one step of the cache's
 *       clock (all threads together).
 *   <li><b>Reads.</b> A row fetched at most {@code maxStaleness} steps ago is served from here;
 *       an older or absent one is read from its shard (with its slots and update count) and
 *       replaces the cached copy, with this process's unsent gradient replayed on it.
 *   <li><b>Writes.</b> A gradient of a cached key is applied here at once, by the table's own
 *       optimizer code ({@link RowOptimizer}), and added to the key's pending sum ({@code
 *       sum lr_i g_i}); other keys' gradients go to the shards as before.
 *   <li><b>Flush.</b> Every {@code maxStaleness} steps (and before a checkpoint, a top-k, a scan,
 *       an eviction, on close) the pending sums leave as one gradient row per key ({@code
 *       sum / lr}, applied by the shard's optimizer at rate {@code lr}: exactly the local sum of
 *       steps for SGD) in one {@code Write} call per shard, and the reads served here are
 *       counted on the shards (one count per key with its occurrences). Both calls carry call
 *       ids: a resend applies nothing twice.
 *   <li><b>Admission.</b> Caffeine's W-TinyLFU: a key enters a full cache only if its estimated
 *       frequency beats the victim's, so a stream of cold keys never displaces the hot ones. An
 *       evicted key's pending sum is kept aside and sent with the next flush. In front of it a
 *       doorkeeper ({@link #secondSighting}): a key read from a shard enters the cache only when
 *       it missed before since the doorkeeper's last reset, so the long tail of keys seen once
 *       never builds an entry that the policy then evicts (the cause of the cache's 2.2x loss
 *       on 1M Zipf keys, docs/benchmarks.md).
 * </ul>
 */
final class RowCache {
  /**
   * One cached row. {@code pending}, {@code updates}, {@code takenBy} and the slots are guarded by
   * the entry's monitor; the row is written under it and read without it by plain reads (torn
   * reads of a row two threads update are the Hogwild relaxation the in-process table has too);
   * {@code occurrences} is atomic, {@code fetchedAt} and {@code evicted} volatile. A flush finds
   * the entries with something to send by looking at every entry.
   */
  static final class Entry {
    final String key;
    /** The row, then its optimizer slots: one array. */
    final float[] data;
    long updates;
    volatile long fetchedAt;
    /** sum of lr_i g_i not yet sent, or null. */
    volatile float[] pending;
    volatile long occurrences;
    /** The flush that last took this entry's pending sum (0: none). */
    long takenBy;
    volatile boolean evicted;

    Entry(String key, int dim, int slotFloats) {
      this.key = key;
      this.data = new float[dim + slotFloats];
      this.fetchedAt = UNLOADED;
    }
  }

  /**
   * {@code fetchedAt} of an entry in the map whose row is not loaded yet (admit publishes it,
   * then loads it under its lock): reads treat it as absent.
   */
  static final long UNLOADED = Long.MIN_VALUE;

  private static final java.util.concurrent.atomic.AtomicLongFieldUpdater<Entry> OCCURRENCES =
      java.util.concurrent.atomic.AtomicLongFieldUpdater.newUpdater(Entry.class, "occurrences");

  /** What an evicted entry had not sent yet. */
  private record Orphan(float[] pending, long occurrences) {}

  private final ShardedTable table;
  private final String name;
  private final int dim;
  private final int slotFloats;
  private final RowOptimizer optimizer;
  private final float configuredRate;
  final int maxStaleness;
  private final Cache<String, Entry> entries;
  private final ConcurrentHashMap<String, Orphan> orphans = new ConcurrentHashMap<>();
  private final AtomicLong clock = new AtomicLong();
  /** The doorkeeper: a bit per hash bucket, set at a key's first miss (racy: a lost bit costs one more miss). */
  private final java.util.concurrent.atomic.AtomicLongArray seen;
  private final int seenMask;
  private final long seenResetAfter;
  private final LongAdder sightings = new LongAdder();
  private final Object flushLock = new Object();
  private long lastFlushAt; // guarded by flushLock
  private volatile long flushSeq;
  private volatile float lastRate;
  private volatile long lastStep;
  private volatile CompletableFuture<?> inFlight = CompletableFuture.completedFuture(null);

  final LongAdder hits = new LongAdder();
  final LongAdder misses = new LongAdder();
  final LongAdder refreshes = new LongAdder();
  final LongAdder localUpdates = new LongAdder();
  final LongAdder flushedRows = new LongAdder();
  final LongAdder countedKeys = new LongAdder();
  final LongAdder flushes = new LongAdder();
  final LongAdder evictions = new LongAdder();
  private final LongAdder ageSum = new LongAdder();
  private final LongAccumulator maxAge = new LongAccumulator(Math::max, 0);

  RowCache(ShardedTable table, ClientOptions.RowCaching settings) {
    if (!settings.on()) {
      throw new IllegalArgumentException("a row cache needs bytes and max staleness > 0");
    }
    TableConfig config = table.config();
    this.table = table;
    this.name = config.getName();
    this.dim = config.getDim();
    this.slotFloats = dim * TableConfigs.slots(config.getOptimizer());
    this.optimizer = RowOptimizer.create(config.getOptimizer(), dim);
    this.configuredRate = config.getOptimizer().getLearningRate();
    this.maxStaleness = settings.maxStaleness();
    this.lastRate = configuredRate;
    long perEntry = 4L * (dim + slotFloats) + 120; // arrays, entry, key, the map's node
    long maxRows = Math.max(1, settings.bytes() / perEntry);
    // 8 bits per entry the cache holds, a power of two; reset after 10x as many first misses as
    // entries (as Caffeine ages its own sketch), so a key that was warm long ago must miss twice
    int bits = (int) Math.min(1L << 30, Long.highestOneBit(Math.max(1024, maxRows * 8) - 1) << 1);
    this.seen = new java.util.concurrent.atomic.AtomicLongArray(bits / 64);
    this.seenMask = bits - 1;
    this.seenResetAfter = 10 * maxRows;
    this.entries = Caffeine.newBuilder().maximumSize(maxRows).executor(Runnable::run)
        .<String, Entry>evictionListener((k, e, cause) -> {
          if (e != null && cause.wasEvicted()) {
            orphan(e);
          }
        }).build();
  }

  /**
   * The doorkeeper: true when the key (by its 64-bit hash) missed before since the last reset,
   * so it may enter the cache now; false at its first miss, which it records (two bits, from the
   * hash's two halves). A read of a key that does not pass is answered from its shard as without
   * a cache and builds no entry.
   */
  boolean secondSighting(long hash) {
    int a = (int) hash & seenMask;
    int b = (int) (hash >>> 32) & seenMask;
    long ma = 1L << a;
    long mb = 1L << b;
    boolean both = (seen.get(a >>> 6) & ma) != 0 && (seen.get(b >>> 6) & mb) != 0;
    if (both) {
      return true;
    }
    seen.getAndAccumulate(a >>> 6, ma, (x, y) -> x | y);
    seen.getAndAccumulate(b >>> 6, mb, (x, y) -> x | y);
    sightings.increment();
    if (sightings.sum() >= seenResetAfter) { // racy: two threads may both clear, harmless
      sightings.reset();
      for (int i = 0; i < seen.length(); i++) {
        seen.set(i, 0);
      }
    }
    return false;
  }

  /** Steps of the cache's clock so far. */
  long now() {
    return clock.get();
  }

  long flushSeq() {
    return flushSeq;
  }

  int dim() {
    return dim;
  }

  int slotFloats() {
    return slotFloats;
  }

  // ------------------------------------------------------------------ reads

  /**
   * Copies key's row into {@code rows} when it is cached and at most {@code maxStaleness} steps
   * old; counts {@code count} occurrences of it. With {@code counts} (a read with state) its slots
   * and update count come too, and an entry older than the bound is copied as well (false is
   * still returned: the caller reads the key again to refresh it): a read made ahead of a
   * pipelined step takes such a copy, which holds every update of this process that the shard's
   * row may lack until the next flush, and its op replays the previous step on it (0007).
   *
   * @return false when the caller must read the key from its shard
   */
  boolean serve(String key, long now, int count, float[] rows, int rowOff, float[] slots,
      int slotOff, long[] counts, int at, ReadStats stats) {
    Entry e = entries.getIfPresent(key);
    if (e != null && e.fetchedAt == UNLOADED) {
      e = null; // being admitted by another thread: its row is not there yet
    }
    long age = e == null ? 0 : now - e.fetchedAt;
    if (e == null || e.evicted || age > maxStaleness) {
      stats.misses++;
      if (e != null && !e.evicted) {
        stats.staleMisses++;
      }
      if (e != null && !e.evicted && counts != null) {
        copyWithState(e, rows, rowOff, slots, slotOff, counts, at);
        stats.staleCopies++;
      }
      return false;
    }
    if (counts != null) {
      copyWithState(e, rows, rowOff, slots, slotOff, counts, at);
    } else {
      System.arraycopy(e.data, 0, rows, rowOff, dim);
    }
    countHere(e, count);
    stats.hits++;
    stats.ageSum += age;
    stats.maxAge = Math.max(stats.maxAge, age);
    return true;
  }

  /** Row, slots and update count of one moment (a replay needs them so). */
  private void copyWithState(Entry e, float[] rows, int rowOff, float[] slots, int slotOff,
      long[] counts, int at) {
    synchronized (e) {
      System.arraycopy(e.data, 0, rows, rowOff, dim);
      if (slots != null && slotFloats > 0) {
        System.arraycopy(e.data, dim, slots, slotOff, slotFloats);
      }
      counts[at] = e.updates;
    }
  }

  private void countHere(Entry e, int count) {
    if (count <= 0) {
      return;
    }
    OCCURRENCES.addAndGet(e, count);
    if (e.evicted) { // evicted meanwhile: what orphan() did not take goes aside here
      long late = OCCURRENCES.getAndSet(e, 0);
      if (late > 0) {
        orphans.merge(e.key, new Orphan(null, late), (a, b) -> new Orphan(a.pending(),
            a.occurrences() + b.occurrences()));
      }
    }
  }

  /** A read's hits and misses, added to the cache's counters once ({@link #count}). */
  static final class ReadStats {
    long staleCopies;
    /** Misses of keys the cache holds (older than the bound): refreshed, never new entries. */
    long staleMisses;
    long hits;
    long misses;
    long ageSum;
    long maxAge;
  }

  void count(ReadStats s) {
    hits.add(s.hits);
    misses.add(s.misses);
    ageSum.add(s.ageSum);
    maxAge.accumulate(s.maxAge);
  }

  /**
   * Takes a row read from the shard (with its slots and update count) into the cache: a new
   * entry, or a stale one refreshed. This process's unsent gradient of the key is replayed on it,
   * so the row reads as the shard's will once it is flushed. A read made before a flush took
   * this key's gradient (its {@code readSeq} is older) may or may not include it, so it does not
   * replace the cached row; the entry stays stale and is read again.
   *
   * @param readAt the clock when the read was made
   * @param readSeq {@link #flushSeq()} when the read was made
   * @param out where the cached row is copied once taken in (this process's unsent updates
   *     included), or null
   */
  void admit(String key, float[] rows, int rowOff, float[] slots, int slotOff, long updates,
      long readAt, long readSeq, float[] out, int outOff) {
    Entry fresh = new Entry(key, dim, slotFloats);
    Entry e = entries.asMap().putIfAbsent(key, fresh);
    if (e == null) {
      e = fresh;
      Orphan o = orphans.remove(key); // evicted with gradient unsent: it lives here again
      synchronized (e) {
        if (o != null) {
          // summed: the entry is in the map since putIfAbsent, and another thread's write may
          // have applied a gradient to it before this lock (its pending sum must stay)
          e.pending = sum(e.pending, o.pending());
          OCCURRENCES.addAndGet(e, o.occurrences());
        }
        load(e, rows, rowOff, slots, slotOff, updates, readAt);
        copyOut(e, out, outOff);
        if (e.evicted) {
          // the policy turned the new entry away inside putIfAbsent, before the sum set aside
          // came back into it: it goes aside again (else no flush would ever find it)
          setAside(e);
        }
      }
      return;
    }
    synchronized (e) {
      if (!(e.evicted || e.takenBy > readSeq || readAt < e.fetchedAt)) {
        load(e, rows, rowOff, slots, slotOff, updates, readAt);
        refreshes.increment();
      }
      copyOut(e, out, outOff); // the shard's row with this process's updates on it
    }
  }

  private void copyOut(Entry e, float[] out, int outOff) {
    if (out != null) {
      System.arraycopy(e.data, 0, out, outOff, dim);
    }
  }

  /** Sets an entry from a shard's row and replays its pending sum (called under its lock). */
  private void load(Entry e, float[] rows, int rowOff, float[] slots, int slotOff, long updates,
      long readAt) {
    System.arraycopy(rows, rowOff, e.data, 0, dim);
    if (slotFloats > 0) {
      if (slots != null) {
        System.arraycopy(slots, slotOff, e.data, dim, slotFloats);
      } else {
        optimizer.initSlots(e.data, dim);
      }
    }
    e.updates = updates;
    e.fetchedAt = readAt;
    if (e.pending != null) { // what the shard will apply at the next flush, in one step
      float lr = lastRate;
      float[] g = new float[dim];
      FloatKernels.axpy(1f / lr, e.pending, 0, g, 0, dim);
      optimizer.apply(e.data, 0, e.data, dim, g, 0, lr, ++e.updates);
    }
  }

  // ------------------------------------------------------------------ writes

  /**
   * One gradient batch: checked whole, summed per key; cached keys' sums applied here at once,
   * the others sent as a routed write. Every {@code maxStaleness} steps the pending sums are
   * flushed (sent now); the batch's result waits for that flush too.
   */
  ShardedTable.Writes write(String[] keys, PackedKeys packed, float[] gradients, float lr,
      long step) {
    try {
      GradientChecks.check(name, packed, dim, table.config().getMaxKeyBytes(), gradients, lr);
    } catch (TableException e) {
      throw TableException.of(e.code(), e.getMessage(), name, -1, "applyGradients", null);
    }
    float rate = lr > 0 ? lr : configuredRate;
    lastRate = rate;
    lastStep = step;
    BatchDedup dedup = BatchDedup.of(packed);
    int u = dedup.uniqueCount();
    float[] summed = new float[u * dim];
    for (int i = 0; i < keys.length; i++) {
      int id = dedup.uniqueOf(i);
      FloatKernels.axpy(1f, gradients, i * dim, summed, id * dim, dim);
    }
    GradientChecks.checkSummed(name, summed, dim, rate, id -> keys[dedup.firstPosition(id)],
        !dedup.allDistinct());
    PackedKeys.Builder through = new PackedKeys.Builder(0);
    List<Integer> throughIds = new ArrayList<>();
    int applied = 0;
    // from a random key on: Hogwild threads updating the same hot rows in the same order would
    // queue behind each other on every row's lock (a convoy)
    int start = u == 0 ? 0 : java.util.concurrent.ThreadLocalRandom.current().nextInt(u);
    boolean[] here = new boolean[u];
    for (int k = 0; k < u; k++) {
      int id = start + k < u ? start + k : start + k - u;
      here[id] = applyHere(keys[dedup.firstPosition(id)], summed, id * dim, rate);
    }
    for (int id = 0; id < u; id++) {
      if (here[id]) {
        applied++;
      } else {
        through.add(packed, dedup.firstPosition(id));
        throughIds.add(id);
      }
    }
    localUpdates.add(applied);
    List<ShardCalls.WriteItem> items = new ArrayList<>();
    CompletableFuture<Integer> result = CompletableFuture.completedFuture(applied);
    if (!throughIds.isEmpty()) {
      float[] g = new float[throughIds.size() * dim];
      for (int j = 0; j < throughIds.size(); j++) {
        System.arraycopy(summed, throughIds.get(j) * dim, g, j * dim, dim);
      }
      GradientWrite w = table.gradientItem(through.build(), g, lr, step);
      items.add(w);
      result = result.thenCombine(w.result, Integer::sum);
    }
    long t = clock.incrementAndGet();
    CompletableFuture<?> flushed = null;
    synchronized (flushLock) {
      if (t - lastFlushAt >= maxStaleness) {
        flushed = flushLocked(rate, step);
      }
    }
    if (flushed != null) {
      result = result.thenCombine(flushed, (n, ignored) -> n);
    }
    return new ShardedTable.Writes(items, result);
  }

  /** Applies a summed gradient row to the cached copy; false when the key is not cached. */
  private boolean applyHere(String key, float[] g, int gOff, float rate) {
    Entry e = entries.asMap().get(key); // the step's read recorded the access already
    if (e == null) {
      return false;
    }
    synchronized (e) {
      if (e.evicted) {
        return false;
      }
      optimizer.apply(e.data, 0, e.data, dim, g, gOff, rate, ++e.updates);
      if (e.pending == null) {
        e.pending = new float[dim];
      }
      FloatKernels.axpy(rate, g, gOff, e.pending, 0, dim);
    }
    return true;
  }


  private void orphan(Entry e) {
    synchronized (e) {
      e.evicted = true;
      setAside(e);
    }
    evictions.increment();
  }

  /** Moves an evicted entry's pending sum and counted reads aside, to the next flush. */
  private void setAside(Entry e) {
    long occ = OCCURRENCES.getAndSet(e, 0);
    if (e.pending != null || occ > 0) {
      float[] p = e.pending;
      orphans.merge(e.key, new Orphan(p, occ), (a, b) -> new Orphan(sum(a.pending(),
          b.pending()), a.occurrences() + b.occurrences()));
      e.pending = null;
    }
  }

  private float[] sum(float[] a, float[] b) {
    if (a == null || b == null) {
      return a == null ? b : a;
    }
    float[] s = a.clone();
    FloatKernels.axpy(1f, b, 0, s, 0, dim);
    return s;
  }

  // ------------------------------------------------------------------ flush

  /**
   * Sends every pending sum and count now and waits until the shards have applied them (before a
   * checkpoint, a top-k, a scan, an eviction; on close).
   */
  void flushNow() {
    CompletableFuture<?> f;
    synchronized (flushLock) {
      f = flushLocked(lastRate, lastStep);
    }
    Futures.await(f);
  }

  /** The last flush's calls (completed when none is in flight). */
  CompletableFuture<?> inFlight() {
    return inFlight;
  }

  /** Waits for the flush in flight, if any: a read sent after it sees what it sent. */
  void awaitFlushed() {
    Futures.await(inFlight);
  }

  /** Forgets every cached row and unsent gradient (the table was restored). */
  void clear() {
    synchronized (flushLock) {
      entries.invalidateAll();
      orphans.clear();
    }
  }

  /** Forgets these keys' cached rows, after sending what they had pending (keys removed). */
  void invalidate(String[] keys) {
    flushNow();
    for (String k : keys) {
      Entry e = entries.asMap().remove(k);
      if (e != null) {
        orphan(e); // a gradient applied since the flush still goes out
      }
    }
  }

  private CompletableFuture<?> flushLocked(float rate, long step) {
    lastFlushAt = clock.get();
    long seq = ++flushSeq;
    List<String> gKeys = new ArrayList<>();
    List<float[]> gRows = new ArrayList<>();
    List<String> cKeys = new ArrayList<>();
    List<Long> cCounts = new ArrayList<>();
    for (Entry e : entries.asMap().values()) { // a racy first look: most entries are clean
      if (e.pending == null && e.occurrences == 0) {
        continue;
      }
      synchronized (e) {
        if (e.pending != null) {
          gKeys.add(e.key);
          gRows.add(e.pending);
          e.pending = null;
          e.takenBy = seq;
        }
      }
      long occ = OCCURRENCES.getAndSet(e, 0);
      if (occ > 0) {
        cKeys.add(e.key);
        cCounts.add(occ);
      }
    }
    for (String k : new ArrayList<>(orphans.keySet())) {
      Orphan o = orphans.remove(k);
      if (o == null) {
        continue;
      }
      if (o.pending() != null) {
        gKeys.add(k);
        gRows.add(o.pending());
      }
      if (o.occurrences() > 0) {
        cKeys.add(k);
        cCounts.add(o.occurrences());
      }
    }
    flushes.increment();
    List<CompletableFuture<?>> calls = new ArrayList<>();
    if (!gKeys.isEmpty()) {
      float[] g = new float[gKeys.size() * dim];
      for (int j = 0; j < gKeys.size(); j++) {
        FloatKernels.axpy(1f / rate, gRows.get(j), 0, g, j * dim, dim);
      }
      GradientWrite w = table.gradientItem(PackedKeys.of(gKeys.toArray(new String[0])), g, rate,
          step);
      ShardCalls.write(table.router(), List.of(w));
      calls.add(w.result);
      flushedRows.add(gKeys.size());
    }
    if (!cKeys.isEmpty()) {
      long[] occ = new long[cCounts.size()];
      for (int j = 0; j < occ.length; j++) {
        occ[j] = cCounts.get(j);
      }
      CountFlush c = table.countItem(PackedKeys.of(cKeys.toArray(new String[0])), occ);
      ShardCalls.read(table.router(), List.of(c));
      calls.add(c.result);
      countedKeys.add(cKeys.size());
    }
    CompletableFuture<?> all = CompletableFuture.allOf(calls.toArray(new CompletableFuture[0]));
    inFlight = all;
    return all;
  }

  /** This cache's counters (part of {@link RowTraffic}). */
  void addTo(RowTraffic.Builder b) {
    long h = hits.sum();
    b.cacheHits(h).cacheMisses(misses.sum()).cacheRefreshes(refreshes.sum())
        .localUpdates(localUpdates.sum()).flushedRows(flushedRows.sum())
        .countedKeys(countedKeys.sum()).flushes(flushes.sum()).cacheEvictions(evictions.sum())
        .cachedRows(entries.estimatedSize()).maxStaleness(maxStaleness)
        .meanAge(h == 0 ? 0 : (double) ageSum.sum() / h).maxAge(maxAge.get());
  }
}
