package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Remembered key arrays give the ops the same strings as decoding, and never a wrong slice. */
class KeyArraysTest {
  private static final String[] KEYS = {"the", "naïve", "日本語", "", "a b", "x", "émigré", "z"};

  @Test
  void rememberedArray_givesTheStrings_andSoDoesDecodingIt() {
    INDArray a = KeyArrays.of(KEYS, 4, 2);
    assertNotNull(KeyArrays.remembered(a));
    assertArrayEquals(KEYS, DynamicEmbeddingLookup.keys(a, "test"));
    assertArrayEquals(KEYS, DynamicEmbeddingLookup.keys(a.reshape(8), "test"));
    // the bytes themselves are UTF-8: ND4J's own decoding reads the same strings
    for (int i = 0; i < KEYS.length; i++) {
      assertEquals(KEYS[i], a.reshape(8).getString(i), "key " + i);
    }
    assertEquals(org.nd4j.linalg.api.buffer.DataType.UTF8, a.dataType());
    assertArrayEquals(new long[] {4, 2}, a.shape());
  }

  /**
   * The reason for KeyArrays: ND4J M2.1's Nd4j.create(List) corrupts non-ASCII keys; the ops
   * refuse such a key with a message that names the fix instead of training a mangled key. If an
   * ND4J upgrade fixes this, the first assertion says so.
   */
  @Test
  void nd4jsOwnStringArrays_corruptNonAscii_andTheOpsSaySo() {
    INDArray plain = Nd4j.create(Arrays.asList(KEYS), 4, 2);
    assertNotEquals(KEYS[1], plain.getString(1), "ND4J now keeps UTF-8: KeyArrays may go");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> DynamicEmbeddingLookup.keys(plain, "dynembed_lookup"));
    assertTrue(e.getMessage().contains("key 1") && e.getMessage().contains("KeyArrays.of"),
        e.getMessage());
    INDArray ascii = Nd4j.create(Arrays.asList("plain", "ascii"), 2);
    assertArrayEquals(new String[] {"plain", "ascii"},
        DynamicEmbeddingLookup.keys(ascii, "test"), "ASCII keys from ND4J still work");
  }

  @Test
  void badShapesAndNullKeys_areRefused() {
    assertThrows(IllegalArgumentException.class, () -> KeyArrays.of(KEYS, 3, 2));
    assertThrows(IllegalArgumentException.class, () -> KeyArrays.of(new String[] {"a", null}));
  }

  @Test
  void callersGetACopy() {
    INDArray a = KeyArrays.of(KEYS);
    String[] first = DynamicEmbeddingLookup.keys(a, "test");
    first[0] = "changed";
    assertArrayEquals(KEYS, DynamicEmbeddingLookup.keys(a, "test"));
  }

  @Test
  void viewsOfARememberedBuffer_areNotTakenForIt() {
    INDArray a = KeyArrays.of(KEYS, 4, 2);
    INDArray row = a.getRow(2); // M2.1 cannot decode views of string arrays itself either
    assertNull(KeyArrays.remembered(row), "a part of the buffer is not its whole key list");
  }

  @Test
  void manyArrays_theOldestAreForgotten_notConfused() {
    INDArray first = KeyArrays.of(new String[] {"first"});
    for (int i = 0; i < KeyArrays.SLOTS; i++) {
      KeyArrays.of(new String[] {"k" + i});
    }
    assertNull(KeyArrays.remembered(first));
    assertArrayEquals(new String[] {"first"}, DynamicEmbeddingLookup.keys(first, "test"));
  }
}
