package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.Internal;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.client.SampleResult;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.CheckpointFormat;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import dev.dynembed.table.v1.TableInfo;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import dev.dynembed.table.client.spi.Shard;

/**
 * A table over N shards (N = 1 for the in-process table). Every data call is an item split over
 * the shards ({@link RowsRead}, {@link SampleRead}, {@link GradientWrite}) and sent with {@link
 * ShardCalls}: alone here, or with the items of other tables of the same client in one call per
 * shard ({@link ReadBatch}, {@link WriteBatch}).
 *
 * <h2>Routing</h2>
 *
 * Keys go to the shard that owns their slot in the {@link SlotRouter}'s map (the implicit map of
 * the shard count, {@code xxh3 mod n}, until slots move); a shard on a newer map refuses a call
 * whole as MOVED and {@link Rerouted} sends it again by the newer map (docs/design/0021). Calls
 * over every shard (top-k, save, restore, scan, eviction, statistics) go to the shards that own
 * slots now.
 *
 * <h2>The row cache</h2>
 *
 * With {@link ClientOptions.RowCaching} on, reads of hot rows are served from a {@link RowCache}
 * shared by the client's threads and gradients are held there until flushed ({@link #flush}:
 * every S steps, and before a checkpoint, top-k, scan, eviction and close: docs/design/0022).
 *
 * <h2>Sampling</h2>
 *
 * Samplers draw on each shard in proportion to the shard's share of the table's mass ({@code
 * masses}: each shard reports its own with its draws; forgotten when the slot map's epoch
 * changes), so the merged draw follows the distribution one unsharded table's would.
 *
 * <p>Errors are {@link dev.dynembed.table.common.TableException}s naming the table; a call a
 * shard refused changed nothing there, and a write resent after an error is applied once
 * ({@link GrpcShard}'s call ids).
 */
@Internal
public final class ShardedTable implements EmbeddingTable {
  private final TableConfig config;
  private final SlotRouter router;
  private final int dim;
  /** Whether calls go straight to a single in-process shard. */
  private final boolean direct;
  /** Last known sampler mass of each shard, per sampler and alpha. */
  private final ConcurrentHashMap<String, double[]> masses = new ConcurrentHashMap<>();
  private volatile long massesEpoch;
  /** The trainer-side row cache, or null (off, or a single in-process shard). */
  private final RowCache cache;
  private final Traffic traffic = new Traffic();

  public ShardedTable(TableConfig config, SlotRouter router) {
    this(config, router, ClientOptions.RowCaching.OFF);
  }

  /** @param cache the row cache's settings ({@link ClientOptions.RowCaching#OFF}: none) */
  public ShardedTable(TableConfig config, SlotRouter router, ClientOptions.RowCaching cache) {
    this.config = config;
    this.router = router;
    this.dim = config.getDim();
    List<Shard> shards = router.shards();
    this.direct = shards.size() == 1 && shards.get(0).takesBatchesUnchanged();
    this.cache = cache.on() && !direct ? new RowCache(this, cache) : null;
  }

  /** The row cache, or null. */
  RowCache cache() {
    return cache;
  }

  /** Rows and values that crossed to and from the shards, and the row cache's counters. */
  public dev.dynembed.table.client.RowTraffic traffic() {
    dev.dynembed.table.client.RowTraffic.Builder b = dev.dynembed.table.client.RowTraffic
        .builder().rowsRead(traffic.rowsRead.sum()).valuesRead(traffic.valuesRead.sum())
        .rowsWritten(traffic.rowsWritten.sum()).valuesWritten(traffic.valuesWritten.sum());
    if (cache != null) {
      cache.addTo(b);
    }
    return b.build();
  }

  /** What crossed: rows (distinct keys per shard call) and the float values they carried. */
  static final class Traffic {
    final LongAdder rowsRead = new LongAdder();
    final LongAdder valuesRead = new LongAdder();
    final LongAdder rowsWritten = new LongAdder();
    final LongAdder valuesWritten = new LongAdder();

    void read(long rows, long valuesPerRow) {
      rowsRead.add(rows);
      valuesRead.add(rows * valuesPerRow);
    }

    void written(long rows, long valuesPerRow) {
      rowsWritten.add(rows);
      valuesWritten.add(rows * valuesPerRow);
    }
  }

  /** The write items of one gradient batch, and its result (distinct keys updated). */
  record Writes(List<ShardCalls.WriteItem> items, CompletableFuture<Integer> result) {}

  @Override
  public String name() {
    return config.getName();
  }

  @Override
  public int dim() {
    return dim;
  }

  @Override
  public TableConfig config() {
    return config;
  }

  /** The shards and their slot map; tables of one client share it. */
  SlotRouter router() {
    return router;
  }

  /** Shards a call over every shard goes to: those that own slots ({@link SlotRouter#inUse}). */
  private List<Shard> shards() {
    return router.inUse();
  }

  /** The client's shards, for routing (a cluster map's client may gain shards). */
  private int n() {
    return router.shards().size();
  }

  private PackedKeys pack(String[] keys, String call) {
    if (keys.length > Limits.MAX_BATCH_KEYS) {
      throw TableException.of(ErrorCode.RESOURCE_EXHAUSTED, String.format(
          "a batch of %d keys exceeds the limit of %d", keys.length, Limits.MAX_BATCH_KEYS),
          name(), -1, call, null);
    }
    try {
      return PackedKeys.of(keys);
    } catch (TableException e) {
      throw TableException.of(e.code(), e.getMessage(), name(), -1, call, e);
    }
  }

  private TableException invalid(String call, String format, Object... args) {
    return TableException.of(ErrorCode.INVALID_ARGUMENT, String.format(format, args), name(), -1,
        call, null);
  }

  // ------------------------------------------------------------------ items

  /**
   * A find (mode null), findOrInsert or count of these keys; with a row cache, finds and
   * findOrInserts are answered from it where they can be.
   */
  ShardCalls.ReadItem<RowsRead.Result> rowsItem(String[] keys, Shard.InsertMode mode) {
    String call = mode == null ? "find" : mode.rows() ? "findOrInsert" : "count";
    PackedKeys packed = pack(keys, call);
    if (cache != null && (mode == null || (mode.rows() && !mode.frequencies()))) {
      return new CachedRowsRead(this, cache, keys, packed, mode);
    }
    return rowsRead(packed, mode);
  }

  /** A find (mode null), findOrInsert or count of these keys, from the shards. */
  RowsRead rowsRead(PackedKeys keys, Shard.InsertMode mode) {
    return new RowsRead(name(), dim, slotFloats(), keys, mode, router.map(), n(), direct,
        traffic);
  }

  /** Counts reads a row cache served: {@code occurrences[i]} of {@code keys[i]}. */
  CountFlush countItem(PackedKeys keys, long[] occurrences) {
    return new CountFlush(name(), keys, occurrences, router.map(), n());
  }

  /** Floats of optimizer slots beside each row (slots x dim). */
  int slotFloats() {
    return dim * TableConfigs.slots(config.getOptimizer());
  }

  <T> SampleRead<T> sampleItem(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed, boolean distinct) {
    return sampleItem(positives, numSampled, sampler, alpha, seed, distinct, false);
  }

  <T> SampleRead<T> sampleItem(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed, boolean distinct, boolean withSlots) {
    return sampleItem(positives, numSampled, sampler, alpha, seed, distinct, withSlots, false);
  }

  /**
   * @param withSlots with distinct draws, also the drawn keys' slots and update counts
   * @param omitRows with distinct draws, no rows (the row cache fills them)
   */
  <T> SampleRead<T> sampleItem(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed, boolean distinct, boolean withSlots, boolean omitRows) {
    PackedKeys pos = pack(positives, "sample");
    if (numSampled < 0 || numSampled > Limits.MAX_NUM_SAMPLED) {
      throw invalid("sample", "num_sampled must be in [0, %d] but was %d",
          Limits.MAX_NUM_SAMPLED, numSampled);
    }
    dev.dynembed.table.common.SlotMap map = router.map();
    if (map.epoch() != massesEpoch) { // slots moved: every shard's mass changed
      masses.clear();
      massesEpoch = map.epoch();
    }
    String id = sampler + "/" + alpha;
    int n = n();
    double[] known = masses.get(id);
    if (known != null && known.length != n) { // the client gained shards
      known = Arrays.copyOf(known, n);
    }
    return new SampleRead<>(name(), dim, slotFloats(), pos, numSampled, sampler, alpha, seed,
        distinct, withSlots, omitRows, map, n, known, reported -> masses.compute(id, (k, old) -> {
          double[] m = old == null ? new double[n] : Arrays.copyOf(old, n);
          for (int s = 0; s < n; s++) {
            if (!Double.isNaN(reported[s])) {
              m[s] = reported[s];
            }
          }
          return m;
        }), traffic);
  }

  GradientWrite gradientItem(String[] keys, float[] gradients, float learningRate, long step) {
    return gradientItem(pack(keys, "applyGradients"), gradients, learningRate, step);
  }

  GradientWrite gradientItem(PackedKeys keys, float[] gradients, float learningRate, long step) {
    return new GradientWrite(config, keys, gradients, learningRate, step, router.map(), n(),
        direct, traffic);
  }

  /** One gradient batch as write items: through the row cache when there is one. */
  Writes gradientWrites(String[] keys, float[] gradients, float learningRate, long step) {
    if (cache != null) {
      return cache.write(keys, pack(keys, "applyGradients"), gradients, learningRate, step);
    }
    GradientWrite w = gradientItem(keys, gradients, learningRate, step);
    return new Writes(List.of(w), w.result);
  }

  /**
   * The draws of a sample with their rows: with a row cache, the shards send the drawn keys
   * only and the rows come from the cache, or from a second read of the keys it lacks (made
   * after any flush in flight).
   */
  CompletableFuture<SampledRows> sampleWithRows(CompletableFuture<SampledRows> drawn,
      boolean withSlots) {
    return drawn.thenCompose(sr -> {
      CachedRowsRead rows = new CachedRowsRead(this, cache, sr.keys(), pack(sr.keys(), "sample"),
          new Shard.InsertMode(false, true, false, withSlots));
      return cache.inFlight().thenCompose(ignored -> {
        ShardCalls.read(router, List.of(rows));
        return rows.result;
      }).thenApply(r -> new SampledRows(sr.positiveProbability(), sr.keys(), r.rows(),
          sr.probability(), sr.drawIndex(), r.slots(), r.updateCounts()));
    });
  }

  /**
   * Sends every gradient and count this table's row cache holds to the shards and waits until
   * they are applied (nothing without a cache).
   */
  @Override
  public void flush() {
    if (cache != null) {
      cache.flushNow();
    }
  }

  /** A pooled find or findOrInsert of these keys. */
  PooledRead pooledItem(String[] keys, KeyBags bags, boolean insert, boolean count) {
    String call = insert ? "pooled findOrInsert" : "pooled find";
    checkBags(keys, bags, call);
    return new PooledRead(name(), dim, pack(keys, call), bags, insert, count, router.map(), n());
  }

  PooledWrite pooledGradientItem(String[] keys, KeyBags bags, float[] gradients,
      float learningRate, long step) {
    checkBags(keys, bags, "applyPooledGradients");
    return new PooledWrite(name(), dim, pack(keys, "applyPooledGradients"), bags, gradients,
        learningRate, step, router.map(), n());
  }

  /**
   * A pooled gradient spread over its keys here, for a row cache that applies per-key rows:
   * refused as the shards would refuse it (bags over another key count, a key in no bag).
   */
  float[] spreadPooled(String[] keys, KeyBags bags, float[] bagGradients) {
    checkBags(keys, bags, "applyPooledGradients");
    try {
      bags.requireAllUsed(i -> keys[i]);
    } catch (TableException e) {
      throw TableException.of(e.code(), e.getMessage(), name(), -1, "applyPooledGradients", e);
    }
    return bags.spread(bagGradients, keys.length, dim);
  }

  void checkBags(String[] keys, KeyBags bags, String call) {
    try {
      bags.requireKeys(keys.length);
    } catch (TableException e) {
      throw TableException.of(e.code(), e.getMessage(), name(), -1, call, e);
    }
  }

  private <T> T readOne(ShardCalls.ReadItem<T> item) {
    if (cache != null) {
      cache.awaitFlushed();
    }
    ShardCalls.read(router, List.of(item));
    return Futures.await(item.result);
  }

  // ------------------------------------------------------------------ EmbeddingTable

  @Override
  public float[] findOrInsert(String... keys) {
    return findOrInsert(keys, true);
  }

  @Override
  public float[] findOrInsert(String[] keys, boolean count) {
    return readOne(rowsItem(keys, new Shard.InsertMode(count, true, false))).rows();
  }

  @Override
  public KeyCounts count(String[] keys, boolean count) {
    RowsRead.Result r = readOne(rowsItem(keys, new Shard.InsertMode(count, false, true)));
    return new KeyCounts(r.found(), r.frequencies());
  }

  @Override
  public FindResult find(String... keys) {
    RowsRead.Result r = readOne(rowsItem(keys, null));
    return new FindResult(r.rows(), r.found());
  }

  @Override
  public int applyGradients(String[] keys, float[] gradients, float learningRate, long step) {
    Writes w = gradientWrites(keys, gradients, learningRate, step);
    if (!w.items().isEmpty()) {
      ShardCalls.write(router, w.items());
    }
    return Futures.await(w.result());
  }

  @Override
  public int assign(String[] keys, float[] values, long[] frequencies, long step) {
    PackedKeys packed = pack(keys, "assign");
    if (packed.size() == 0) {
      return 0;
    }
    AssignWrite w = new AssignWrite(config, packed, values, frequencies, step, router.map(), n(),
        direct, traffic);
    if (cache != null) {
      cache.invalidate(keys); // after sending what it held for them
    }
    ShardCalls.write(router, List.of(w));
    return Futures.await(w.result);
  }

  @Override
  public int reportPairs(String[] anchors, String[] partners, int[] counts, long step) {
    if (partners.length != anchors.length || counts != null && counts.length != anchors.length) {
      throw invalid("reportPairs", "%d anchors need as many partners (%d) and counts (%s)",
          anchors.length, partners.length, counts == null ? "none" : counts.length);
    }
    PackedKeys a = pack(anchors, "reportPairs");
    if (a.size() == 0) {
      return 0;
    }
    PairsWrite w = new PairsWrite(name(), a, pack(partners, "reportPairs"), counts, step,
        router.map(), n());
    ShardCalls.write(router, List.of(w));
    return Futures.await(w.result);
  }

  @Override
  public PartnerDraws partners(String[] anchors, int numDraws,
      dev.dynembed.table.v1.PartnerWeight weight, long seed) {
    PackedKeys a = pack(anchors, "partners");
    if (a.size() == 0) {
      return new PartnerDraws(new String[0], new float[0], new int[0]);
    }
    Shard.PartnersReply r = readOne(new PartnersRead(
        new Shard.Partners(name(), a, numDraws, weight, seed), router.map(), n()));
    return new PartnerDraws(r.keys().toStrings(), r.probability(), r.counts());
  }

  @Override
  public float[] pooled(String[] keys, KeyBags bags, boolean insert, boolean count) {
    if (cache != null) { // rows from the cache, pooled here: as a batch of reads does it
      ReadBatch b = new ReadBatch();
      CompletableFuture<float[]> pooled = b.pooled(this, keys, bags, insert, count);
      b.submit();
      return Futures.await(pooled);
    }
    return readOne(pooledItem(keys, bags, insert, count));
  }

  @Override
  public int applyPooledGradients(String[] keys, KeyBags bags, float[] bagGradients,
      float learningRate, long step) {
    if (cache != null) { // spread here, applied through the cache
      return applyGradients(keys, spreadPooled(keys, bags, bagGradients), learningRate, step);
    }
    PooledWrite w = pooledGradientItem(keys, bags, bagGradients, learningRate, step);
    ShardCalls.write(router, List.of(w));
    return Futures.await(w.result);
  }

  @Override
  public SampleResult sample(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    return readOne(this.<SampleResult>sampleItem(positives, numSampled, sampler, alpha, seed,
        false));
  }

  @Override
  public SampledRows sampleDistinct(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    if (cache != null) { // drawn keys there, rows here: as a batch of reads does it
      ReadBatch b = new ReadBatch();
      CompletableFuture<SampledRows> drawn = b.sampleDistinct(this, positives, numSampled,
          sampler, alpha, seed, false);
      b.submit();
      return Futures.await(drawn);
    }
    return readOne(this.<SampledRows>sampleItem(positives, numSampled, sampler, alpha, seed,
        true));
  }

  @Override
  public TopKResult topK(float[] queries, int numQueries, int k, TopKOptions options) {
    int width = options.biasLastDim() ? dim - 1 : dim;
    if (numQueries < 1 || (long) numQueries * width != queries.length) {
      throw invalid("topK", "%d queries of width %d need %d floats but %d were given",
          numQueries, width, (long) numQueries * width, queries.length);
    }
    PackedKeys exclude = pack(options.exclude().toArray(new String[0]), "topK");
    flush();
    List<CompletableFuture<Shard.TopKHitsReply>> futures = new ArrayList<>();
    for (Shard s : shards()) {
      futures.add(s.topK(name(), queries, numQueries, k, options.biasLastDim(), options.metric(),
          exclude, options.searchBreadth()));
    }
    return TopKMerge.merge(Futures.awaitAll(futures), numQueries, k);
  }

  @Override
  public CheckpointManifest save(Path directory, long step) {
    Path dir = directory.toAbsolutePath().normalize();
    flush(); // the checkpoint holds every update this process made
    List<CompletableFuture<CheckpointFile>> futures = new ArrayList<>();
    List<Shard> shards = shards();
    for (Shard s : shards) {
      futures.add(s.save(name(), dir.toString(), step));
    }
    List<CheckpointFile> files = Futures.awaitAll(futures);
    CheckpointManifest m = CheckpointManifest.newBuilder()
        .setFormatVersion(CheckpointFormat.VERSION)
        .setTable(name())
        .setConfig(config)
        .setStep(step)
        .setNumShards(shards.size())
        .addAllFiles(files)
        .setCreatedAt(Instant.now().toString())
        .build();
    Manifests.write(dir, m);
    return m;
  }

  @Override
  public long restore(Path directory) {
    Path dir = directory.toAbsolutePath().normalize();
    CheckpointManifest m = Manifests.read(dir, name());
    List<CompletableFuture<Long>> futures = new ArrayList<>();
    List<Shard> shards = shards();
    for (Shard s : shards) {
      futures.add(s.restore(name(), dir.toString(), m.getFilesList()));
    }
    long total = 0;
    for (Long k : Futures.awaitAll(futures)) {
      total += k;
    }
    long expected = m.getFilesList().stream().mapToLong(CheckpointFile::getKeys).sum();
    if (total != expected) {
      throw TableException.of(ErrorCode.DATA_LOSS, String.format(
          "restored %d keys over %d shards but the checkpoint holds %d", total, shards.size(),
          expected),
          name(), -1, "restore", null);
    }
    masses.clear(); // the restored counts define new sampler masses
    if (cache != null) {
      cache.clear();
    }
    return total;
  }

  @Override
  public long evict(long ttlSteps, long nowStep, long maxKeys,
      dev.dynembed.table.v1.EvictionPolicy policy) {
    if (ttlSteps < 0 || nowStep < 0 || maxKeys < 0 || (ttlSteps == 0 && maxKeys == 0)) {
      throw invalid("evict", "ttlSteps and maxKeys must be >= 0 and one of them > 0 (got %d"
          + " and %d; nowStep %d)", ttlSteps, maxKeys, nowStep);
    }
    int n = shards().size();
    long perShard = maxKeys == 0 ? 0 : (maxKeys + n - 1) / n;
    return evictAll(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable(name())
        .setTtlSteps(ttlSteps).setNowStep(nowStep).setMaxKeys(perShard).setPolicy(policy)
        .build());
  }

  @Override
  public void scan(int pageKeys, java.util.function.Consumer<dev.dynembed.table.client.ScanPage>
      consumer) {
    flush();
    for (Shard s : shards()) {
      long cursor = 0;
      long generation = 0;
      do {
        Shard.ScanReply r = Futures.await(s.scan(name(), cursor, pageKeys, generation));
        int n = r.keys().size();
        String[] keys = new String[n];
        for (int i = 0; i < n; i++) {
          keys[i] = r.keys().key(i);
        }
        float[] rows = n == 0 ? new float[0] : r.rows().toArray();
        if (n > 0) {
          consumer.accept(new dev.dynembed.table.client.ScanPage(keys, rows, r.frequencies(),
              r.steps()));
        }
        cursor = r.next();
        generation = r.generation();
      } while (cursor != 0);
    }
  }

  @Override
  public long remove(String... keys) {
    PackedKeys all = pack(keys, "remove");
    if (all.size() == 0) {
      return 0;
    }
    if (cache != null) {
      cache.invalidate(keys);
    }
    int n = n();
    Routing route = new Routing(all, router.map(), n);
    List<CompletableFuture<dev.dynembed.table.v1.EvictResponse>> futures = new ArrayList<>();
    for (int s = 0; s < n; s++) {
      if (route.shardKeys[s].size() > 0) {
        futures.add(router.shards().get(s).evict(dev.dynembed.table.v1.EvictRequest.newBuilder()
            .setTable(name()).setKeys(route.shardKeys[s].toProto()).build()));
      }
    }
    return evicted(futures);
  }

  @Override
  public List<dev.dynembed.table.v1.IndexInfo> buildIndex(dev.dynembed.table.v1.Metric metric,
      boolean biasLastDim, int maxConn, int beamWidth, boolean wait) {
    if (maxConn < 0 || beamWidth < 0) {
      throw invalid("buildIndex", "maxConn and beamWidth must be >= 0 (0: the default) but were"
          + " %d and %d", maxConn, beamWidth);
    }
    dev.dynembed.table.v1.BuildIndexRequest req = dev.dynembed.table.v1.BuildIndexRequest
        .newBuilder().setTable(name()).setMetric(metric == null
            ? dev.dynembed.table.v1.Metric.DOT : metric).setBiasLastDim(biasLastDim)
        .setMaxConn(maxConn).setBeamWidth(beamWidth).setWait(wait).build();
    List<CompletableFuture<dev.dynembed.table.v1.IndexInfo>> futures = new ArrayList<>();
    for (Shard s : shards()) {
      futures.add(s.buildIndex(req));
    }
    return Futures.awaitAll(futures);
  }

  private long evictAll(dev.dynembed.table.v1.EvictRequest req) {
    flush();
    List<CompletableFuture<dev.dynembed.table.v1.EvictResponse>> futures = new ArrayList<>();
    for (Shard s : shards()) {
      futures.add(s.evict(req));
    }
    long evicted = evicted(futures);
    masses.clear(); // the samplers' masses change with the keys
    return evicted;
  }

  /** Rows evicted over the shards that answered these calls. */
  private static long evicted(List<CompletableFuture<dev.dynembed.table.v1.EvictResponse>> calls) {
    long evicted = 0;
    for (var r : Futures.awaitAll(calls)) {
      evicted += r.getEvicted();
    }
    return evicted;
  }

  @Override
  public TableInfo describe() {
    return sum(describeShards());
  }

  private List<TableInfo> describeShards() {
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>();
    for (Shard s : shards()) {
      futures.add(s.describe(name()));
    }
    return Futures.awaitAll(futures);
  }

  @Override
  public List<dev.dynembed.table.v1.IndexInfo> indexInfo() {
    List<dev.dynembed.table.v1.IndexInfo> out = new ArrayList<>();
    for (TableInfo i : describeShards()) {
      out.add(i.getIndex());
    }
    return out;
  }

  static TableInfo sum(List<TableInfo> infos) {
    TableCounters.Builder c = TableCounters.newBuilder();
    boolean full = false; // a shard admits no key: the strictest count there is
    for (TableInfo i : infos) {
      TableCounters x = i.getCounters();
      full |= x.getAdmissionCount() == 0 && i.getConfig().hasAdmissionPressure();
      c.setAdmissionCount(Math.max(c.getAdmissionCount(), x.getAdmissionCount()))
          .setMemoryPressure(Math.max(c.getMemoryPressure(), x.getMemoryPressure()));
      c.setKeys(c.getKeys() + x.getKeys())
          .setBytesUsed(c.getBytesUsed() + x.getBytesUsed())
          .setBytesRaw(c.getBytesRaw() + x.getBytesRaw())
          .setTotalFrequency(c.getTotalFrequency() + x.getTotalFrequency())
          .setUpdates(c.getUpdates() + x.getUpdates())
          .setPendingKeys(c.getPendingKeys() + x.getPendingKeys())
          .setColdKeys(c.getColdKeys() + x.getColdKeys())
          .setPromotions(c.getPromotions() + x.getPromotions())
          .setDemotions(c.getDemotions() + x.getDemotions())
          .setIndexBytes(c.getIndexBytes() + x.getIndexBytes())
          .setWrittenBehind(c.getWrittenBehind() + x.getWrittenBehind())
          .setLastFlushKeys(c.getLastFlushKeys() + x.getLastFlushKeys())
          .setFrozenKeys(c.getFrozenKeys() + x.getFrozenKeys())
          .setGradientNormSum(c.getGradientNormSum() + x.getGradientNormSum())
          .setPairsCounted(c.getPairsCounted() + x.getPairsCounted())
          .setPairsDropped(c.getPairsDropped() + x.getPairsDropped())
          .setPairAnchors(c.getPairAnchors() + x.getPairAnchors())
          .setLastStep(Math.max(c.getLastStep(), x.getLastStep()));
    }
    if (full) {
      c.setAdmissionCount(0);
    }
    return TableInfo.newBuilder().setConfig(infos.get(0).getConfig()).setShardIndex(0)
        .setNumShards(infos.size()).setCounters(c).build();
  }
}
