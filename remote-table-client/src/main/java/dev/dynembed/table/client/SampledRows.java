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
 * @param slots FLOAT [u, slots x dim]: their optimizer slots, when asked for ({@link
 *     TableReads#sampleDistinct(EmbeddingTable, String[], int,
 *     dev.dynembed.table.v1.SamplerKind, float, long, boolean)}); else null
 * @param updateCounts LONG [u]: their update counts, when asked for; else null
 */
public record SampledRows(double[] positiveProbability, String[] keys, float[] rows,
    double[] probability, int[] drawIndex, float[] slots, long[] updateCounts) {
  public SampledRows(double[] positiveProbability, String[] keys, float[] rows,
      double[] probability, int[] drawIndex) {
    this(positiveProbability, keys, rows, probability, drawIndex, null, null);
  }
}
