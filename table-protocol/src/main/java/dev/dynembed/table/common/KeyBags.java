package dev.dynembed.table.common;

import dev.dynembed.table.v1.Bags;

/**
 * Bags of keys for a pooled lookup (docs/design/0011-pooled-lookups.md): bag b is {@code
 * scale[b] * sum_e weight[e] * row(keyIndex[e])} over its entries, entries {@code [offset(b),
 * offset(b + 1))}. Key indexes point into the key batch the bags travel with. The same layout
 * pools rows on a shard ({@link #pool}) and spreads one gradient row per bag back over the keys
 * ({@link #spread}), so a pooled lookup and its gradient are exact transposes.
 *
 * <p>Immutable once built; validated on construction (a shard cannot trust its callers), with
 * messages that name the bag or entry at fault.
 */
public final class KeyBags {
  /** Most bags in one request, as for keys. */
  public static final int MAX_BAGS = Limits.MAX_BATCH_KEYS;
  /** Most entries (key uses) in one request. */
  public static final int MAX_ENTRIES = 1 << 24;

  private final int[] offsets; // bags + 1
  private final int[] keyIndex;
  private final float[] weights; // null: 1 each
  private final float[] scales; // null: 1 each
  private final int numKeys;

  private KeyBags(int[] offsets, int[] keyIndex, float[] weights, float[] scales, int numKeys) {
    this.numKeys = numKeys;
    this.offsets = offsets;
    this.keyIndex = keyIndex;
    this.weights = weights;
    this.scales = scales;
  }

  /**
   * Bags over a batch of {@code numKeys} keys.
   *
   * @param bagSizes entries per bag
   * @param keyIndex per entry, in [0, numKeys)
   * @param weights per entry, finite, or null for 1 each
   * @param scales per bag, finite, or null for 1 each
   * @throws TableException INVALID_ARGUMENT naming what is wrong
   */
  public static KeyBags of(int[] bagSizes, int[] keyIndex, float[] weights, float[] scales,
      int numKeys) {
    int bags = bagSizes.length;
    if (bags < 1 || bags > MAX_BAGS) {
      throw TableException.invalid("a pooled request must hold 1..%d bags but had %d", MAX_BAGS,
          bags);
    }
    if (keyIndex.length > MAX_ENTRIES) {
      throw TableException.invalid("a pooled request may hold at most %d bag entries but had %d",
          MAX_ENTRIES, keyIndex.length);
    }
    int[] offsets = new int[bags + 1];
    long total = 0;
    for (int b = 0; b < bags; b++) {
      if (bagSizes[b] < 0) {
        throw TableException.invalid("bag %d has a negative size (%d)", b, bagSizes[b]);
      }
      total += bagSizes[b];
      if (total > keyIndex.length) {
        break;
      }
      offsets[b + 1] = (int) total;
    }
    if (total != keyIndex.length) {
      throw TableException.invalid("the bag sizes add up to %s entries but %d key indexes were"
          + " given", total > keyIndex.length ? "more than " + keyIndex.length : total,
          keyIndex.length);
    }
    for (int e = 0; e < keyIndex.length; e++) {
      if (keyIndex[e] < 0 || keyIndex[e] >= numKeys) {
        throw TableException.invalid("bag entry %d names key %d but the request has %d keys", e,
            Integer.toUnsignedLong(keyIndex[e]), numKeys);
      }
    }
    if (weights != null) {
      if (weights.length != keyIndex.length) {
        throw TableException.invalid("%d bag weights for %d entries: give one per entry, or"
            + " none for 1 each", weights.length, keyIndex.length);
      }
      int k = FloatKernels.firstNonFinite(weights, 0, weights.length);
      if (k >= 0) {
        throw TableException.invalid("weight of bag entry %d is %s", k, weights[k]);
      }
    }
    if (scales != null) {
      if (scales.length != bags) {
        throw TableException.invalid("%d bag scales for %d bags: give one per bag, or none for"
            + " 1 each", scales.length, bags);
      }
      int k = FloatKernels.firstNonFinite(scales, 0, scales.length);
      if (k >= 0) {
        throw TableException.invalid("scale of bag %d is %s", k, scales[k]);
      }
    }
    return new KeyBags(offsets, keyIndex, weights, scales, numKeys);
  }

  /** The bags of a request over {@code numKeys} keys; INVALID_ARGUMENT when malformed. */
  public static KeyBags fromProto(Bags p, int numKeys) {
    int[] sizes = new int[p.getBagSizesCount()];
    for (int b = 0; b < sizes.length; b++) {
      sizes[b] = p.getBagSizes(b); // uint32 above 2^31 reads negative: refused by of()
    }
    int[] idx = new int[p.getKeyIndexCount()];
    for (int e = 0; e < idx.length; e++) {
      idx[e] = p.getKeyIndex(e);
    }
    return of(sizes, idx, floats(p.getWeightsList()), floats(p.getBagScalesList()), numKeys);
  }

  private static float[] floats(java.util.List<Float> list) {
    if (list.isEmpty()) {
      return null;
    }
    float[] out = new float[list.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = list.get(i);
    }
    return out;
  }

  public Bags toProto() {
    Bags.Builder b = Bags.newBuilder();
    for (int i = 0; i < bags(); i++) {
      b.addBagSizes(offsets[i + 1] - offsets[i]);
    }
    for (int k : keyIndex) {
      b.addKeyIndex(k);
    }
    if (weights != null) {
      for (float w : weights) {
        b.addWeights(w);
      }
    }
    if (scales != null) {
      for (float s : scales) {
        b.addBagScales(s);
      }
    }
    return b.build();
  }

  public int bags() {
    return offsets.length - 1;
  }

  public int entries() {
    return keyIndex.length;
  }

  /** The key of entry {@code e}: an index into the key batch. */
  public int keyIndex(int e) {
    return keyIndex[e];
  }

  /**
   * The key of every entry, in entry order ({@code keys[keyIndex(e)]}): a lookup of these counts
   * each key once per entry that uses it.
   */
  public String[] entryKeys(String[] keys) {
    String[] out = new String[keyIndex.length];
    for (int e = 0; e < out.length; e++) {
      out[e] = keys[keyIndex[e]];
    }
    return out;
  }

  /**
   * The rows of a lookup of {@link #entryKeys} (FLOAT [entries, dim]) as one row per key (FLOAT
   * [numKeys, dim], the layout {@link #pool} takes); every entry of a key read the same row.
   */
  public float[] keyRows(float[] entryRows, int dim) {
    float[] rows = new float[numKeys * dim];
    for (int e = 0; e < keyIndex.length; e++) {
      System.arraycopy(entryRows, e * dim, rows, keyIndex[e] * dim, dim);
    }
    return rows;
  }

  /** The number of keys the bags index (the size of the key batch they travel with). */
  public int numKeys() {
    return numKeys;
  }

  /** The weight of entry e times its bag's scale: the coefficient of its key's row. */
  private float coefficient(int b, int e) {
    float w = weights == null ? 1f : weights[e];
    return scales == null ? w : w * scales[b];
  }

  /**
   * Pools {@code rows} (FLOAT [numKeys, dim], row k for key k) into {@code out} (FLOAT [bags,
   * dim], overwritten). A bag without entries pools to zeros.
   */
  public void pool(float[] rows, int dim, float[] out) {
    java.util.Arrays.fill(out, 0, bags() * dim, 0f);
    for (int b = 0; b < bags(); b++) {
      for (int e = offsets[b]; e < offsets[b + 1]; e++) {
        FloatKernels.axpy(coefficient(b, e), rows, keyIndex[e] * dim, out, b * dim, dim);
      }
    }
  }

  /** As {@link #pool(float[], int, float[])}, into a new array. */
  public float[] pool(float[] rows, int dim) {
    float[] out = new float[bags() * dim];
    pool(rows, dim, out);
    return out;
  }

  /**
   * The gradient of each key from one gradient row per bag: {@code sum over the key's entries of
   * scale[b] * weight[e] * bagGradients[b]}, FLOAT [numKeys, dim] (zeros for a key in no bag).
   */
  public float[] spread(float[] bagGradients, int numKeys, int dim) {
    if ((long) bags() * dim != bagGradients.length) {
      throw TableException.invalid("pooled gradients must hold %d bags x dim %d = %d floats but"
          + " had %d", bags(), dim, (long) bags() * dim, bagGradients.length);
    }
    float[] out = new float[numKeys * dim];
    for (int b = 0; b < bags(); b++) {
      for (int e = offsets[b]; e < offsets[b + 1]; e++) {
        FloatKernels.axpy(coefficient(b, e), bagGradients, b * dim, out, keyIndex[e] * dim, dim);
      }
    }
    return out;
  }

  /** Entries that use each key: its occurrences in the bags. */
  public int[] occurrences(int numKeys) {
    int[] occ = new int[numKeys];
    for (int k : keyIndex) {
      occ[k]++;
    }
    return occ;
  }

  /**
   * The first key of {@code numKeys} that no bag uses, or -1. A pooled gradient for such a key
   * would be an optimizer step on a zero gradient, which moves rows under momentum or Adam.
   */
  public int firstUnused(int numKeys) {
    boolean[] used = new boolean[numKeys];
    for (int k : keyIndex) {
      used[k] = true;
    }
    for (int k = 0; k < numKeys; k++) {
      if (!used[k]) {
        return k;
      }
    }
    return -1;
  }

  /**
   * Refuses (INVALID_ARGUMENT) bags that leave a key of their batch unused: a pooled read would
   * fetch it for nothing, a pooled gradient would step it on a zero gradient.
   *
   * @param keyName the key at an index of the batch, for the message
   */
  public void requireAllUsed(java.util.function.IntFunction<String> keyName) {
    int k = firstUnused(numKeys);
    if (k >= 0) {
      throw TableException.invalid("key %d ('%s') is in no bag; send only the keys the bags use",
          k, keyName.apply(k));
    }
  }

  /** Refuses (INVALID_ARGUMENT) a key batch of another size than the bags were built over. */
  public void requireKeys(int keys) {
    if (keys != numKeys) {
      throw TableException.invalid("bags built over %d keys were sent with %d keys", numKeys,
          keys);
    }
  }

  /**
   * Splits the bags over shards: shard s gets every bag (so that partial vectors line up), with
   * only the entries of its keys, their indexes renumbered to the shard's key order, and the
   * bags' full scales.
   *
   * @param shardOf per key of this batch: the shard that owns it
   * @param posInShard per key: its index among the shard's keys
   */
  public KeyBags[] split(int[] shardOf, int[] posInShard, int numShards) {
    int bags = bags();
    int[][] sizes = new int[numShards][bags];
    int[] entries = new int[numShards];
    for (int b = 0; b < bags; b++) {
      for (int e = offsets[b]; e < offsets[b + 1]; e++) {
        int s = shardOf[keyIndex[e]];
        sizes[s][b]++;
        entries[s]++;
      }
    }
    int[][] idx = new int[numShards][];
    float[][] w = new float[numShards][];
    for (int s = 0; s < numShards; s++) {
      idx[s] = new int[entries[s]];
      w[s] = weights == null ? null : new float[entries[s]];
    }
    int[] fill = new int[numShards];
    int[] keyCounts = new int[numShards];
    for (int k = 0; k < numKeys; k++) {
      keyCounts[shardOf[k]] = Math.max(keyCounts[shardOf[k]], posInShard[k] + 1);
    }
    for (int e = 0; e < keyIndex.length; e++) { // entries stay in bag order within a shard
      int s = shardOf[keyIndex[e]];
      int at = fill[s]++;
      idx[s][at] = posInShard[keyIndex[e]];
      if (weights != null) {
        w[s][at] = weights[e];
      }
    }
    KeyBags[] out = new KeyBags[numShards];
    for (int s = 0; s < numShards; s++) {
      int[] off = new int[bags + 1];
      for (int b = 0; b < bags; b++) {
        off[b + 1] = off[b] + sizes[s][b];
      }
      out[s] = new KeyBags(off, idx[s], w[s], scales, keyCounts[s]);
    }
    return out;
  }
}
