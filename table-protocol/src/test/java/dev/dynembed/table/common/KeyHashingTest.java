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

  @Test
  void hash_pinnedValues_neverChange() {
    // Part of the wire contract: a change here re-routes every key of every deployment.
    assertEquals(0x9555e8555c62dcfdL, KeyHashing.hash("hello"));
    assertEquals(0x5a4c1b3ada804b0cL,
        KeyHashing.hash("the quick brown fox jumps over the lazy dog, twice over"));
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
