package dev.dynembed.table.client;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Ticker;
import com.github.benmanes.caffeine.cache.stats.CacheStats;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

/**
 * A read-only table for inference: rows of a backing table (remote shards, or an in-process table
 * restored from a checkpoint) kept in a local cache bounded by bytes, each row at most {@code
 * maxAge} old. A lookup answers cached keys locally and reads all the missing keys of the call in
 * one {@link EmbeddingTable#find} of the backing table. Keys the backing table does not hold are
 * cached as "not found" too (they read as zero rows, as an inference lookup reads them), under
 * the same age bound, so that a stream of unknown keys does not reach the shards on every call.
 *
 * <p>Serving never creates rows or changes the table: {@link #findOrInsert} reads as {@link
 * #find} does, without creating (what inference lookups ask), and gradients, counting, save and
 * restore are refused. {@link #topK} and sampling go to the backing table uncached. Thread-safe.
 *
 * <p>Caffeine holds the entries (W-TinyLFU admission and eviction, bounded by weight); a row
 * weighs its floats plus its key's UTF-16 chars plus a fixed 64-byte entry overhead.
 */
public final class ServingTable implements EmbeddingTable {
  /** A cached read: the row, or null for a key the backing table does not hold. */
  private record Entry(float[] row) {}

  static final int ENTRY_OVERHEAD_BYTES = 64;

  private final EmbeddingTable backing;
  private final Cache<String, Entry> cache;
  private final int dim;
  private final java.util.concurrent.atomic.LongAdder keysRead =
      new java.util.concurrent.atomic.LongAdder();

  /**
   * @param maxBytes bound of the cache's weight (rows, keys and entry overhead)
   * @param maxAge a cached row is read again from the backing table after this long
   */
  public ServingTable(EmbeddingTable backing, long maxBytes, Duration maxAge) {
    this(backing, maxBytes, maxAge, Ticker.systemTicker());
  }

  /** As above, with the cache's clock (tests). */
  ServingTable(EmbeddingTable backing, long maxBytes, Duration maxAge, Ticker ticker) {
    if (maxBytes < 1) {
      throw new IllegalArgumentException("a serving cache needs maxBytes >= 1 but got "
          + maxBytes);
    }
    if (maxAge.isNegative() || maxAge.isZero()) {
      throw new IllegalArgumentException("a serving cache needs a positive maxAge but got "
          + maxAge);
    }
    this.backing = backing;
    this.dim = backing.dim();
    this.cache = Caffeine.newBuilder()
        .maximumWeight(maxBytes)
        .weigher((String k, Entry e) -> ENTRY_OVERHEAD_BYTES + 2 * k.length()
            + (e.row() == null ? 0 : 4 * e.row().length))
        .expireAfterWrite(maxAge)
        .ticker(ticker)
        .recordStats()
        .executor(Runnable::run) // maintenance in the caller's thread: no background threads
        .build();
  }

  /** Hits, misses, evictions since the table was made. */
  public CacheStats stats() {
    return cache.stats();
  }

  /** Keys read from the backing table so far (each missing key once per call). */
  public long keysRead() {
    return keysRead.sum();
  }

  /** Entries cached now (after pending maintenance). */
  public long cachedKeys() {
    cache.cleanUp();
    return cache.estimatedSize();
  }

  /** Forgets every cached row: the next lookups read the backing table. */
  public void invalidateAll() {
    cache.invalidateAll();
  }

  public EmbeddingTable backing() {
    return backing;
  }

  @Override
  public String name() {
    return backing.name();
  }

  @Override
  public int dim() {
    return dim;
  }

  @Override
  public TableConfig config() {
    return backing.config();
  }

  @Override
  public FindResult find(String... keys) {
    float[] rows = new float[keys.length * dim];
    boolean[] found = new boolean[keys.length];
    // each distinct key looked up once (a batch of Zipf keys repeats its frequent ones)
    HashMap<String, Integer> distinct = new HashMap<>(Math.max(16, keys.length));
    int[] of = new int[keys.length];
    List<String> order = new ArrayList<>();
    for (int i = 0; i < keys.length; i++) {
      Integer d = distinct.putIfAbsent(keys[i], order.size());
      if (d == null) {
        d = order.size();
        order.add(keys[i]);
      }
      of[i] = d;
    }
    Entry[] entries = new Entry[order.size()];
    List<String> missing = new ArrayList<>();
    for (int d = 0; d < entries.length; d++) {
      entries[d] = cache.getIfPresent(order.get(d));
      if (entries[d] == null) {
        missing.add(order.get(d));
      }
    }
    if (!missing.isEmpty()) {
      String[] ask = missing.toArray(new String[0]);
      FindResult r = backing.find(ask);
      keysRead.add(ask.length);
      for (int j = 0; j < ask.length; j++) {
        float[] row = null;
        if (r.found()[j]) {
          row = new float[dim];
          System.arraycopy(r.rows(), j * dim, row, 0, dim);
        }
        Entry e = new Entry(row);
        cache.put(ask[j], e);
        entries[distinct.get(ask[j])] = e;
      }
    }
    for (int i = 0; i < keys.length; i++) {
      float[] row = entries[of[i]].row();
      if (row != null) {
        System.arraycopy(row, 0, rows, i * dim, dim);
        found[i] = true;
      }
    }
    return new FindResult(rows, found);
  }

  /** Reads as {@link #find} (zero rows for unknown keys); a serving table creates nothing. */
  @Override
  public float[] findOrInsert(String... keys) {
    return find(keys).rows();
  }

  /** Reads as {@link #find}; {@code count} is ignored (a serving table counts nothing). */
  @Override
  public float[] findOrInsert(String[] keys, boolean count) {
    return find(keys).rows();
  }

  private TableException readOnly(String call) {
    return TableException.of(ErrorCode.FAILED_PRECONDITION, "a serving table is read-only;"
        + " train against the table itself", name(), -1, call, null);
  }

  @Override
  public KeyCounts count(String[] keys, boolean count) {
    if (count) {
      throw readOnly("count");
    }
    return backing.count(keys, false);
  }

  @Override
  public int applyGradients(String[] keys, float[] gradients, float learningRate, long step) {
    throw readOnly("applyGradients");
  }

  @Override
  public int applyPooledGradients(String[] keys, dev.dynembed.table.common.KeyBags bags,
      float[] bagGradients, float learningRate, long step) {
    throw readOnly("applyPooledGradients");
  }

  @Override
  public SampleResult sample(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    return backing.sample(positives, numSampled, sampler, alpha, seed);
  }

  @Override
  public SampledRows sampleDistinct(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    return backing.sampleDistinct(positives, numSampled, sampler, alpha, seed);
  }

  @Override
  public TopKResult topK(float[] queries, int numQueries, int k, TopKOptions options) {
    return backing.topK(queries, numQueries, k, options);
  }

  @Override
  public java.util.List<dev.dynembed.table.v1.IndexInfo> buildIndex(
      dev.dynembed.table.v1.Metric metric, boolean biasLastDim, int maxConn, int beamWidth,
      boolean wait) {
    return backing.buildIndex(metric, biasLastDim, maxConn, beamWidth, wait);
  }

  @Override
  public java.util.List<dev.dynembed.table.v1.IndexInfo> indexInfo() {
    return backing.indexInfo();
  }

  @Override
  public CheckpointManifest save(Path directory, long step) {
    throw readOnly("save");
  }

  @Override
  public long restore(Path directory) {
    throw readOnly("restore");
  }

  @Override
  public TableInfo describe() {
    return backing.describe();
  }

  /** Scans the backing table (uncached). */
  @Override
  public void scan(int pageKeys, java.util.function.Consumer<ScanPage> consumer) {
    backing.scan(pageKeys, consumer);
  }
}
