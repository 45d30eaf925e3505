package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;

/**
 * Top-k hits of a batch of queries: query i owns {@code counts[i]} consecutive entries of {@code
 * keys}/{@code scores}, by descending score; {@code approximate} when the approximate index
 * found them (design 0016), else the exact scan did.
 */
public record TopKHits(PackedKeys keys, float[] scores, int[] counts, boolean approximate) {
  public TopKHits(PackedKeys keys, float[] scores, int[] counts) {
    this(keys, scores, counts, false);
  }
}
