package dev.dynembed.table.common;

import java.nio.charset.StandardCharsets;
import net.openhft.hashing.LongHashFunction;

/**
 * The stable 64-bit key hash and the shard function. Both are part of the wire contract: every
 * client and server, in any language, must compute them identically, or keys land on the wrong
 * shard (servers reject such keys).
 *
 * <ul>
 *   <li>{@code hash(key) = XXH3_64bits(utf8(key), seed = 0)} (xxHash's XXH3, 64-bit variant).
 *   <li>{@code shardOf(key, n) = Long.remainderUnsigned(hash(key), n)}.
 * </ul>
 *
 * See docs/design/0002-sharding-and-hashing.md.
 */
public final class KeyHashing {
  private static final LongHashFunction XX3 = LongHashFunction.xx3();

  private KeyHashing() {}

  public static long hash(byte[] utf8, int offset, int length) {
    return XX3.hashBytes(utf8, offset, length);
  }

  public static long hash(String key) {
    byte[] b = key.getBytes(StandardCharsets.UTF_8);
    return hash(b, 0, b.length);
  }

  /** The shard that owns a key hash: {@code hash mod numShards}, unsigned. */
  public static int shardOf(long hash, int numShards) {
    return (int) Long.remainderUnsigned(hash, numShards);
  }

  public static int shardOf(String key, int numShards) {
    return shardOf(hash(key), numShards);
  }

  /** Murmur3's 64-bit finalizer: spreads every input bit over every output bit. */
  public static long mix(long h) {
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h;
  }

  /**
   * The SplitMix64 finalizer (Steele, Lea and Flood, 2014): a bijection of 64-bit values whose
   * output bits all depend on all input bits. For seeds and per-index random values derived from
   * them; routing uses {@link #hash} and the index {@link #mix}.
   */
  public static long splitMix64(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
