package dev.dynembed.table.client;

/**
 * @param keys per query, up to k keys by descending score (fewer when the table is smaller)
 * @param scores per query, the matching scores
 * @param approximateShards shards that answered from their approximate index (the others
 *     scanned exactly)
 */
public record TopKResult(String[][] keys, float[][] scores, int approximateShards) {
  public TopKResult(String[][] keys, float[][] scores) {
    this(keys, scores, 0);
  }
}
