package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;

/**
 * Top-k hits of a batch of queries: query i owns {@code counts[i]} consecutive entries of {@code
 * keys}/{@code scores}, by descending score.
 */
public record TopKHits(PackedKeys keys, float[] scores, int[] counts) {}
