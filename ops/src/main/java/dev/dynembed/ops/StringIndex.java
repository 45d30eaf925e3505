package dev.dynembed.ops;

import java.util.Arrays;

/**
 * Distinct strings numbered in order of first appearance: an open-addressing table of int ids,
 * without the boxed values and entry objects of a {@code LinkedHashMap<String, Integer>} (whose
 * allocation was ~10% of a word2vec step in a profile).
 */
public final class StringIndex {
  private String[] keys;
  private int[] slots; // id + 1, 0 = empty
  private int size;

  public StringIndex(int expected) {
    int cap = Integer.highestOneBit(Math.max(4, expected * 2 - 1)) << 1;
    slots = new int[cap];
    keys = new String[Math.max(4, expected)];
  }

  /** The id of {@code key}, adding it with the next id if new. */
  public int add(String key) {
    int i = slotOf(key);
    if (slots[i] != 0) {
      return slots[i] - 1;
    }
    if (size == keys.length) {
      keys = Arrays.copyOf(keys, size * 2);
    }
    keys[size] = key;
    slots[i] = ++size;
    if (size * 2 > slots.length) {
      rehash();
    }
    return size - 1;
  }

  /** The id of {@code key}, or -1 if it was never added. */
  public int indexOf(String key) {
    return slots[slotOf(key)] - 1;
  }

  /** The slot holding {@code key}, or the empty slot where it would go (linear probing). */
  private int slotOf(String key) {
    int mask = slots.length - 1;
    int h = key.hashCode();
    int i = (h ^ (h >>> 16)) & mask;
    while (slots[i] != 0 && !keys[slots[i] - 1].equals(key)) {
      i = (i + 1) & mask;
    }
    return i;
  }

  public int size() {
    return size;
  }

  /** The distinct strings, in id order. */
  public String[] keys() {
    return Arrays.copyOf(keys, size);
  }

  private void rehash() {
    slots = new int[slots.length * 2];
    int mask = slots.length - 1;
    for (int id = 0; id < size; id++) {
      int h = keys[id].hashCode();
      int i = (h ^ (h >>> 16)) & mask;
      while (slots[i] != 0) {
        i = (i + 1) & mask;
      }
      slots[i] = id + 1;
    }
  }
}
