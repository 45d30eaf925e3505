package dev.dynembed.table.engine;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

/**
 * The part of a table below memory (docs/design/0014-storage-tiers.md, 0018-redis-tier.md): the
 * rows a cap demoted, promoted back on access. Two kinds: the shard's RocksDB ({@link
 * ColdTier}: a cache of memory, wiped at start) and Redis ({@link RedisTier}: also a written-behind
 * copy of the hot rows, kept across a lost disk). The engine holds a table's lock shared while it
 * promotes and exclusively while it demotes, removes or opens a {@link View}.
 */
interface ColdRows {
  /** One record: the key's UTF-8 bytes, row and optimizer slots, frequency, last step, updates. */
  record Record(byte[] key, float[] values, long frequency, long step, long updates) {}

  /** Cold keys (exact: only in this tier, not in memory). */
  long size();

  /** The cold keys and their frequencies now (a weakly consistent view: the samplers'). */
  Set<Map.Entry<String, Long>> counts();

  /** The sum of the cold keys' frequencies (part of the table's total). */
  long frequency();

  /** The key's cold record, no longer counted cold, or null if the key is not cold. */
  Record take(byte[] key);

  /** The key's cold record, left cold, or null if the key is not cold (a slot move's read). */
  Record peek(byte[] key);

  /** Deletes the table's rows in this tier: the table was dropped, or replaced by a restore. */
  void drop();

  /** Sets this tier's counters in a table's: cold_keys, promotions, demotions, the tier's own. */
  void addCounters(dev.dynembed.table.v1.TableCounters.Builder b);

  /** Demotes records (a cap's victims) in one batch. */
  void putAll(List<Record> records);

  /** Deletes keys (an explicit eviction) from this tier; returns how many were cold. */
  long remove(List<byte[]> keys);

  /** The cold records as they are now (the caller holds the table's lock exclusively). */
  View view();

  /** Up to {@code n} cold records from position {@code pos} of a scan (see {@link Scans}). */
  List<Record> page(long pos, int n);

  /**
   * Whether this tier also keeps copies of the hot rows (written behind): then rows dropped from
   * memory without demotion (TTL, removal) must be deleted here too, and a store replacing
   * another is told with {@link #attached}.
   */
  default boolean keepsCopies() {
    return false;
  }

  /**
   * Rewrites every record as {@code widen} makes it, {@code floats} floats wide: the table grew
   * (the caller holds its lock exclusively). A tier that cannot refuses, naming itself.
   */
  default void widen(int floats, java.util.function.UnaryOperator<Record> widen) {
    throw dev.dynembed.table.common.TableException.precondition("this tier cannot widen its"
        + " records");
  }

  /** The table's current store (a new, rebuilt, restored or recovered one), once attached. */
  default void attached(TableStore store) {}

  /** Deletes the copies of rows dropped from memory without demotion (see keepsCopies). */
  default void forget(List<byte[]> keys) {}

  /**
   * Reads ahead the cold records of a batch's keys for the calling thread, so that its
   * promotions cost one round trip instead of one each (Redis); until {@link #endPrefetch}. The
   * caller holds the table's lock shared, so no key read ahead is demoted again meanwhile.
   */
  default void prefetch(dev.dynembed.table.common.PackedKeys keys) {}

  /** Drops what {@link #prefetch} read ahead and no promotion took. */
  default void endPrefetch() {}

  /** A record's bytes: row and slots as little-endian float32, then frequency, step, updates. */
  static byte[] encode(float[] src, int off, int floats, long freq, long step, long updates) {
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(floats * 4 + 24)
        .order(java.nio.ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(src, off, floats);
    b.position(floats * 4);
    b.putLong(freq).putLong(step).putLong(updates);
    return b.array();
  }

  /**
   * Decodes {@link #encode}'s bytes.
   *
   * @throws dev.dynembed.table.common.TableException DATA_LOSS naming the table and the tier if
   *     the bytes are not a record of {@code floats} floats
   */
  static Record decode(byte[] key, byte[] v, int floats, String table, String tier) {
    if (v.length != floats * 4 + 24) {
      throw dev.dynembed.table.common.TableException.dataLoss("table '%s': a %s record of '%s'"
          + " holds %d bytes, not %d (another dim or optimizer?)", table, tier,
          new String(key, java.nio.charset.StandardCharsets.UTF_8), v.length, floats * 4 + 24);
    }
    java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(v).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    float[] values = new float[floats];
    b.asFloatBuffer().get(values);
    b.position(floats * 4);
    return new Record(key, values, b.getLong(), b.getLong(), b.getLong());
  }

  /** Cold records at one cut; close to release it. */
  interface View extends AutoCloseable {
    /** Calls {@code out} with every record until it returns false. */
    void each(Predicate<Record> out);

    @Override
    void close();
  }
}
