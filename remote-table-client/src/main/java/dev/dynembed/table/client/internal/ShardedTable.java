package dev.dynembed.table.client.internal;

import com.google.protobuf.util.JsonFormat;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.client.SampleResult;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.server.CheckpointIo;
import dev.dynembed.table.server.SampleCandidates;
import dev.dynembed.table.server.TopKHits;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import dev.dynembed.table.v1.TableInfo;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;

/**
 * A table over N shards (N = 1 for the in-process table): de-duplicate, partition by {@code
 * shardOf(key)}, call the shards in parallel, stitch the replies back in request order. For the
 * in-process shard the batch goes through unchanged (the engine de-duplicates and counts itself,
 * and there are no bytes to save); remote shards get each distinct key once, with its count.
 */
public final class ShardedTable implements EmbeddingTable {
  private final TableConfig config;
  private final List<Shard> shards;
  private final int n;
  private final int dim;
  /** Last known sampler mass per shard, per sampler and alpha. */
  private final ConcurrentHashMap<String, double[]> masses = new ConcurrentHashMap<>();

  ShardedTable(TableConfig config, List<Shard> shards) {
    this.config = config;
    this.shards = shards;
    this.n = shards.size();
    this.dim = config.getDim();
    this.direct = n == 1 && shards.get(0) instanceof LocalShard;
  }

  /** Whether calls go straight to a single in-process shard. */
  private final boolean direct;

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

  @Override
  public float[] findOrInsert(String... keys) {
    return findOrInsert(keys, true);
  }

  @Override
  public float[] findOrInsert(String[] keys, boolean count) {
    float[] out = new float[keys.length * dim];
    findOrInsert(keys, new Shard.InsertMode(count, true, false), out, null, null);
    return out;
  }

  @Override
  public KeyCounts count(String[] keys, boolean count) {
    boolean[] admitted = new boolean[keys.length];
    long[] freqs = new long[keys.length];
    findOrInsert(keys, new Shard.InsertMode(count, false, true), null, admitted, freqs);
    return new KeyCounts(admitted, freqs);
  }

  private void findOrInsert(String[] keys, Shard.InsertMode mode, float[] out,
      boolean[] admitted, long[] freqs) {
    PackedKeys pk = pack(keys, mode.rows() ? "findOrInsert" : "count");
    if (direct || pk.size() == 0) {
      Shard.RowsReply r = await(shards.get(0).findOrInsert(name(), pk, null, mode));
      if (out != null) {
        r.rows().get(0, out, 0, out.length);
      }
      for (int i = 0; admitted != null && i < admitted.length; i++) {
        admitted[i] = (r.found()[i >>> 3] & (1 << (i & 7))) != 0;
      }
      if (freqs != null) {
        System.arraycopy(r.frequencies(), 0, freqs, 0, freqs.length);
      }
      return;
    }
    Routing route = new Routing(pk, n);
    List<CompletableFuture<Shard.RowsReply>> futures = new ArrayList<>(n);
    for (int s = 0; s < n; s++) {
      futures.add(route.shardKeys[s].size() == 0 ? null
          : shards.get(s).findOrInsert(name(), route.shardKeys[s], route.occurrences(s), mode));
    }
    List<Shard.RowsReply> replies = awaitAll(futures);
    stitch(route, replies, out, admitted);
    if (freqs != null) {
      for (int i = 0; i < route.keys.size(); i++) {
        int u = route.dedup.uniqueOf(i);
        freqs[i] = replies.get(route.shardOfUnique[u]).frequencies()[route.posInShard[u]];
      }
    }
  }

  @Override
  public FindResult find(String... keys) {
    PackedKeys pk = pack(keys, "find");
    float[] out = new float[keys.length * dim];
    boolean[] found = new boolean[keys.length];
    if (direct || pk.size() == 0) {
      Shard.RowsReply r = await(shards.get(0).find(name(), pk));
      r.rows().get(0, out, 0, out.length);
      for (int i = 0; i < found.length; i++) {
        found[i] = (r.found()[i >>> 3] & (1 << (i & 7))) != 0;
      }
      return new FindResult(out, found);
    }
    Routing route = new Routing(pk, n);
    List<CompletableFuture<Shard.RowsReply>> futures = new ArrayList<>(n);
    for (int s = 0; s < n; s++) {
      futures.add(route.shardKeys[s].size() == 0 ? null
          : shards.get(s).find(name(), route.shardKeys[s]));
    }
    stitch(route, awaitAll(futures), out, found);
    return new FindResult(out, found);
  }

  private void stitch(Routing route, List<Shard.RowsReply> replies, float[] out, boolean[] found) {
    for (int i = 0; i < route.keys.size(); i++) {
      int u = route.dedup.uniqueOf(i);
      int s = route.shardOfUnique[u];
      int p = route.posInShard[u];
      Shard.RowsReply r = replies.get(s);
      if (out != null) {
        r.rows().get(p * dim, out, i * dim, dim);
      }
      if (found != null) {
        found[i] = (r.found()[p >>> 3] & (1 << (p & 7))) != 0;
      }
    }
  }

  @Override
  public int applyGradients(String[] keys, float[] gradients, float learningRate, long step) {
    PackedKeys pk = pack(keys, "applyGradients");
    if (direct || pk.size() == 0) { // one shard checks the whole batch before applying any of it
      return await(shards.get(0).applyGradients(name(), pk, gradients, learningRate, step));
    }
    // several shards: check here everything a shard could refuse, so that none applies a part
    if ((long) keys.length * dim != gradients.length) {
      throw invalid("applyGradients", "table '%s' expects gradients of %d keys x dim %d = %d"
          + " floats but the request had %d floats", name(), keys.length, dim,
          (long) keys.length * dim, gradients.length);
    }
    int k = FloatKernels.firstNonFinite(gradients, 0, gradients.length);
    if (k >= 0) {
      throw invalid("applyGradients", "gradient of key %d ('%s') column %d is %s; nothing was"
          + " applied", k / dim, keys[k / dim], k % dim, gradients[k]);
    }
    for (int i = 0; i < pk.size(); i++) {
      if (pk.length(i) == 0 || pk.length(i) > config.getMaxKeyBytes()) {
        throw invalid("applyGradients", "key %d is %d bytes long; keys must be 1..%d bytes (the"
            + " table's max_key_bytes); nothing was applied", i, pk.length(i),
            config.getMaxKeyBytes());
      }
    }
    if (!(learningRate >= 0f && Float.isFinite(learningRate))) {
      throw invalid("applyGradients", "learning_rate must be >= 0 (0 = the table's) but was %s",
          learningRate);
    }
    Routing route = new Routing(pk, n);
    List<CompletableFuture<Integer>> futures = new ArrayList<>(n);
    for (int s = 0; s < n; s++) {
      futures.add(route.shardKeys[s].size() == 0 ? null
          : shards.get(s).applyGradients(name(), route.shardKeys[s],
              route.gradients(s, gradients, dim), learningRate, step));
    }
    int total = 0;
    for (Integer c : awaitAll(futures)) {
      total += c == null ? 0 : c;
    }
    return total;
  }

  /** The shards' replies to one sample call, and how the draws were split over them. */
  private record Draws(PackedKeys pos, int[] posShard, int[] posIndex, int[] positivesOf,
      double[] share, int[] choice, List<SampleCandidates> replies) {}

  private Draws draw(String[] positives, int numSampled, SamplerKind sampler, float alpha,
      long seed, boolean distinct) {
    PackedKeys pos = pack(positives, "sample");
    if (numSampled < 0 || numSampled > Limits.MAX_NUM_SAMPLED) {
      throw invalid("sample", "num_sampled must be in [0, %d] but was %d",
          Limits.MAX_NUM_SAMPLED, numSampled);
    }
    String id = sampler + "/" + alpha;
    double[] mass = masses.get(id);
    if (mass == null) { // first call: ask every shard for its mass
      List<CompletableFuture<SampleCandidates>> probes = new ArrayList<>(n);
      for (Shard s : shards) {
        probes.add(s.sample(name(), PackedKeys.of(), 0, sampler, alpha, seed, false));
      }
      List<SampleCandidates> r = awaitAll(probes);
      mass = new double[n];
      for (int s = 0; s < n; s++) {
        mass[s] = r.get(s).mass();
      }
    }
    double total = Arrays.stream(mass).sum();
    if (numSampled > 0 && !(total > 0)) {
      throw TableException.of(ErrorCode.FAILED_PRECONDITION,
          "no key has sampling weight, so nothing can be drawn", name(), -1, "sample", null);
    }
    double[] share = new double[n];
    for (int s = 0; s < n; s++) {
      share[s] = total > 0 ? mass[s] / total : (n == 1 ? 1 : 0);
    }
    // each draw picks its shard with the shards' shares (multinomial); draw j is then taken from
    // that shard's replies in order, so draws stay exchangeable (a caller slicing them, e.g. S per
    // example, gets every slice from every shard, not the first slices from shard 0)
    int[] draws = new int[n];
    int[] choice = new int[numSampled];
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int j = 0; j < numSampled; j++) {
      double u = rnd.nextDouble();
      int s = 0;
      while (s < n - 1 && (u -= share[s]) >= 0) {
        s++;
      }
      choice[j] = s;
      draws[s]++;
    }
    // positives go to their owners; remember where each came from
    int[] posShard = new int[pos.size()];
    int[] posIndex = new int[pos.size()];
    PackedKeys.Builder[] pb = new PackedKeys.Builder[n];
    for (int s = 0; s < n; s++) {
      pb[s] = new PackedKeys.Builder(pos.size() / n + 1);
    }
    for (int i = 0; i < pos.size(); i++) {
      int s = n == 1 ? 0 : KeyHashing.shardOf(pos.hash(i), n);
      posShard[i] = s;
      posIndex[i] = pb[s].size();
      pb[s].add(pos, i);
    }
    List<CompletableFuture<SampleCandidates>> futures = new ArrayList<>(n);
    int[] positivesOf = new int[n];
    for (int s = 0; s < n; s++) {
      positivesOf[s] = pb[s].size();
      boolean idle = draws[s] == 0 && pb[s].size() == 0;
      futures.add(idle ? null : shards.get(s).sample(name(), pb[s].build(), draws[s], sampler,
          alpha, seed + 0x632BE59BD9B4E019L * (s + 1), distinct));
    }
    List<SampleCandidates> replies = awaitAll(futures);
    double[] fresh = mass.clone();
    for (int s = 0; s < n; s++) {
      if (replies.get(s) != null) {
        fresh[s] = replies.get(s).mass();
      }
    }
    masses.put(id, fresh);
    return new Draws(pos, posShard, posIndex, positivesOf, share, choice, replies);
  }

  @Override
  public SampleResult sample(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    Draws d = draw(positives, numSampled, sampler, alpha, seed, false);
    int np = d.pos().size();
    String[] keys = new String[np + numSampled];
    boolean[] positive = new boolean[keys.length];
    double[] prob = new double[keys.length];
    for (int i = 0; i < np; i++) {
      keys[i] = positives[i];
      positive[i] = true;
      prob[i] = d.share()[d.posShard()[i]]
          * d.replies().get(d.posShard()[i]).probability()[d.posIndex()[i]];
    }
    int[] next = d.positivesOf().clone(); // a shard's draws follow its positives
    for (int j = 0; j < numSampled; j++) {
      int s = d.choice()[j];
      SampleCandidates r = d.replies().get(s);
      keys[np + j] = r.keys().key(next[s]);
      prob[np + j] = d.share()[s] * r.probability()[next[s]];
      next[s]++;
    }
    return new SampleResult(keys, positive, prob, np);
  }

  @Override
  public SampledRows sampleDistinct(String[] positives, int numSampled, SamplerKind sampler,
      float alpha, long seed) {
    Draws d = draw(positives, numSampled, sampler, alpha, seed, true);
    int np = d.pos().size();
    double[] posProb = new double[np];
    for (int i = 0; i < np; i++) {
      posProb[i] = d.share()[d.posShard()[i]]
          * d.replies().get(d.posShard()[i]).probability()[d.posIndex()[i]];
    }
    // the shards' distinct keys are disjoint (each key lives on one shard): concatenate them
    int[] offset = new int[n];
    int u = 0;
    for (int s = 0; s < n; s++) {
      SampleCandidates r = d.replies().get(s);
      offset[s] = u;
      u += r == null ? 0 : r.keys().size() - d.positivesOf()[s];
    }
    String[] keys = new String[u];
    double[] prob = new double[u];
    float[] rows = new float[u * dim];
    for (int s = 0; s < n; s++) {
      SampleCandidates r = d.replies().get(s);
      if (r == null) {
        continue;
      }
      int p = d.positivesOf()[s];
      for (int i = p; i < r.keys().size(); i++) {
        keys[offset[s] + i - p] = r.keys().key(i);
        prob[offset[s] + i - p] = d.share()[s] * r.probability()[i];
      }
      System.arraycopy(r.rows(), 0, rows, offset[s] * dim, r.rows().length);
    }
    int[] drawIndex = new int[numSampled];
    int[] next = new int[n];
    for (int j = 0; j < numSampled; j++) {
      int s = d.choice()[j];
      drawIndex[j] = offset[s] + d.replies().get(s).drawIndex()[next[s]++];
    }
    return new SampledRows(posProb, keys, rows, prob, drawIndex);
  }

  @Override
  public TopKResult topK(float[] queries, int numQueries, int k, TopKOptions options) {
    int width = options.biasLastDim() ? dim - 1 : dim;
    if (numQueries < 1 || (long) numQueries * width != queries.length) {
      throw invalid("topK", "%d queries of width %d need %d floats but %d were given",
          numQueries, width, (long) numQueries * width, queries.length);
    }
    PackedKeys exclude = pack(options.exclude().toArray(new String[0]), "topK");
    List<CompletableFuture<TopKHits>> futures = new ArrayList<>(n);
    for (Shard s : shards) {
      futures.add(s.topK(name(), queries, numQueries, k, options.biasLastDim(), options.metric(),
          exclude));
    }
    List<TopKHits> replies = awaitAll(futures);
    String[][] keys = new String[numQueries][];
    float[][] scores = new float[numQueries][];
    int[] cursor = new int[n];
    record Hit(String key, float score) {}
    Comparator<Hit> order = Comparator.comparingDouble((Hit h) -> -h.score())
        .thenComparing(Hit::key);
    for (int q = 0; q < numQueries; q++) {
      List<Hit> all = new ArrayList<>();
      for (int s = 0; s < n; s++) {
        TopKHits r = replies.get(s);
        int c = r.counts()[q];
        for (int j = 0; j < c; j++) {
          all.add(new Hit(r.keys().key(cursor[s] + j), r.scores()[cursor[s] + j]));
        }
        cursor[s] += c;
      }
      all.sort(order);
      int m = Math.min(k, all.size());
      keys[q] = new String[m];
      scores[q] = new float[m];
      for (int j = 0; j < m; j++) {
        keys[q][j] = all.get(j).key();
        scores[q][j] = all.get(j).score();
      }
    }
    return new TopKResult(keys, scores);
  }

  static Path manifestPath(Path dir, String table) {
    return dir.resolve(table + ".manifest.json");
  }

  @Override
  public CheckpointManifest save(Path directory, long step) {
    Path dir = directory.toAbsolutePath().normalize();
    List<CompletableFuture<CheckpointFile>> futures = new ArrayList<>(n);
    for (Shard s : shards) {
      futures.add(s.save(name(), dir.toString(), step));
    }
    List<CheckpointFile> files = awaitAll(futures);
    CheckpointManifest m = CheckpointManifest.newBuilder()
        .setFormatVersion(CheckpointIo.FORMAT_VERSION)
        .setTable(name())
        .setConfig(config)
        .setStep(step)
        .setNumShards(n)
        .addAllFiles(files)
        .setCreatedAt(Instant.now().toString())
        .build();
    Path target = manifestPath(dir, name());
    Path tmp = dir.resolve(target.getFileName() + ".tmp");
    try {
      Files.writeString(tmp, JsonFormat.printer().print(m) + "\n", StandardCharsets.UTF_8);
      Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw TableException.of(ErrorCode.INTERNAL, "writing manifest " + target + " failed: " + e,
          name(), -1, "save", e);
    }
    return m;
  }

  /** Reads and checks a manifest. */
  /** The manifest of a table's checkpoint in {@code dir}, checked for consistency. */
  public static CheckpointManifest readManifest(Path dir, String table) {
    Path p = manifestPath(dir, table);
    try {
      CheckpointManifest.Builder b = CheckpointManifest.newBuilder();
      JsonFormat.parser().merge(Files.readString(p, StandardCharsets.UTF_8), b);
      CheckpointManifest m = b.build();
      if (m.getFormatVersion() != CheckpointIo.FORMAT_VERSION) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format(
            "manifest %s has format version %d; this build reads %d", p, m.getFormatVersion(),
            CheckpointIo.FORMAT_VERSION), table, -1, "restore", null);
      }
      if (!m.getTable().equals(table) || m.getFilesCount() != m.getNumShards()
          || m.getFilesCount() == 0) {
        throw TableException.of(ErrorCode.DATA_LOSS, String.format(
            "manifest %s is inconsistent (table '%s', %d files for %d shards)", p, m.getTable(),
            m.getFilesCount(), m.getNumShards()), table, -1, "restore", null);
      }
      return m;
    } catch (NoSuchFileException e) {
      throw TableException.of(ErrorCode.DATA_LOSS, "no checkpoint manifest " + p
          + " (not a checkpoint directory of this table, or its save did not finish)", table, -1,
          "restore", e);
    } catch (IOException e) {
      throw TableException.of(ErrorCode.DATA_LOSS, "manifest " + p + " cannot be read: "
          + e.getMessage(), table, -1, "restore", e);
    }
  }

  @Override
  public long restore(Path directory) {
    Path dir = directory.toAbsolutePath().normalize();
    CheckpointManifest m = readManifest(dir, name());
    List<CompletableFuture<Long>> futures = new ArrayList<>(n);
    for (Shard s : shards) {
      futures.add(s.restore(name(), dir.toString(), m.getFilesList()));
    }
    long total = 0;
    for (Long k : awaitAll(futures)) {
      total += k;
    }
    long expected = m.getFilesList().stream().mapToLong(CheckpointFile::getKeys).sum();
    if (total != expected) {
      throw TableException.of(ErrorCode.DATA_LOSS, String.format(
          "restored %d keys over %d shards but the checkpoint holds %d", total, n, expected),
          name(), -1, "restore", null);
    }
    return total;
  }

  @Override
  public TableInfo describe() {
    List<CompletableFuture<TableInfo>> futures = new ArrayList<>(n);
    for (Shard s : shards) {
      futures.add(s.describe(name()));
    }
    List<TableInfo> infos = awaitAll(futures);
    return sum(infos);
  }

  static TableInfo sum(List<TableInfo> infos) {
    TableCounters.Builder c = TableCounters.newBuilder();
    for (TableInfo i : infos) {
      TableCounters x = i.getCounters();
      c.setKeys(c.getKeys() + x.getKeys())
          .setBytesUsed(c.getBytesUsed() + x.getBytesUsed())
          .setBytesRaw(c.getBytesRaw() + x.getBytesRaw())
          .setTotalFrequency(c.getTotalFrequency() + x.getTotalFrequency())
          .setUpdates(c.getUpdates() + x.getUpdates())
          .setPendingKeys(c.getPendingKeys() + x.getPendingKeys())
          .setLastStep(Math.max(c.getLastStep(), x.getLastStep()));
    }
    return TableInfo.newBuilder().setConfig(infos.get(0).getConfig()).setShardIndex(0)
        .setNumShards(infos.size()).setCounters(c).build();
  }

  static <T> T await(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException | CompletionException e) {
      Throwable c = e.getCause();
      if (c instanceof TableException te) {
        throw te;
      }
      throw new TableException(ErrorCode.INTERNAL, "unexpected failure: " + c, c);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TableException(ErrorCode.UNAVAILABLE, "interrupted while waiting for a shard", e);
    }
  }

  /** Waits for every future (nulls stay null); throws the first failure by shard order. */
  static <T> List<T> awaitAll(List<CompletableFuture<T>> futures) {
    List<T> out = new ArrayList<>(futures.size());
    TableException first = null;
    for (CompletableFuture<T> f : futures) {
      if (f == null) {
        out.add(null);
        continue;
      }
      try {
        out.add(await(f));
      } catch (TableException e) {
        if (first == null) {
          first = e;
        }
        out.add(null);
      }
    }
    if (first != null) {
      throw first;
    }
    return out;
  }
}
