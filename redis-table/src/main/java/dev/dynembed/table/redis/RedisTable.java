package dev.dynembed.table.redis;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.RedisConnections;
import dev.dynembed.table.engine.RowInitializer;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.v1.TableConfig;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.params.SetParams;

/**
 * One table in Redis as a client sees it: its config, optimizer and initializer (the engine's,
 * so that rows are created and updated exactly as on a table shard), and the calls of {@link
 * RedisShard} on its keys.
 */
final class RedisTable {
  private static final SetParams NX = SetParams.setParams().nx();
  private static final int CHUNK = 4096;

  private final TableConfig config;
  private final String name;
  private final int dim;
  private final RowOptimizer optimizer;
  private final RowInitializer initializer;
  private final int recordFloats;
  private final byte[] rowPrefix;
  private final byte[] statsKey;
  private final Object snapshotLock = new Object();
  private volatile TableStore snapshot;
  private volatile long snapshotAt;
  private volatile long snapshotBuildNanos;
  /** Occurrences this client counted since the snapshot (its growth, as far as it knows). */
  private final AtomicLong countedSinceSnapshot = new AtomicLong();

  RedisTable(TableConfig config) {
    this.config = config;
    this.name = config.getName();
    this.dim = config.getDim();
    this.optimizer = RowOptimizer.create(config.getOptimizer(), dim);
    this.initializer = new RowInitializer(config.getInitializer());
    this.recordFloats = dim * (1 + optimizer.slots());
    this.rowPrefix = RedisLayout.rowPrefix(name);
    this.statsKey = RedisLayout.statsKey(name);
  }

  /** Refuses what the Redis backend does not do, naming the setting. */
  static void checkSupported(TableConfig c) {
    if (c.hasAdmissionPressure()) {
      throw TableException.invalid("table '%s': the Redis backend has no memory budget to read;"
          + " admission_pressure is for table shards (bound Redis with maxmemory instead)",
          c.getName());
    }
    if (c.hasCooccurrence()) {
      throw TableException.invalid("table '%s': the Redis backend keeps no co-occurrence counts;"
          + " cooccurrence is for table shards", c.getName());
    }
    if (c.getAdmissionSketchKib() > 0) {
      throw TableException.invalid("table '%s': the Redis backend counts admissions exactly in"
          + " Redis; admission_sketch_kib is for table shards (leave it 0)", c.getName());
    }
    if (c.getMaxKeys() > 0 || c.getMaxBytes() > 0 || c.getDiskTier()) {
      throw TableException.invalid("table '%s': the Redis backend does not evict; max_keys,"
          + " max_bytes and disk_tier are for table shards (bound Redis with maxmemory instead)", c.getName());
    }
  }

  TableConfig config() {
    return config;
  }

  String name() {
    return name;
  }

  int dim() {
    return dim;
  }

  int slotFloats() {
    return recordFloats - dim;
  }

  int recordFloats() {
    return recordFloats;
  }

  // ------------------------------------------------------------------ rows

  /**
   * Reads the keys' records, counting and creating as asked: one pipelined round trip, and one
   * more when keys are created ({@code SET NX}, then a read of those another client created
   * first).
   *
   * @param occurrences per-key counts, or null for 1 each
   * @param count add occurrences to the keys' counts
   * @param insert create admitted keys that have no row
   */
  RedisShard.Records read(UnifiedJedis redis, PackedKeys keys, int[] occurrences, boolean count,
      boolean insert) {
    int n = keys.size();
    byte[][] rk = new byte[n][];
    List<Response<byte[]>> values = new ArrayList<>(n);
    List<Response<?>> counts = count || insert ? new ArrayList<>(n) : null;
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (int i = 0; i < n; i++) {
        rk[i] = RedisLayout.rowKey(rowPrefix, keys, i);
        if (count) {
          counts.add(p.incrBy(RedisLayout.countKey(name, keys.hash(i)),
              occurrences == null ? 1 : occurrences[i]));
        } else if (counts != null) {
          counts.add(p.get(RedisLayout.countKey(name, keys.hash(i))));
        }
        values.add(p.get(rk[i]));
      }
      p.sync();
    }
    long occ = 0;
    long firstCounts = 0;
    if (count) {
      for (int i = 0; i < n; i++) {
        long o = occurrences == null ? 1 : occurrences[i];
        occ += o;
        if (asLong(counts.get(i).get()) == o) {
          firstCounts++; // this call created the count
        }
      }
      countedSinceSnapshot.addAndGet(occ);
    }
    float[][] records = new float[n][];
    long[] updates = new long[n];
    long[] freqs = new long[n];
    List<Integer> created = new ArrayList<>();
    List<Response<String>> createdOk = new ArrayList<>();
    int minCount = config.getMinCount();
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (int i = 0; i < n; i++) {
        freqs[i] = counts == null ? 0 : asLong(counts.get(i).get());
        byte[] v = values.get(i).get();
        if (v != null) {
          records[i] = new float[recordFloats];
          updates[i] = RedisLayout.decode(v, records[i], name, rk[i])[1];
        } else if (insert && (minCount <= 1 || freqs[i] >= minCount)) {
          records[i] = fresh(keys.hash(i));
          created.add(i);
          createdOk.add(p.set(rk[i], RedisLayout.encode(records[i], 0, 0), NX));
        }
      }
      if (occ > 0) {
        p.hincrBy(statsKey, RedisLayout.TOTAL, occ);
      }
      if (firstCounts > 0) {
        p.hincrBy(statsKey, RedisLayout.COUNTED, firstCounts);
      }
      p.sync();
    }
    if (!created.isEmpty()) { // keys another client created first: read theirs
      List<Integer> lost = new ArrayList<>();
      List<Response<byte[]>> theirs = new ArrayList<>();
      try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
        for (int c = 0; c < created.size(); c++) {
          if (createdOk.get(c).get() == null) {
            lost.add(created.get(c));
            theirs.add(p.get(rk[created.get(c)]));
          }
        }
        if (created.size() > lost.size()) {
          p.hincrBy(statsKey, RedisLayout.KEYS, created.size() - lost.size());
        }
        p.sync();
      }
      for (int j = 0; j < lost.size(); j++) {
        int i = lost.get(j);
        byte[] v = theirs.get(j).get();
        if (v != null) {
          updates[i] = RedisLayout.decode(v, records[i], name, rk[i])[1];
        } // else dropped meanwhile: the fresh row stands for it
      }
    }
    return new RedisShard.Records(records, updates, freqs);
  }

  private static long asLong(Object reply) {
    if (reply == null) {
      return 0;
    }
    if (reply instanceof Long l) {
      return l;
    }
    return Long.parseLong(reply instanceof byte[] b ? new String(b, StandardCharsets.US_ASCII)
        : reply.toString());
  }

  /** A new key's record: the initializer's row (a function of the key's hash) and fresh slots. */
  private float[] fresh(long hash) {
    float[] r = new float[recordFloats];
    initializer.fill(hash, r, 0, dim);
    optimizer.initSlots(r, dim);
    return r;
  }

  /**
   * Applies gradient rows of distinct keys with the table's optimizer, here: reads the records,
   * updates them, writes them back (two round trips). Keys without a row are created first when
   * the table admits every key (min_count &lt;= 1); otherwise their gradients are dropped, as a
   * shard drops them.
   *
   * @return keys updated
   */
  int apply(UnifiedJedis redis, PackedKeys keys, float[] g, float learningRate, long step) {
    float lr = learningRate > 0f ? learningRate : config.getOptimizer().getLearningRate();
    int n = keys.size();
    byte[][] rk = new byte[n][];
    List<Response<byte[]>> values = new ArrayList<>(n);
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (int i = 0; i < n; i++) {
        rk[i] = RedisLayout.rowKey(rowPrefix, keys, i);
        values.add(p.get(rk[i]));
      }
      p.sync();
    }
    int applied = 0;
    int created = 0;
    float[] r = new float[recordFloats];
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (int i = 0; i < n; i++) {
        byte[] v = values.get(i).get();
        long updates;
        if (v != null) {
          updates = RedisLayout.decode(v, r, name, rk[i])[1];
        } else if (config.getMinCount() <= 1) {
          System.arraycopy(fresh(keys.hash(i)), 0, r, 0, recordFloats);
          updates = 0;
          created++;
        } else {
          continue; // not admitted: its gradient is dropped
        }
        long t = updates + 1;
        optimizer.apply(r, 0, r, dim, g, i * dim, lr, t);
        p.set(rk[i], RedisLayout.encode(r, step, t));
        applied++;
      }
      if (created > 0) {
        p.hincrBy(statsKey, RedisLayout.KEYS, created);
      }
      if (applied > 0) {
        p.hincrBy(statsKey, RedisLayout.UPDATES, applied);
      }
      p.sync();
    }
    return applied;
  }

  /**
   * The table's counters from its stats hash (O(1)): keys, total frequency, updates, and as
   * pending keys the keys counted but without a row (counts of keys created by a gradient alone
   * make it an estimate).
   */
  dev.dynembed.table.v1.TableCounters counters(UnifiedJedis redis) {
    java.util.Map<byte[], byte[]> h = redis.hgetAll(statsKey);
    long keys = 0;
    long total = 0;
    long counted = 0;
    long updates = 0;
    for (java.util.Map.Entry<byte[], byte[]> e : h.entrySet()) {
      long v = asLong(e.getValue());
      if (java.util.Arrays.equals(e.getKey(), RedisLayout.KEYS)) {
        keys = v;
      } else if (java.util.Arrays.equals(e.getKey(), RedisLayout.TOTAL)) {
        total = v;
      } else if (java.util.Arrays.equals(e.getKey(), RedisLayout.COUNTED)) {
        counted = v;
      } else if (java.util.Arrays.equals(e.getKey(), RedisLayout.UPDATES)) {
        updates = v;
      }
    }
    return dev.dynembed.table.v1.TableCounters.newBuilder().setKeys(keys)
        .setTotalFrequency(total).setUpdates(updates)
        .setPendingKeys(config.getMinCount() > 1 ? Math.max(0, counted - keys) : 0)
        .setBytesRaw(keys * recordFloats * 4L).build();
  }

  // ------------------------------------------------------------------ whole table

  /**
   * The whole table read into an engine store (rows, slots, counts, steps; with {@code pending},
   * also the counts of keys not yet admitted): what top-k, scans and checkpoints run on.
   */
  TableStore materialize(UnifiedJedis redis, boolean pending) {
    TableStore store = new TableStore(config, 0, 1);
    Set<Long> rowHashes = pending ? new HashSet<>() : null;
    loadAll(redis, store, true, rowHashes);
    if (pending) {
      List<byte[]> countKeys = new ArrayList<>();
      RedisConnections.scanKeys(redis, RedisLayout.countPattern(name), countKeys::add);
      for (int from = 0; from < countKeys.size(); from += CHUNK) {
        List<byte[]> part = countKeys.subList(from, Math.min(countKeys.size(), from + CHUNK));
        List<Response<String>> cs = new ArrayList<>(part.size());
        try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
          for (byte[] k : part) {
            cs.add(p.get(new String(k, StandardCharsets.UTF_8)));
          }
          p.sync();
        }
        for (int j = 0; j < part.size(); j++) {
          long h = RedisLayout.hashOfCountKey(part.get(j));
          long c = asLong(cs.get(j).get());
          if (c > 0 && rowHashes.add(h)) { // SCAN may return a key twice
            store.restorePending(h, c);
          }
        }
      }
    }
    return store;
  }

  /** Loads every row key of the table (a scan, in chunks) into a store: see {@link #load}. */
  private void loadAll(UnifiedJedis redis, TableStore store, boolean values, Set<Long> hashes) {
    List<byte[]> batch = new ArrayList<>(CHUNK);
    RedisConnections.scanKeys(redis, RedisLayout.rowPattern(name), k -> {
      batch.add(k);
      if (batch.size() == CHUNK) {
        load(redis, store, batch, values, hashes);
        batch.clear();
      }
    });
    load(redis, store, batch, values, hashes);
  }

  /** Loads a batch of row keys (with their values, or with zero rows) and counts into a store. */
  private void load(UnifiedJedis redis, TableStore store, List<byte[]> rowKeys, boolean values,
      Set<Long> hashes) {
    if (rowKeys.isEmpty()) {
      return;
    }
    int n = rowKeys.size();
    String[] keys = new String[n];
    long[] hash = new long[n];
    List<Response<byte[]>> vs = new ArrayList<>(n);
    List<Response<String>> cs = new ArrayList<>(n);
    try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
      for (int i = 0; i < n; i++) {
        byte[] k = rowKeys.get(i);
        hash[i] = KeyHashing.hash(k, rowPrefix.length, k.length - rowPrefix.length);
        keys[i] = new String(k, rowPrefix.length, k.length - rowPrefix.length,
            StandardCharsets.UTF_8);
        if (values) {
          vs.add(p.get(k));
        }
        cs.add(p.get(new String(RedisLayout.countKey(name, hash[i]), StandardCharsets.UTF_8)));
      }
      p.sync();
    }
    float[] zeros = new float[recordFloats];
    for (int i = 0; i < n; i++) {
      long freq = asLong(cs.get(i).get());
      if (!values) {
        store.putRecord(keys[i], zeros, freq, 0, 0);
        continue;
      }
      byte[] v = vs.get(i).get();
      if (v == null) {
        continue; // dropped meanwhile
      }
      float[] r = new float[recordFloats];
      long[] su = RedisLayout.decode(v, r, name, rowKeys.get(i));
      if (store.putRecord(keys[i], r, freq, su[0], su[1]) && hashes != null) {
        hashes.add(hash[i]);
      }
    }
  }

  /**
   * The store candidate sampling draws from: every key with its count (rows left zero: draws
   * read the drawn rows fresh). Rebuilt, by a scan of Redis, when it is empty, or when it is older
   * than the refresh period (and than four builds) and has grown by 1% of its total count as far
   * as this client counted, or is older than 30 refresh periods (others' growth).
   */
  TableStore samplingSnapshot(UnifiedJedis redis, long refreshNanos) {
    TableStore s = snapshot;
    if (s != null && !stale(s, refreshNanos)) {
      return s;
    }
    synchronized (snapshotLock) {
      s = snapshot;
      if (s != null && !stale(s, refreshNanos)) {
        return s;
      }
      long t0 = System.nanoTime();
      long counted = countedSinceSnapshot.get();
      TableStore fresh = new TableStore(config, 0, 1);
      loadAll(redis, fresh, false, null);
      countedSinceSnapshot.addAndGet(-counted);
      snapshotBuildNanos = System.nanoTime() - t0;
      snapshotAt = System.nanoTime();
      snapshot = fresh;
      return fresh;
    }
  }

  private boolean stale(TableStore s, long refreshNanos) {
    if (s.size() == 0) {
      return true;
    }
    long age = System.nanoTime() - snapshotAt;
    if (age < Math.max(refreshNanos, 4 * snapshotBuildNanos)) {
      return false;
    }
    long total = s.counters().getTotalFrequency();
    return countedSinceSnapshot.get() > total / 100 || age > 30 * refreshNanos;
  }

  /** Writes every record and count of a store (a restored checkpoint) to Redis. */
  void writeAll(UnifiedJedis redis, TableStore store) {
    List<String> keys = store.keys();
    for (int from = 0; from < keys.size(); from += CHUNK) {
      try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
        for (String key : keys.subList(from, Math.min(keys.size(), from + CHUNK))) {
          TableStore.Record rec = store.record(key);
          float[] r = new float[recordFloats];
          System.arraycopy(rec.weights(), 0, r, 0, dim);
          for (int s = 0; s < rec.slots().length; s++) {
            System.arraycopy(rec.slots()[s], 0, r, dim * (s + 1), dim);
          }
          byte[] utf8 = key.getBytes(StandardCharsets.UTF_8);
          p.set(RedisLayout.rowKey(rowPrefix, PackedKeys.of(key), 0),
              RedisLayout.encode(r, rec.lastStep(), rec.updates()));
          if (rec.frequency() > 0) {
            p.set(RedisLayout.countKey(name, KeyHashing.hash(utf8, 0, utf8.length)),
                Long.toString(rec.frequency()).getBytes(StandardCharsets.US_ASCII));
          }
        }
        p.sync();
      }
    }
    List<Map.Entry<Long, Long>> pending = new ArrayList<>(store.pendingCounts().entrySet());
    for (int from = 0; from < pending.size(); from += CHUNK) {
      try (AbstractPipeline p = RedisConnections.pipelined(redis)) {
        for (Map.Entry<Long, Long> e : pending.subList(from, Math.min(pending.size(),
            from + CHUNK))) {
          p.set(RedisLayout.countKey(name, e.getKey()),
              Long.toString(e.getValue()).getBytes(StandardCharsets.US_ASCII));
        }
        p.sync();
      }
    }
    long total = 0;
    long counted = pending.size();
    for (String key : keys) {
      long f = store.record(key).frequency();
      total += f;
      counted += f > 0 ? 1 : 0;
    }
    for (Map.Entry<Long, Long> e : pending) {
      total += e.getValue();
    }
    redis.hset(statsKey, Map.of(RedisLayout.KEYS, ascii(keys.size()), RedisLayout.TOTAL,
        ascii(total), RedisLayout.COUNTED, ascii(counted), RedisLayout.UPDATES, ascii(0)));
    synchronized (snapshotLock) {
      snapshot = null;
    }
  }

  private static byte[] ascii(long v) {
    return Long.toString(v).getBytes(StandardCharsets.US_ASCII);
  }
}
