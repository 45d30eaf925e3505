package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class KeyHashingTest {
  @Test
  void hash_emptyInput_matchesXxh3Reference() {
    // XXH3_64bits("", seed 0) from the xxHash reference implementation
    assertEquals(0x2d06800538d394c2L, KeyHashing.hash(new byte[0], 0, 0));
  }

  /**
   * XXH3_64bits (seed 0) of the reference implementation, libxxhash 0.8.1 (Debian 12's, through
   * python3-xxhash 3.0.0: {@code xxhash.xxh3_64_intdigest(b)}), one input per length class of
   * the algorithm (1-3, 4-8, 9-16, 17-128, 129-240, > 240 bytes). Part of the wire contract too:
   * a change here re-routes every key of every deployment.
   */
  @Test
  void hash_matchesXxh3ReferenceVectors() {
    assertEquals(0xe6c632b61e964e1fL, KeyHashing.hash("a"));
    assertEquals(0x78af5f94892f3950L, KeyHashing.hash("abc"));
    assertEquals(0x9555e8555c62dcfdL, KeyHashing.hash("hello"));
    assertEquals(0x62e29b4cad9e2ef6L, KeyHashing.hash("12345678"));
    assertEquals(0x64439946d8fa212dL, KeyHashing.hash("0123456789abcdef"));
    assertEquals(0x5a4c1b3ada804b0cL,
        KeyHashing.hash("the quick brown fox jumps over the lazy dog, twice over"));
    assertEquals(0xafcbc02eefb2e605L, KeyHashing.hash("naïve café 東京"));
    byte[] b200 = new byte[200];
    for (int i = 0; i < b200.length; i++) {
      b200[i] = (byte) i;
    }
    assertEquals(0xf42a8864feaf0703L, KeyHashing.hash(b200, 0, b200.length));
    byte[] b1000 = new byte[1000];
    for (int i = 0; i < b1000.length; i++) {
      b1000[i] = (byte) (i * 7);
    }
    assertEquals(0x10ad30264426c830L, KeyHashing.hash(b1000, 0, b1000.length));
  }

  @Test
  void hash_stringAndBytesOfSameKey_agree() {
    String k = "naïve café 東京";
    byte[] b = k.getBytes(StandardCharsets.UTF_8);
    byte[] padded = new byte[b.length + 7];
    System.arraycopy(b, 0, padded, 3, b.length);
    assertEquals(KeyHashing.hash(k), KeyHashing.hash(padded, 3, b.length));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 7, 16})
  void shardOf_manyKeys_isInRangeAndBalanced(int n) {
    int keys = 70_000;
    int[] counts = new int[n];
    for (int i = 0; i < keys; i++) {
      int s = KeyHashing.shardOf("key-" + i, n);
      assertTrue(s >= 0 && s < n);
      counts[s]++;
    }
    double expected = (double) keys / n;
    for (int c : counts) {
      // 5 standard deviations of a binomial count
      assertTrue(Math.abs(c - expected) < 5 * Math.sqrt(expected), "counts " + c + " vs " + expected);
    }
  }

  @Test
  void shardOf_negativeHash_isUnsignedModulo() {
    long h = -3L; // 2^64 - 3
    assertEquals(Long.remainderUnsigned(h, 7), KeyHashing.shardOf(h, 7));
    java.math.BigInteger u = java.math.BigInteger.ONE.shiftLeft(64).subtract(java.math.BigInteger.valueOf(3));
    assertEquals(u.mod(java.math.BigInteger.valueOf(5)).intValue(), KeyHashing.shardOf(h, 5));
  }
}
