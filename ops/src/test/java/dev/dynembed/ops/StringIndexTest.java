package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.Random;
import org.junit.jupiter.api.Test;

class StringIndexTest {
  @Test
  void add_numbersDistinctStringsInFirstAppearanceOrder_acrossRehashes() {
    StringIndex idx = new StringIndex(2); // starts small: many rehashes
    LinkedHashMap<String, Integer> want = new LinkedHashMap<>();
    Random r = new Random(7);
    for (int i = 0; i < 20_000; i++) {
      String k = "k" + r.nextInt(3_000);
      int expected = want.computeIfAbsent(k, x -> want.size());
      assertEquals(expected, idx.add(new String(k))); // equal strings, not the same object
    }
    assertEquals(want.size(), idx.size());
    assertArrayEquals(want.keySet().toArray(new String[0]), idx.keys());
  }

  @Test
  void add_collidingHashCodes_stayDistinct() {
    StringIndex idx = new StringIndex(4);
    // "Aa" and "BB" have the same String.hashCode
    assertEquals(0, idx.add("Aa"));
    assertEquals(1, idx.add("BB"));
    assertEquals(0, idx.add("Aa"));
    assertEquals(1, idx.add("BB"));
    assertArrayEquals(new String[] {"Aa", "BB"}, idx.keys());
  }
}
