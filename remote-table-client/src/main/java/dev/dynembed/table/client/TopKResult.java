package dev.dynembed.table.client;

/**
 * @param keys per query, up to k keys by descending score (fewer when the table is smaller)
 * @param scores per query, the matching scores
 */
public record TopKResult(String[][] keys, float[][] scores) {}
