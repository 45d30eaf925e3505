package dev.dynembed.table.common;

/**
 * De-duplicates the keys of a batch: {@link #uniqueOf(int)} maps each position to the id of its
 * distinct key (0..{@link #uniqueCount()}-1, in order of first occurrence) and {@link
 * #firstPosition(int)} maps a distinct key back to its first position. One open-addressing pass,
 * no boxing.
 */
public final class BatchDedup {
  private final int[] uniqueOf;
  private final int[] firstPos;
  private final int uniqueCount;

  private BatchDedup(int[] uniqueOf, int[] firstPos, int uniqueCount) {
    this.uniqueOf = uniqueOf;
    this.firstPos = firstPos;
    this.uniqueCount = uniqueCount;
  }

  public static BatchDedup of(PackedKeys keys) {
    int n = keys.size();
    int cap = Integer.highestOneBit(Math.max(4, n * 2 - 1)) << 1;
    int mask = cap - 1;
    int[] table = new int[cap]; // unique id + 1; 0 = empty
    int[] uniqueOf = new int[n];
    int[] firstPos = new int[n];
    int unique = 0;
    byte[] bytes = keys.bytes();
    for (int i = 0; i < n; i++) {
      long h = keys.hash(i);
      int slot = (int) KeyHashing.mix(h) & mask;
      while (true) {
        int u = table[slot];
        if (u == 0) {
          table[slot] = unique + 1;
          firstPos[unique] = i;
          uniqueOf[i] = unique++;
          break;
        }
        int p = firstPos[u - 1];
        if (keys.hash(p) == h && keys.keyEquals(i, bytes, keys.offset(p), keys.length(p))) {
          uniqueOf[i] = u - 1;
          break;
        }
        slot = (slot + 1) & mask;
      }
    }
    return new BatchDedup(uniqueOf, firstPos, unique);
  }

  public int uniqueCount() {
    return uniqueCount;
  }

  public int uniqueOf(int position) {
    return uniqueOf[position];
  }

  public int firstPosition(int unique) {
    return firstPos[unique];
  }

  /** Whether every key of the batch is distinct. */
  public boolean allDistinct() {
    return uniqueCount == uniqueOf.length;
  }
}
