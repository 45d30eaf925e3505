package dev.dynembed.table.client;

/**
 * One page of a table scan ({@link EmbeddingTable#scan}): keys, their rows (FLOAT [n, dim],
 * row-major), frequencies and last-update steps.
 */
public record ScanPage(String[] keys, float[] rows, long[] frequencies, long[] steps) {}
