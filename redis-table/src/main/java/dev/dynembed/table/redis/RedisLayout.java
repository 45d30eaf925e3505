package dev.dynembed.table.redis;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Where a table lives in Redis (docs/design/0014-storage-tiers.md). For table {@code T}:
 *
 * <ul>
 *   <li>{@code dt:{T}:config}: the normalized {@code TableConfig}, protobuf bytes;
 *   <li>{@code dt:{T}:stats}: a hash of the table's counters: {@code keys} (rows created),
 *       {@code total} (sum of counts), {@code counted} (keys ever counted), {@code updates} (rows
 *       updated); kept by {@code HINCRBY}, one command per call;
 *   <li>{@code dt:T:r:KEY}: the key's record ({@link #encode}): the row and its optimizer slots as
 *       little-endian float32, then the last-update step and the update count as little-endian
 *       int64;
 *   <li>{@code dt:T:c:HASH}: the key's count (its frequency; admission compares it with
 *       min_count), a Redis integer; HASH is the key's 64-bit hash in 16 hex digits, the identity
 *       a checkpoint keeps for keys counted but not admitted.
 * </ul>
 *
 * <p>Row keys carry no hash tag, so a Cluster spreads a table's rows over its nodes. Table names
 * ({@code [A-Za-z0-9_.-]}) hold no ':' and no glob character, so the prefixes and patterns of two
 * tables never overlap.
 */
final class RedisLayout {
  private RedisLayout() {}

  static byte[] configKey(String table) {
    return ("dt:{" + table + "}:config").getBytes(StandardCharsets.UTF_8);
  }

  static byte[] statsKey(String table) {
    return ("dt:{" + table + "}:stats").getBytes(StandardCharsets.UTF_8);
  }

  static final byte[] KEYS = bytes("keys");
  static final byte[] TOTAL = bytes("total");
  static final byte[] COUNTED = bytes("counted");
  static final byte[] UPDATES = bytes("updates");

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static byte[] configPattern() {
    return "dt:{*}:config".getBytes(StandardCharsets.UTF_8);
  }

  static String tableOfConfigKey(byte[] key) {
    String k = new String(key, StandardCharsets.UTF_8);
    return k.substring("dt:{".length(), k.length() - "}:config".length());
  }

  static byte[] rowPrefix(String table) {
    return ("dt:" + table + ":r:").getBytes(StandardCharsets.UTF_8);
  }

  static byte[] rowPattern(String table) {
    return ("dt:" + table + ":r:*").getBytes(StandardCharsets.UTF_8);
  }

  static byte[] countPattern(String table) {
    return ("dt:" + table + ":c:*").getBytes(StandardCharsets.UTF_8);
  }

  static byte[] rowKey(byte[] prefix, PackedKeys keys, int i) {
    byte[] k = new byte[prefix.length + keys.length(i)];
    System.arraycopy(prefix, 0, k, 0, prefix.length);
    System.arraycopy(keys.bytes(), keys.offset(i), k, prefix.length, keys.length(i));
    return k;
  }

  static byte[] countKey(String table, long hash) {
    return String.format("dt:%s:c:%016x", table, hash).getBytes(StandardCharsets.UTF_8);
  }

  /** The hash of a count key, or throws for a key of another shape. */
  static long hashOfCountKey(byte[] key) {
    String k = new String(key, StandardCharsets.UTF_8);
    return Long.parseUnsignedLong(k.substring(k.length() - 16), 16);
  }

  static TableConfig parseConfig(String table, byte[] bytes) {
    try {
      return TableConfig.parseFrom(bytes);
    } catch (InvalidProtocolBufferException e) {
      throw TableException.dataLoss("table '%s': its config in Redis is not a TableConfig (%s)",
          table, e.getMessage());
    }
  }

  static String oneLine(TableConfig c) {
    return com.google.protobuf.TextFormat.shortDebugString(c);
  }

  /** A record: row and slots, step, update count. */
  static byte[] encode(float[] record, long step, long updates) {
    ByteBuffer b = ByteBuffer.allocate(record.length * 4 + 16).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(record);
    b.position(record.length * 4);
    b.putLong(step).putLong(updates);
    return b.array();
  }

  /**
   * Decodes a record of {@code floats} floats into {@code record}; returns {step, updates}.
   *
   * @throws TableException DATA_LOSS naming the key if the value is not a record of this table
   */
  static long[] decode(byte[] value, float[] record, String table, byte[] key) {
    if (value.length != record.length * 4 + 16) {
      throw TableException.dataLoss("table '%s': Redis holds %d bytes for '%s', not a record of"
          + " %d floats and two counters (%d bytes); was the table re-created with another dim"
          + " or optimizer?", table, value.length, new String(key, StandardCharsets.UTF_8),
          record.length, record.length * 4 + 16);
    }
    ByteBuffer b = ByteBuffer.wrap(value).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().get(record);
    b.position(record.length * 4);
    return new long[] {b.getLong(), b.getLong()};
  }
}
