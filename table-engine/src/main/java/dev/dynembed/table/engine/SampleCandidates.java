package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowSink;

/**
 * The candidates of one sample call on one shard: the positives first, then the drawn keys.
 *
 * @param keys positives then samples
 * @param positive whether candidate i is a positive
 * @param probability candidate i's probability per draw under this shard's distribution
 * @param mass the shard's sampler mass (key count, or sum of frequency^alpha)
 * @param numKeys keys the sampler snapshot covers
 * @param distinctRows with distinct draws: the store's row ids of the distinct drawn keys (which
 *     follow the positives in {@code keys}), for {@link #copyRows}; else null
 * @param drawIndex with distinct draws: INT [numSampled], which distinct key draw j drew; else null
 */
public record SampleCandidates(PackedKeys keys, boolean[] positive, double[] probability,
    double mass, int numKeys, int[] distinctRows, int[] drawIndex) {
  public SampleCandidates(PackedKeys keys, boolean[] positive, double[] probability, double mass,
      int numKeys) {
    this(keys, positive, probability, mass, numKeys, null, null);
  }

  /** Number of distinct drawn keys (0 without distinct draws). */
  public int distinctCount() {
    return distinctRows == null ? 0 : distinctRows.length;
  }

  /** Writes the optimizer slots and update counts of the distinct drawn keys. */
  public void copySlots(TableStore table, RowSink out, long[] updateCounts) {
    for (int i = 0; i < distinctCount(); i++) {
      if (distinctRows[i] < 0) { // a drawn cold key removed since the snapshot
        out.zeros(i, table.slotFloats());
        continue;
      }
      table.copySlots(distinctRows[i], out, i);
      updateCounts[i] = table.meta(distinctRows[i], TableStore.M_UPDATES);
    }
  }

  /** Writes the rows of the distinct drawn keys of {@code table} (the store that drew them). */
  public void copyRows(TableStore table, RowSink out) {
    for (int i = 0; i < distinctCount(); i++) {
      if (distinctRows[i] < 0) {
        out.zeros(i, table.dim);
        continue;
      }
      table.copyRow(distinctRows[i], out, i);
    }
  }
}
