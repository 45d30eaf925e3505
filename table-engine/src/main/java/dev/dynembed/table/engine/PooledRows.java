package dev.dynembed.table.engine;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;

/**
 * Pooled lookups and pooled gradients on a shard (docs/design/0011-pooled-lookups.md): the rows
 * of a request's keys are combined into one vector per bag where they live, and a gradient per
 * bag is spread back over the bag's keys before the table's optimizer step. The in-process table
 * and the gRPC service both go through here.
 */
public final class PooledRows {
  private PooledRows() {}

  /** Refuses bags that leave a key unused: it would be read, or stepped, for nothing. */
  private static void checkAllUsed(TableStore t, PackedKeys keys, KeyBags bags, String call) {
    try {
      bags.requireAllUsed(keys::key);
    } catch (TableException e) {
      throw TableException.invalid("table '%s': %s: %s", t.name(), call, e.getMessage());
    }
  }

  private static float[] rowsFor(TableStore t, PackedKeys keys, KeyBags bags, String call) {
    Limits.checkReplyFloats(t.name(), call, bags.bags(), t.dim());
    Limits.checkReplyFloats(t.name(), call + " (rows pooled)", keys.size(), t.dim());
    checkAllUsed(t, keys, bags, call);
    return new float[keys.size() * t.dim()];
  }

  /**
   * Pooled rows of existing keys (missing keys pool as zeros, their {@code found} bit clear).
   *
   * @return FLOAT [bags, dim]
   */
  public static float[] find(TableStore t, PackedKeys keys, KeyBags bags, byte[] found) {
    float[] rows = rowsFor(t, keys, bags, "pooled find");
    t.find(keys, rows, found);
    return bags.pool(rows, t.dim());
  }

  /**
   * Pooled rows, creating admitted keys as findOrInsert does; with {@code count}, each key counts
   * its {@code occurrences} (null: once per bag entry that uses it).
   *
   * @return FLOAT [bags, dim]
   */
  public static float[] findOrInsert(TableStore t, PackedKeys keys, KeyBags bags,
      int[] occurrences, boolean count, byte[] found) {
    float[] rows = rowsFor(t, keys, bags, "pooled findOrInsert");
    t.findOrInsert(keys, occurrences != null ? occurrences : bags.occurrences(keys.size()), count,
        rows, found, null);
    return bags.pool(rows, t.dim());
  }

  /**
   * Checks a pooled gradient batch whole (one row per bag, every key used, the spread gradients
   * finite) and returns it as the per-key batch the store applies.
   */
  public static TableStore.CheckedGradients checkGradients(TableStore t, PackedKeys keys,
      KeyBags bags, float[] bagGradients, float learningRate) {
    if ((long) bags.bags() * t.dim() != bagGradients.length) {
      throw TableException.invalid("table '%s' expects pooled gradients of %d bags x dim %d = %d"
          + " floats but the request had %d floats; nothing was applied", t.name(), bags.bags(),
          t.dim(), (long) bags.bags() * t.dim(), bagGradients.length);
    }
    checkAllUsed(t, keys, bags, "pooled applyGradients");
    return t.checkGradients(keys, bags.spread(bagGradients, keys.size(), t.dim()), learningRate);
  }
}
