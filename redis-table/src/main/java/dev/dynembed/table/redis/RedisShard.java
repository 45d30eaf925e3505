package dev.dynembed.table.redis;

import dev.dynembed.table.client.spi.ReplyRows;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.BatchDedup;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.GradientChecks;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.CheckpointIo;
import dev.dynembed.table.engine.RedisConnections;
import dev.dynembed.table.engine.SampleCandidates;
import dev.dynembed.table.engine.Scans;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.engine.TopK;
import dev.dynembed.table.engine.TopKHits;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.EvictRequest;
import dev.dynembed.table.v1.EvictResponse;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import dev.dynembed.table.v1.TableInfo;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.params.SetParams;

/**
 * Tables stored in Redis, one node or a Cluster, as one {@link Shard} of a sharded client: the
 * "storage doesn't optimize" design (docs/design/0014-storage-tiers.md). Redis holds the rows,
 * their optimizer slots and the admission counts ({@link RedisLayout}); this class reads them,
 * runs the table's optimizer here and writes the rows back. Each call is one or two pipelined
 * round trips (a Cluster's pipeline groups the commands per node).
 *
 * <p>Concurrency: a read-modify-write of a row is not atomic. Two clients (or two threads) that
 * update one key at once may lose one update, last writer wins: the cost the design accepts, as
 * Hogwild accepts races. Counts ({@code INCRBY}) and row creation ({@code SET NX}) are atomic, so
 * every client sees one initial row per key and exact frequencies.
 *
 * <p>Sampling draws from a snapshot of the keys and their frequencies, built by a scan of Redis
 * and rebuilt when older than its refresh period; the drawn keys' rows are read fresh. Top-k,
 * checkpoints and scans read the whole table into an engine store first: a full scan of Redis per
 * call, with the table in this process's memory meanwhile.
 */
public final class RedisShard implements Shard {
  private static final SetParams NX = SetParams.setParams().nx();
  /** Commands per pipeline flush: bounds the replies held at once. */
  private static final int PIPELINE = 4096;

  private final UnifiedJedis redis;
  private final String address;
  private final long samplerRefreshNanos;
  private final ConcurrentHashMap<String, RedisTable> tables = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, TableStore> scans = new ConcurrentHashMap<>();

  /**
   * @param redis a pooled client of one node or a Cluster; closed with this shard
   * @param address what error messages call it ({@code redis://host:port})
   * @param samplerRefreshMillis the least age of a sampling snapshot before it is rebuilt
   */
  public RedisShard(UnifiedJedis redis, String address, long samplerRefreshMillis) {
    this.redis = redis;
    this.address = address;
    this.samplerRefreshNanos = samplerRefreshMillis * 1_000_000L;
  }

  @Override
  public int index() {
    return 0;
  }

  // ------------------------------------------------------------------ calls and errors

  private <T> CompletableFuture<T> call(String call, String table, Supplier<T> body) {
    try {
      return CompletableFuture.completedFuture(body.get());
    } catch (TableException e) {
      return CompletableFuture.failedFuture(
          TableException.of(e.code(), e.getMessage(), table, 0, call, e));
    } catch (JedisException e) {
      return CompletableFuture.failedFuture(TableException.of(ErrorCode.UNAVAILABLE,
          String.format("Redis at %s failed: %s", address, e.getMessage()), table, 0, call, e));
    }
  }

  /** The table's config and helpers, read from Redis on first use. */
  private RedisTable table(String name) {
    RedisTable t = tables.get(name);
    if (t != null) {
      return t;
    }
    byte[] c = redis.get(RedisLayout.configKey(name));
    if (c == null) {
      throw TableException.notFound(name);
    }
    t = new RedisTable(RedisLayout.parseConfig(name, c));
    RedisTable prev = tables.putIfAbsent(name, t);
    return prev != null ? prev : t;
  }

  // ------------------------------------------------------------------ tables

  @Override
  public CompletableFuture<TableInfo> create(TableConfig requested) {
    return call("createTable", requested.getName(), () -> {
      TableConfig config = TableConfigs.normalize(requested);
      RedisTable.checkSupported(config);
      byte[] key = RedisLayout.configKey(config.getName());
      String set = redis.set(key, config.toByteArray(), NX);
      if (set == null) { // exists: same config opens it
        byte[] existing = redis.get(key);
        TableConfig have = existing == null ? null
            : RedisLayout.parseConfig(config.getName(), existing);
        if (have != null && !have.equals(config)) {
          throw new TableException(ErrorCode.ALREADY_EXISTS, String.format("table '%s' already"
              + " exists in Redis at %s with a different config (existing: %s; requested: %s)",
              config.getName(), address, RedisLayout.oneLine(have), RedisLayout.oneLine(config)));
        }
      }
      tables.remove(config.getName());
      return info(table(config.getName()), false);
    });
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table, () -> {
      tables.remove(table); // another client may have dropped or re-created it
      return info(table(table), true);
    });
  }

  @Override
  public CompletableFuture<Void> drop(String table) {
    return call("dropTable", table, () -> {
      table(table);
      deleteData(table);
      redis.del(RedisLayout.configKey(table));
      tables.remove(table);
      scans.remove(table);
      return null;
    });
  }

  /** Deletes the table's rows and counts (its config stays). */
  private void deleteData(String table) {
    List<byte[]> batch = new ArrayList<>(PIPELINE);
    for (byte[] pattern : new byte[][] {RedisLayout.rowPattern(table),
        RedisLayout.countPattern(table)}) {
      RedisConnections.scanKeys(redis, pattern, key -> {
        batch.add(key);
        if (batch.size() == PIPELINE) {
          unlink(batch);
          batch.clear();
        }
      });
    }
    batch.add(RedisLayout.statsKey(table));
    unlink(batch);
  }

  private void unlink(List<byte[]> keys) {
    if (keys.isEmpty()) {
      return;
    }
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (byte[] k : keys) {
        p.unlink(k);
      }
      p.sync();
    }
  }

  private TableInfo info(RedisTable t, boolean counted) {
    return TableInfo.newBuilder().setConfig(t.config()).setShardIndex(0).setNumShards(1)
        .setCounters(counted ? t.counters(redis) : TableCounters.getDefaultInstance()).build();
  }

  @Override
  public CompletableFuture<StatsResponse> stats() {
    return call("stats", null, () -> {
      StatsResponse.Builder s = StatsResponse.newBuilder().setShardIndex(0).setNumShards(1);
      List<String> names = new ArrayList<>();
      RedisConnections.scanKeys(redis, RedisLayout.configPattern(), k -> names.add(
          RedisLayout.tableOfConfigKey(k)));
      for (String n : names) {
        try {
          s.addTables(info(table(n), true));
        } catch (TableException dropped) {
          // dropped meanwhile
        }
      }
      return s.build();
    });
  }

  // ------------------------------------------------------------------ reads

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items) {
    String table = items.isEmpty() ? null : items.get(0).table();
    return call(items.size() == 1 ? Shard.callName(items.get(0)) : "read", table,
        () -> Shard.answer(items, this::find, this::findOrInsert, this::pooled, this::sample));
  }

  private RowsReply find(Find f) {
    RedisTable t = table(f.table());
    Records r = t.read(redis, f.keys(), null, false, false);
    return new RowsReply(ReplyRows.of(r.rows(t), t.dim()), r.found(), null, null, null);
  }

  private RowsReply findOrInsert(FindOrInsert f) {
    RedisTable t = table(f.table());
    Records r = t.read(redis, f.keys(), f.occurrences(), f.mode().count(), true);
    boolean slots = f.mode().slots() && t.slotFloats() > 0;
    return new RowsReply(f.mode().rows() ? ReplyRows.of(r.rows(t), t.dim()) : null, r.found(),
        f.mode().frequencies() ? r.counts() : null,
        slots ? ReplyRows.of(r.slots(t), t.slotFloats()) : null,
        f.mode().slots() ? r.updates() : null);
  }

  private PooledReply pooled(Pooled p) {
    RedisTable t = table(p.table());
    int[] occurrences = p.insert() && p.count() ? p.bags().occurrences(p.keys().size()) : null;
    Records r = t.read(redis, p.keys(), occurrences, p.insert() && p.count(), p.insert());
    return new PooledReply(ReplyRows.of(p.bags().pool(r.rows(t), t.dim()), t.dim()), r.found());
  }

  private SampleReply sample(Sample s) {
    RedisTable t = table(s.table());
    TableStore snapshot = t.samplingSnapshot(redis, samplerRefreshNanos);
    SampleCandidates c = snapshot.sample(s.positives(), s.numSampled(), s.sampler(), s.alpha(),
        s.seed(), s.distinct(), s.noneIfEmpty());
    ReplyRows rows = null;
    ReplyRows slots = null;
    long[] updates = null;
    if (c.drawIndex() != null && !s.omitRows()) { // the rows as they are now, not as sampled
      int np = s.positives().size();
      PackedKeys.Builder drawn = new PackedKeys.Builder(c.distinctCount());
      for (int i = 0; i < c.distinctCount(); i++) {
        drawn.add(c.keys(), np + i);
      }
      Records r = t.read(redis, drawn.build(), null, false, false);
      rows = ReplyRows.of(r.rows(t), t.dim());
      if (s.withSlots()) {
        slots = t.slotFloats() == 0 ? null : ReplyRows.of(r.slots(t), t.slotFloats());
        updates = r.updates();
      }
    }
    return new SampleReply(c.keys(), c.positive(), c.probability(), c.mass(), c.numKeys(), rows,
        c.drawIndex(), slots, updates);
  }

  // ------------------------------------------------------------------ writes

  @Override
  public CompletableFuture<int[]> write(List<Write> items) {
    String table = items.isEmpty() ? null : items.get(0).table();
    return call("applyGradients", table, () -> {
      // every batch is checked before any is applied, as a table shard does
      List<RedisTable> ts = new ArrayList<>(items.size());
      List<float[]> grads = new ArrayList<>(items.size());
      for (Write w : items) {
        RedisTable t = table(w.table());
        if (w.assign() != null) {
          throw TableException.invalid("table '%s': the Redis backend does not assign rows (no"
              + " import into it; import into a table shard, whose Redis tier keeps them);"
              + " nothing was applied", t.name());
        }
        if (w.pairs() != null) {
          throw TableException.invalid("table '%s': the Redis backend keeps no co-occurrence"
              + " counts; nothing was applied", t.name());
        }
        float[] g = w.gradients();
        if (w.bags() != null) {
          w.bags().requireKeys(w.keys().size());
          GradientChecks.check(t.name(), w.keys(), t.dim(), t.config().getMaxKeyBytes(),
              new float[0], w.learningRate()); // keys and rate; the bag rows next
          if ((long) w.bags().bags() * t.dim() != g.length) {
            throw TableException.invalid("table '%s' expects %d bag gradients x dim %d = %d"
                + " floats but the request had %d; nothing was applied", t.name(),
                w.bags().bags(), t.dim(), (long) w.bags().bags() * t.dim(), g.length);
          }
          g = w.bags().spread(g, w.keys().size(), t.dim());
        }
        GradientChecks.check(t.name(), w.keys(), t.dim(), t.config().getMaxKeyBytes(), g,
            w.learningRate());
        if (!BatchDedup.of(w.keys()).allDistinct()) {
          throw TableException.invalid("table '%s': a write's keys must be distinct (the client"
              + " sums duplicates); nothing was applied", t.name());
        }
        ts.add(t);
        grads.add(g);
      }
      int[] updated = new int[items.size()];
      for (int i = 0; i < updated.length; i++) {
        Write w = items.get(i);
        updated[i] = ts.get(i).apply(redis, w.keys(), grads.get(i), w.learningRate(), w.step());
      }
      return updated;
    });
  }

  // ------------------------------------------------------------------ whole-table calls

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, PackedKeys exclude) {
    return call("topK", table, () -> {
      TableStore all = table(table).materialize(redis, false);
      TopKHits h = TopK.run(all, queries, numQueries, k, biasLastDim, metric, exclude);
      return new TopKHitsReply(h.keys(), h.scores(), h.counts());
    });
  }

  @Override
  public CompletableFuture<CheckpointFile> save(String table, String directory, long step) {
    return call("save", table, () -> {
      TableStore all = table(table).materialize(redis, true);
      try {
        return CheckpointIo.write(all.freeze(), Path.of(directory).toAbsolutePath(), step);
      } catch (IOException e) {
        throw new TableException(ErrorCode.INTERNAL, String.format("table '%s': writing"
            + " checkpoint '%s' failed (%s)", table, directory, e.getMessage()));
      }
    });
  }

  /**
   * Replaces the table's rows and counts with a checkpoint's. The checkpoint is read and verified
   * whole first (a corrupt one changes nothing); the replacement itself is not atomic in Redis:
   * clients must not train the table meanwhile.
   */
  @Override
  public CompletableFuture<Long> restore(String table, String directory,
      List<CheckpointFile> files) {
    return call("restore", table, () -> {
      RedisTable t = table(table);
      TableStore fresh = CheckpointIo.read(Path.of(directory).toAbsolutePath(), files, table, 0, 1);
      if (!fresh.config().equals(t.config())) {
        throw TableException.precondition("table '%s': the checkpoint's config differs from the"
            + " table's in Redis (checkpoint: %s; Redis: %s); nothing was changed", table,
            RedisLayout.oneLine(fresh.config()), RedisLayout.oneLine(t.config()));
      }
      deleteData(table);
      t.writeAll(redis, fresh);
      scans.remove(table);
      return (long) fresh.size();
    });
  }

  @Override
  public CompletableFuture<ScanReply> scan(String table, long cursor, int limit,
      long generation) {
    return call("scan", table, () -> {
      TableStore all = cursor == 0 && generation == 0
          ? scans.compute(table, (k, v) -> table(table).materialize(redis, false))
          : scans.get(table);
      if (all == null) {
        throw TableException.precondition("table '%s': the scan was begun by another client or"
            + " its snapshot was dropped: start the scan again", table);
      }
      int n = Scans.pageSize(all, cursor, limit, generation);
      float[] rows = new float[n * all.dim()];
      Scans.Page page = Scans.read(all, cursor, n, RowSink.of(rows));
      if (page.next() == 0) {
        scans.remove(table, all);
      }
      return new ScanReply(page.keys(), ReplyRows.of(java.util.Arrays.copyOf(rows,
          page.keys().size() * all.dim()), all.dim()), page.frequencies(), page.steps(),
          page.next(), page.generation());
    });
  }

  @Override
  public CompletableFuture<EvictResponse> evict(EvictRequest request) {
    return CompletableFuture.failedFuture(TableException.of(ErrorCode.FAILED_PRECONDITION,
        "the Redis backend does not evict: bound Redis's memory with its own maxmemory and"
            + " maxmemory-policy, or use table shards", request.getTable(), 0, "evict", null));
  }

  @Override
  public void close() {
    redis.close();
  }

  /**
   * Rows read from Redis for a batch of keys, decoded: records (null: no row), update counts and
   * counts (frequencies; zeros when not read).
   */
  record Records(float[][] values, long[] updates, long[] counts) {
    byte[] found() {
      byte[] f = new byte[(values.length + 7) >>> 3];
      for (int i = 0; i < values.length; i++) {
        if (values[i] != null) {
          f[i >>> 3] |= (byte) (1 << (i & 7));
        }
      }
      return f;
    }

    float[] rows(RedisTable t) {
      int dim = t.dim();
      float[] out = new float[values.length * dim];
      for (int i = 0; i < values.length; i++) {
        if (values[i] != null) {
          System.arraycopy(values[i], 0, out, i * dim, dim);
        }
      }
      return out;
    }

    float[] slots(RedisTable t) {
      int dim = t.dim();
      int sf = t.slotFloats();
      float[] out = new float[values.length * sf];
      for (int i = 0; i < values.length; i++) {
        if (values[i] != null) {
          System.arraycopy(values[i], dim, out, i * sf, sf);
        }
      }
      return out;
    }
  }
}
