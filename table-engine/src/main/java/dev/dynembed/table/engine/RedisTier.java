package dev.dynembed.table.engine;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ColdRows.Record;
import dev.dynembed.table.v1.TableConfig;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.exceptions.JedisException;

/**
 * A shard's Redis tier (docs/design/0018-redis-tier.md): the rows of its {@code redis_tier}
 * tables in Redis (one node or a Cluster), written by this shard only. Every changed row is
 * written behind each flush period, a cap's victims move here only (promoted back on access), and
 * a shard that starts with no state of its own loads the tables' configs and cold keys from here.
 *
 * <p>Layout under the shard's prefix {@code P} (default {@code dynembed:shard-I-of-N}): {@code
 * P:tables}, a hash of table name → normalized {@code TableConfig} bytes; {@code P:T:r:KEY}, key
 * KEY's record of table T ({@link ColdRows#encode}). No hash tags: a Cluster spreads the rows.
 *
 * <p>With its own write-ahead log the shard's disk is the truth and Redis lags it by at most one
 * flush period; a shard started on an empty disk takes Redis as the truth (what the last period
 * changed is lost with the disk; the call ledger is lost with it, so resends of calls answered
 * before the loss may apply twice).
 */
public final class RedisTier implements AutoCloseable {
  /** The default flush period. */
  public static final long DEFAULT_FLUSH_MILLIS = 1000;
  private static final int CHUNK = 1024;

  private final UnifiedJedis redis;
  private final String shown;
  private final String prefix;
  private final byte[] configsKey;
  private final ConcurrentHashMap<String, Table> tables = new ConcurrentHashMap<>();
  private final ScheduledExecutorService flusher;
  private final Object flushing = new Object(); // one flush at a time
  /** Flushes that failed (Redis unreachable; their rows stay changed): their log is rate-limited. */
  private final AtomicLong failures = new AtomicLong();
  private volatile boolean closed;

  private RedisTier(UnifiedJedis redis, String shown, String prefix, long flushMillis,
      int shardIndex) {
    this.redis = redis;
    this.shown = shown;
    this.prefix = prefix;
    this.configsKey = (prefix + ":tables").getBytes(StandardCharsets.UTF_8);
    this.flusher = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "redis-tier-flush-shard" + shardIndex);
      t.setDaemon(true);
      return t;
    });
    flusher.scheduleWithFixedDelay(this::flushQuietly, flushMillis, flushMillis,
        TimeUnit.MILLISECONDS);
  }

  /**
   * Connects to the Redis of {@code uri} ({@link RedisConnections}) and checks that it answers.
   *
   * @param prefix the shard's namespace ({@code [A-Za-z0-9_.:-]}, no glob characters)
   * @param flushMillis the write-behind period, &gt;= 10 ms
   * @throws TableException INVALID_ARGUMENT for a bad address, prefix or period; UNAVAILABLE if
   *     Redis does not answer
   */
  public static RedisTier open(String uri, String prefix, long flushMillis, int shardIndex) {
    if (prefix == null || !prefix.matches("[A-Za-z0-9_.:-]{1,200}")) {
      throw TableException.invalid("redis tier: the key prefix must be 1-200 characters of"
          + " [A-Za-z0-9_.:-] (no glob characters), was '%s'", prefix);
    }
    if (flushMillis < 10) {
      throw TableException.invalid("redis tier: the flush period must be >= 10 ms, was %d",
          flushMillis);
    }
    RedisConnections.Connection c;
    try {
      c = RedisConnections.open(uri, Set.of());
    } catch (IllegalArgumentException e) {
      throw TableException.invalid("redis tier: %s", e.getMessage());
    }
    try {
      c.redis().exists(prefix + ":tables"); // fails now rather than at the first table
    } catch (JedisException e) {
      c.redis().close();
      throw new TableException(ErrorCode.UNAVAILABLE, "redis tier: " + c.shown()
          + " does not answer: " + e.getMessage());
    }
    return new RedisTier(c.redis(), c.shown(), prefix, flushMillis, shardIndex);
  }

  /** The default prefix of shard {@code index} of {@code n}. */
  public static String defaultPrefix(int index, int n) {
    return String.format("dynembed:shard-%05d-of-%05d", index, n);
  }

  public String address() {
    return shown;
  }

  public String prefix() {
    return prefix;
  }

  private AbstractPipeline pipeline() {
    return RedisConnections.pipelined(redis);
  }

  private <T> T call(String what, Supplier<T> op) {
    try {
      return op.get();
    } catch (JedisException e) {
      throw new TableException(ErrorCode.UNAVAILABLE, "redis tier (" + shown + "): " + what
          + " failed: " + e.getMessage() + "; resend");
    }
  }

  /** The Redis part of a table, created empty on first use; records the table's config. */
  Table table(TableConfig config, int recordFloats) {
    Table t = tables.computeIfAbsent(config.getName(), n -> new Table(n, recordFloats));
    call("recording the config of table '" + config.getName() + "'",
        () -> redis.hset(configsKey, config.getName().getBytes(StandardCharsets.UTF_8),
            config.toByteArray()));
    return t;
  }

  /** Deletes a table's rows and config from Redis (drop, restore). */
  void drop(String name) {
    Table t = tables.remove(name);
    if (t != null) {
      t.dropped = true;
    }
    call("dropping table '" + name + "'", () -> {
      redis.hdel(configsKey, name.getBytes(StandardCharsets.UTF_8));
      List<byte[]> batch = new ArrayList<>(CHUNK);
      scan(name, k -> {
        batch.add(k);
        if (batch.size() == CHUNK) {
          delete(batch);
          batch.clear();
        }
      });
      delete(batch);
      return null;
    });
  }

  private void delete(List<byte[]> rowKeys) {
    if (rowKeys.isEmpty()) {
      return;
    }
    try (AbstractPipeline p = pipeline()) {
      for (byte[] k : rowKeys) {
        p.unlink(k);
      }
      p.sync();
    }
  }

  private void scan(String table, java.util.function.Consumer<byte[]> out) {
    RedisConnections.scanKeys(redis, (prefix + ":" + table + ":r:*")
        .getBytes(StandardCharsets.UTF_8), out);
  }

  /**
   * Keeps the shard's slot map under {@code P:slot-map} (its protobuf), so that a shard started
   * on an empty disk from Redis routes by the map its rows were moved under.
   */
  void saveSlotMap(byte[] proto) {
    call("recording the slot map", () -> redis.set(slotMapKey(), proto));
  }

  /** The slot map kept by {@link #saveSlotMap}, or null. */
  byte[] loadSlotMap() {
    return call("reading the slot map", () -> redis.get(slotMapKey()));
  }

  private byte[] slotMapKey() {
    return (prefix + ":slot-map").getBytes(StandardCharsets.UTF_8);
  }

  /** The configs of the tables Redis holds under this prefix, by name. */
  List<TableConfig> storedConfigs() {
    Map<byte[], byte[]> all = call("reading the table configs", () -> redis.hgetAll(configsKey));
    List<TableConfig> out = new ArrayList<>();
    for (Map.Entry<byte[], byte[]> e : all.entrySet()) {
      String name = new String(e.getKey(), StandardCharsets.UTF_8);
      try {
        out.add(TableConfig.parseFrom(e.getValue()));
      } catch (InvalidProtocolBufferException ex) {
        throw TableException.dataLoss("redis tier (%s): the config of table '%s' under %s is"
            + " not a TableConfig (%s)", shown, name, prefix, ex.getMessage());
      }
    }
    out.sort(java.util.Comparator.comparing(TableConfig::getName));
    return out;
  }

  /** Writes every table's changed rows now (also what the timer does each period). */
  public void flush() {
    synchronized (flushing) {
      for (Table t : tables.values()) {
        t.flush();
      }
    }
  }

  private void flushQuietly() {
    try {
      flush();
    } catch (RuntimeException e) {
      if (failures.getAndIncrement() % 60 == 0) {
        System.err.println("redis tier: a flush to " + shown + " failed (the rows stay changed"
            + " and go with a later flush): " + e.getMessage());
      }
    }
  }

  /** Stops the timer, writes the changed rows a last time and disconnects. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    flusher.shutdown();
    try {
      flusher.awaitTermination(30, TimeUnit.SECONDS);
      flush();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      System.err.println("redis tier: the last flush to " + shown + " failed: " + e.getMessage());
    } finally {
      redis.close();
    }
  }

  /** A table's rows in Redis. */
  final class Table extends ColdKeys {
    private final String name;
    private final int recordFloats;
    private final byte[] rowPrefix;
    private final AtomicLong written = new AtomicLong();
    private volatile long lastFlushRows;
    private volatile TableStore store;
    volatile boolean dropped;
    // a scan's key list and where it stands (see page)
    private List<String> scanKeys;
    private long scanNextPos = -1;
    private int scanIndex;

    private Table(String name, int recordFloats) {
      this.name = name;
      this.recordFloats = recordFloats;
      this.rowPrefix = (prefix + ":" + name + ":r:").getBytes(StandardCharsets.UTF_8);
    }

    private byte[] rowKey(byte[] key) {
      byte[] k = Arrays.copyOf(rowPrefix, rowPrefix.length + key.length);
      System.arraycopy(key, 0, k, rowPrefix.length, key.length);
      return k;
    }

    private Record decode(byte[] key, byte[] v) {
      return ColdRows.decode(key, v, recordFloats, name, "redis-tier");
    }

    @Override
    public void drop() {
      RedisTier.this.drop(name);
    }

    /**
     * Also written_behind (records the flusher wrote) and last_flush_keys (rows the last flush
     * found changed: about what a lost disk would have lost just before it).
     */
    @Override
    public void addCounters(dev.dynembed.table.v1.TableCounters.Builder b) {
      super.addCounters(b);
      b.setWrittenBehind(written.get()).setLastFlushKeys(lastFlushRows);
    }

    @Override
    public boolean keepsCopies() {
      return true;
    }

    @Override
    public void attached(TableStore s) {
      this.store = s;
    }

    /** Cold records read ahead for the calling thread's batch ({@link #prefetch}). */
    private final ThreadLocal<Map<String, byte[]>> ahead = new ThreadLocal<>();

    @Override
    public void prefetch(dev.dynembed.table.common.PackedKeys keys) {
      if (counts.isEmpty()) {
        return;
      }
      java.util.LinkedHashSet<String> want = null;
      for (int i = 0; i < keys.size(); i++) {
        String k = keys.key(i);
        if (counts.containsKey(k)) {
          if (want == null) {
            want = new java.util.LinkedHashSet<>();
          }
          want.add(k);
        }
      }
      if (want == null) {
        return;
      }
      Map<String, byte[]> m = new java.util.HashMap<>(want.size() * 2);
      fetch(new ArrayList<>(want), (k, v) -> m.put(k, v));
      ahead.set(m);
    }

    @Override
    public void endPrefetch() {
      ahead.remove();
    }

    @Override
    public Record peek(byte[] key) {
      if (!counts.containsKey(new String(key, StandardCharsets.UTF_8))) {
        return null;
      }
      byte[] v = call("reading table '" + name + "'", () -> redis.get(rowKey(key)));
      return v == null ? null : decode(key, v);
    }

    @Override
    public Record take(byte[] key) {
      String k = new String(key, StandardCharsets.UTF_8);
      if (!counts.containsKey(k)) {
        return null; // not cold: no round trip for a new key
      }
      Map<String, byte[]> m = ahead.get();
      byte[] read = m == null ? null : m.remove(k);
      byte[] v = read != null ? read
          : call("reading table '" + name + "'", () -> redis.get(rowKey(key)));
      if (v == null) {
        throw TableException.dataLoss("table '%s': key '%s' is in the redis tier but %s holds"
            + " no record of it under %s (was Redis flushed, or is it evicting keys? the tier"
            + " needs maxmemory-policy noeviction)", name, k, shown, prefix);
      }
      Record r = decode(key, v);
      Long f = counts.remove(k);
      if (f != null) {
        frequency.addAndGet(-f);
        promotions.incrementAndGet();
      }
      return r; // Redis keeps it: the copy of a hot row
    }

    @Override
    public void putAll(List<Record> records) {
      if (records.isEmpty()) {
        return;
      }
      write(records);
      long f = 0;
      for (Record r : records) {
        Long was = counts.put(new String(r.key(), StandardCharsets.UTF_8), r.frequency());
        f += r.frequency() - (was == null ? 0 : was);
      }
      frequency.addAndGet(f);
      demotions.addAndGet(records.size());
    }

    private void write(List<Record> records) {
      call("writing table '" + name + "'", () -> {
        try (AbstractPipeline p = pipeline()) {
          for (Record r : records) {
            p.set(rowKey(r.key()), ColdRows.encode(r.values(), 0, recordFloats, r.frequency(),
                r.step(), r.updates()));
          }
          p.sync();
        }
        return null;
      });
    }

    @Override
    public long remove(List<byte[]> keys) {
      forget(keys);
      long n = 0;
      for (byte[] k : keys) {
        Long f = counts.remove(new String(k, StandardCharsets.UTF_8));
        if (f != null) {
          frequency.addAndGet(-f);
          n++;
        }
      }
      return n;
    }

    @Override
    public void forget(List<byte[]> keys) {
      List<byte[]> rk = new ArrayList<>(keys.size());
      for (byte[] k : keys) {
        rk.add(rowKey(k));
      }
      call("deleting from table '" + name + "'", () -> {
        for (int i = 0; i < rk.size(); i += CHUNK) {
          delete(rk.subList(i, Math.min(rk.size(), i + CHUNK)));
        }
        return null;
      });
    }

    /** The records of {@code keys} (a key Redis no longer holds is left out). */
    private List<Record> read(List<String> keys) {
      List<Record> out = new ArrayList<>(keys.size());
      fetch(keys, (k, v) -> out.add(decode(k.getBytes(StandardCharsets.UTF_8), v)));
      return out;
    }

    /**
     * Reads the records of {@code keys} in pipelines of {@link #CHUNK} {@code GET}s and gives
     * {@code out} each key Redis holds with its record's bytes, in order.
     */
    private void fetch(List<String> keys, java.util.function.BiConsumer<String, byte[]> out) {
      call("reading table '" + name + "'", () -> {
        for (int i = 0; i < keys.size(); i += CHUNK) {
          List<String> part = keys.subList(i, Math.min(keys.size(), i + CHUNK));
          List<Response<byte[]>> values = new ArrayList<>(part.size());
          try (AbstractPipeline p = pipeline()) {
            for (String k : part) {
              values.add(p.get(rowKey(k.getBytes(StandardCharsets.UTF_8))));
            }
            p.sync();
          }
          for (int j = 0; j < part.size(); j++) {
            byte[] v = values.get(j).get();
            if (v != null) {
              out.accept(part.get(j), v);
            }
          }
        }
        return null;
      });
    }

    /**
     * Reads the cold records now: Redis has no snapshots, so a cut is a copy (the caller holds
     * the table's lock exclusively, so no demotion or removal straddles it).
     */
    @Override
    public View view() {
      List<Record> records = read(new ArrayList<>(counts.keySet()));
      return new View() {
        @Override
        public void each(java.util.function.Predicate<Record> out) {
          for (Record r : records) {
            if (!out.test(r)) {
              return;
            }
          }
        }

        @Override
        public void close() {}
      };
    }

    @Override
    public synchronized List<Record> page(long pos, int n) {
      if (scanKeys == null || pos != scanNextPos) {
        scanKeys = new ArrayList<>(counts.keySet());
        scanKeys.sort(null);
        scanIndex = (int) Math.min(pos, scanKeys.size());
      }
      List<Record> out = new ArrayList<>(Math.min(n, CHUNK));
      while (out.size() < n && scanIndex < scanKeys.size()) {
        int end = Math.min(scanKeys.size(), scanIndex + (n - out.size()));
        out.addAll(read(scanKeys.subList(scanIndex, end))); // a key removed since is skipped
        scanIndex = end;
      }
      scanNextPos = pos + n;
      if (scanIndex >= scanKeys.size()) {
        scanKeys = null;
      }
      return out;
    }

    /** Loads the cold keys and their frequencies from Redis (a shard with no state of its own). */
    void loadCold() {
      List<String> keys = new ArrayList<>();
      call("listing table '" + name + "'", () -> {
        scan(name, k -> keys.add(new String(k, rowPrefix.length, k.length - rowPrefix.length,
            StandardCharsets.UTF_8)));
        return null;
      });
      for (int i = 0; i < keys.size(); i += CHUNK) {
        for (Record r : read(keys.subList(i, Math.min(keys.size(), i + CHUNK)))) {
          counts.put(new String(r.key(), StandardCharsets.UTF_8), r.frequency());
          frequency.addAndGet(r.frequency());
        }
      }
    }

    /**
     * Writes the store's changed rows, a chunk at a time, each under the table's lock shared: an
     * eviction (exclusive) then never writes a demoted row before an older copy of it. A store
     * that an eviction replaced meanwhile is followed: the walk starts over on the new one (its
     * marks were carried over, so the rows already written are not written again), so that a
     * flush that returns has written every row changed before it began.
     */
    void flush() {
      TableStore s = store;
      if (s == null) {
        return;
      }
      List<Record> out = new ArrayList<>(CHUNK);
      long[] marks = new long[3 * CHUNK];
      long found = 0;
      int from = 0;
      do {
        TableStore locked = s;
        locked.quiesce.readLock().lock();
        try {
          if (dropped) {
            return;
          }
          if (s.retired) {
            TableStore now = store;
            if (now == s || now == null) {
              return;
            }
            s = now; // replaced (an eviction's rebuild, a restore): go on over the new store
            from = 0;
            continue;
          }
          out.clear();
          from = s.changedRows(from, CHUNK, out, marks);
          if (!out.isEmpty()) {
            write(out);
            s.markFlushed(marks, out.size());
            written.addAndGet(out.size());
            found += out.size();
          }
        } finally {
          locked.quiesce.readLock().unlock();
        }
      } while (from < s.size());
      lastFlushRows = found;
    }
  }
}
