package dev.dynembed.table.client;

import dev.dynembed.table.v1.PartnerWeight;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.nio.file.Path;

/**
 * A handle on one embedding table: string keys to FLOAT rows of {@link #dim()} columns, created on
 * first sight (no dictionary), updated by the table's own optimizer. The same contract holds
 * in-process and over sharded gRPC ({@link TableClients}).
 *
 * <p>Thread-safety: every method may be called from many threads. Failures are {@link
 * dev.dynembed.table.common.TableException}s naming the table, shard and call; a failed call
 * changes no stored row.
 *
 * <p>Limits ({@link dev.dynembed.table.common.Limits}): a batch holds 1..1,048,576 keys; a key is
 * 1..max_key_bytes (default 256) UTF-8 bytes.
 */
public interface EmbeddingTable {
  String name();

  int dim();

  /** The table's normalized config (every default filled in). */
  TableConfig config();

  /**
   * Rows of the keys; missing keys get a fresh row from the table's initializer. Each occurrence
   * of a key counts once toward its frequency.
   *
   * @param keys UTF8 [n]
   * @return FLOAT [n, dim], row-major
   */
  float[] findOrInsert(String... keys);

  /**
   * As {@link #findOrInsert(String...)}; with {@code count = false} nothing is counted (for keys
   * already counted by {@link #count}). With admission ({@code min_count} &gt; 1) keys not yet
   * admitted read as zero rows and are not created.
   */
  float[] findOrInsert(String[] keys, boolean count);

  /**
   * Counts the keys (each occurrence once) without reading rows: the admission pass of a stream.
   * A key gets its row once counted {@code min_count} times (at once when min_count &lt;= 1).
   *
   * @param count false: only report, count nothing
   * @return per position: admitted (has a row) and its count after the call
   */
  KeyCounts count(String[] keys, boolean count);

  /**
   * Rows of existing keys; missing keys get no row (zeros, {@code found[i] = false}). Counts
   * nothing.
   *
   * @param keys UTF8 [n]
   */
  FindResult find(String... keys);

  /**
   * Sends gradient rows; the table's optimizer updates the rows. Duplicate keys are summed.
   * Gradients are checked whole first: a wrong width or a NaN/Inf changes nothing.
   *
   * @param keys UTF8 [n]
   * @param gradients FLOAT [n, dim], row-major
   * @param learningRate &gt; 0 overrides the configured rate for this call; 0 keeps it
   * @param step recorded as the last-update step of each key
   * @return distinct keys updated
   */
  int applyGradients(String[] keys, float[] gradients, float learningRate, long step);

  /**
   * Sets these keys' rows (an import of vectors trained elsewhere, {@code VectorImport}): each
   * key is created if missing, whatever its admission count; its optimizer slots start as a new
   * row's and its update count at 0; its last-update step is {@code step}. Checked whole first
   * (width, values finite and within the rows' range, keys distinct): a bad batch changes
   * nothing. Logged, replicated and de-duplicated on resends as gradients are; assigning the same
   * rows twice leaves what assigning them once does. A trainer's row cache drops these keys
   * (after sending what it held for them).
   *
   * @param values FLOAT [n, dim], row-major
   * @param frequencies each key's new frequency (sampling, subsampling and eviction read it), or
   *     null to leave counts (0 for a key the call creates)
   * @return keys assigned
   */
  default int assign(String[] keys, float[] values, long[] frequencies, long step) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") does not assign rows");
  }

  /**
   * A pooled lookup: one vector per bag, {@code scale_b * sum_e weight_e * row(keys[e])} over the
   * bag's entries ({@link KeyBags}). Tables over shards pool on the shards, so that bags x dim
   * values per shard cross the wire instead of a row per key (docs/design/0011-pooled-lookups.md);
   * other tables read the rows and pool here.
   *
   * @param keys UTF8 [u], the keys the bags index (normally distinct); every key must be used
   * @param bags built over {@code keys.length} keys
   * @param insert true: as {@link #findOrInsert(String[], boolean)} (counting each key once per
   *     entry that uses it when {@code count}); false: as {@link #find}, missing keys pool as zeros
   * @return FLOAT [bags, dim]
   */
  default float[] pooled(String[] keys, KeyBags bags, boolean insert, boolean count) {
    checkBags(keys, bags);
    float[] rows;
    if (insert) { // each key read once per entry that uses it, so that each entry counts once
      rows = bags.keyRows(findOrInsert(bags.entryKeys(keys), count), dim());
    } else {
      rows = find(keys).rows();
    }
    return bags.pool(rows, dim());
  }

  /**
   * Sends the gradient of a {@link #pooled} lookup: one row per bag, spread over the bags' keys
   * ({@code scale_b * weight_e * g_b}, summed per key) and applied by the table's optimizer, as
   * {@link #applyGradients} would apply the spread rows.
   *
   * @param bagGradients FLOAT [bags, dim]
   * @return distinct keys updated
   */
  default int applyPooledGradients(String[] keys, KeyBags bags, float[] bagGradients,
      float learningRate, long step) {
    checkBags(keys, bags);
    try {
      bags.requireAllUsed(i -> keys[i]);
    } catch (dev.dynembed.table.common.TableException e) {
      throw dev.dynembed.table.common.TableException.invalid("table '%s': %s", name(),
          e.getMessage());
    }
    return applyGradients(keys, bags.spread(bagGradients, keys.length, dim()), learningRate,
        step);
  }

  /** Refuses bags built over another number of keys. */
  private void checkBags(String[] keys, KeyBags bags) {
    try {
      bags.requireKeys(keys.length);
    } catch (dev.dynembed.table.common.TableException e) {
      throw dev.dynembed.table.common.TableException.invalid("table '%s': %s", name(),
          e.getMessage());
    }
  }

  /**
   * Candidate sampling over the whole table (every shard gets its share of the draws).
   *
   * @param positives UTF8 [p], returned first with {@code positive = true}
   * @param numSampled draws with replacement
   * @param alpha unigram exponent (0 = 0.75)
   */
  SampleResult sample(String[] positives, int numSampled, SamplerKind sampler, float alpha,
      long seed);

  /**
   * The same draws as {@link #sample}, de-duplicated: each distinct drawn key once with its row
   * and probability, and for every draw the index of its key. Saves a {@link #find} of the draws
   * and the transfer of repeated keys (unigram draws repeat the frequent words).
   */
  SampledRows sampleDistinct(String[] positives, int numSampled, SamplerKind sampler, float alpha,
      long seed);

  /**
   * The k keys with the highest score per query, over every shard.
   *
   * @param queries FLOAT [q, dim], or [q, dim - 1] with {@link TopKOptions#biasLastDim()}
   */
  TopKResult topK(float[] queries, int numQueries, int k, TopKOptions options);

  /**
   * Writes a checkpoint of this table (rows, slots, metadata of every shard) under {@code
   * directory} with a manifest ({@code <table>.manifest.json}). No update is in flight while a
   * shard writes its file. The directory must be visible to every shard process.
   */
  CheckpointManifest save(Path directory, long step);

  /**
   * Replaces the table with a checkpoint written by {@link #save}, from any number of shards;
   * keys are re-routed to this deployment's shards. Checksums are verified first; a corrupt or
   * truncated checkpoint is refused and leaves the table as it was.
   *
   * @return keys restored over all shards
   */
  long restore(Path directory);

  /** Config and counters summed over shards. */
  TableInfo describe();

  /**
   * Evicts rows (docs/design/0012-table-lifecycle.md): rows not updated within {@code
   * ttlSteps} steps (0: no TTL), then, past {@code maxKeys} rows (0: no cap; over N shards each
   * keeps ceil(maxKeys / N)), the least frequently (LFU) or least recently updated (LRU) ones.
   * Evicted keys come back through admission. Each shard rebuilds its part of the table; its
   * calls wait meanwhile. Tables of {@link TableClients} implement it.
   *
   * @param nowStep the step TTLs count from; 0: each shard's last update step
   * @return rows evicted over all shards
   */
  default long evict(long ttlSteps, long nowStep, long maxKeys,
      dev.dynembed.table.v1.EvictionPolicy policy) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") does not evict");
  }

  /**
   * Every row of the table, shard after shard, in pages of at most {@code pageKeys} keys (a live
   * scan: rows present when it starts come once each, with their values as read; rows added
   * meanwhile may or may not come). Fails with FAILED_PRECONDITION when a shard's store is
   * replaced during the scan (an eviction, a restore, a restart): scan again.
   */
  default void scan(int pageKeys, java.util.function.Consumer<ScanPage> consumer) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") does not scan");
  }

  /**
   * Builds (or rebuilds) the approximate nearest-neighbour index of this table on every shard
   * (docs/design/0016-approximate-top-k.md): an HNSW graph of the rows in memory for one metric
   * and bias option, built on each shard's index thread; {@link #topK} with {@link
   * TopKOptions#searchBreadth()} &gt; 0 then answers from it. With {@code wait}, returns once
   * every shard has built it.
   *
   * @param maxConn neighbours per graph node (0: 16)
   * @param beamWidth candidates explored per insertion (0: 100)
   * @return each shard's index
   */
  default java.util.List<dev.dynembed.table.v1.IndexInfo> buildIndex(
      dev.dynembed.table.v1.Metric metric, boolean biasLastDim, int maxConn, int beamWidth,
      boolean wait) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") has no approximate index");
  }

  /** Each shard's approximate index of this table ({@link #buildIndex}): state, rows, bytes. */
  default java.util.List<dev.dynembed.table.v1.IndexInfo> indexInfo() {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") has no approximate index");
  }

  /**
   * Sends what this handle's client keeps of the table (a trainer-side row cache's gradients and
   * counts: {@link ClientOptions.RowCaching}) to the table and waits until it is applied; nothing
   * for a table without such a cache. A checkpoint, a top-k and closing the client do it
   * themselves.
   */
  default void flush() {}

  /** Removes these keys' rows (those present); they come back through admission. */
  default long remove(String... keys) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") does not remove keys");
  }

  /**
   * Reports co-occurring pairs to the shards that own their anchors, which count them in the
   * table's co-occurrence summaries (a table created with {@code cooccurrence}; design 0026).
   * Anchors may repeat; rows and frequencies are not touched. Applied once however often it is
   * resent.
   *
   * @param counts each pair's count (&gt;= 1), or null for 1 each
   * @param step recorded with the call (the log's replay order)
   * @return pairs counted (pairs of anchors past max_anchors are dropped)
   */
  default int reportPairs(String[] anchors, String[] partners, int[] counts, long step) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") keeps no co-occurrence counts");
  }

  /**
   * {@code numDraws} partners of each anchor drawn with replacement from its co-occurrence
   * summary, by positive PMI or by count (none for an anchor without a partner of positive
   * weight). A function of the counts, the anchor, its occurrence in the batch and the seed.
   */
  default PartnerDraws partners(String[] anchors, int numDraws, PartnerWeight weight, long seed) {
    throw new UnsupportedOperationException("table '" + name() + "' ("
        + getClass().getSimpleName() + ") keeps no co-occurrence counts");
  }

  /**
   * Partner draws: anchor i's are {@code keys[offset(i) .. offset(i) + counts[i])}, each with its
   * probability among that anchor's partners.
   */
  record PartnerDraws(String[] keys, float[] probability, int[] counts) {
    /** Where anchor i's draws start in {@link #keys}. */
    public int[] offsets() {
      int[] o = new int[counts.length + 1];
      for (int i = 0; i < counts.length; i++) {
        o[i + 1] = o[i] + counts[i];
      }
      return o;
    }
  }
}
