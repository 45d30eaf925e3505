package dev.dynembed.table.server;

import dev.dynembed.table.common.PackedKeys;

/**
 * The candidates of one sample call on one shard: the positives first, then the drawn keys.
 *
 * @param keys positives then samples
 * @param positive whether candidate i is a positive
 * @param probability candidate i's probability per draw under this shard's distribution
 * @param mass the shard's sampler mass (key count, or sum of frequency^alpha)
 * @param numKeys keys the sampler snapshot covers
 * @param rows with distinct draws: FLOAT [u, dim], the rows of the distinct drawn keys (which
 *     follow the positives in {@code keys}); else null
 * @param drawIndex with distinct draws: INT [numSampled], which distinct key draw j drew; else null
 */
public record SampleCandidates(PackedKeys keys, boolean[] positive, double[] probability,
    double mass, int numKeys, float[] rows, int[] drawIndex) {
  public SampleCandidates(PackedKeys keys, boolean[] positive, double[] probability, double mass,
      int numKeys) {
    this(keys, positive, probability, mass, numKeys, null, null);
  }
}
