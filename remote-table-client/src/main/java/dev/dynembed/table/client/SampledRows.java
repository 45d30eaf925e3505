package dev.dynembed.table.client;

/**
 * The reply of {@link EmbeddingTable#sampleDistinct}: draws de-duplicated, each distinct key once
 * with its row.
 *
 * @param positiveProbability FLOAT64 [p]: each positive's probability per draw
 * @param keys UTF8 [u]: the distinct drawn keys
 * @param rows FLOAT [u, dim]: their rows
 * @param probability FLOAT64 [u]: each one's probability per draw over the whole table
 * @param drawIndex INT [numSampled]: draw j drew {@code keys[drawIndex[j]]}
 */
public record SampledRows(double[] positiveProbability, String[] keys, float[] rows,
    double[] probability, int[] drawIndex) {}
