package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.common.FloatKernels;
import dev.dynembed.table.common.RowOptimizer;
import java.util.ArrayList;
import java.util.List;

/**
 * The gradient batches a trainer step sent, kept so that the next step can replay them on rows
 * it read before they were applied ("read my writes" for pipelined steps; docs/design/
 * 0007-pipelined-steps.md). A shard applies each batch of a call in turn, duplicate keys of a
 * batch summed, with the table's optimizer at the step's learning rate; {@link #replay} does the
 * same to a copy of the rows, from the optimizer slots and update counts that were read with them,
 * with the same code ({@link RowOptimizer}). So a pipelined step sees its own trainer's previous
 * updates exactly as a fresh read would; only other trainers' concurrent updates can be missing
 * (the Hogwild relaxation that any read has).
 */
final class OwnUpdates {
  /**
   * One batch as sent; as the shard applies it (distinct keys, gradients summed per key) once a
   * replay needs it.
   */
  private static final class Batch {
    final EmbeddingTable table;
    final String[] keys;
    final float[] gradients;
    final float lr;
    StringIndex index;
    float[] summed;

    Batch(EmbeddingTable table, String[] keys, float[] gradients, float lr) {
      this.table = table;
      this.keys = keys;
      this.gradients = gradients;
      this.lr = lr > 0 ? lr : table.config().getOptimizer().getLearningRate();
    }

    void index() {
      if (index != null) {
        return;
      }
      int dim = table.dim();
      index = new StringIndex(keys.length);
      summed = new float[keys.length * dim];
      for (int i = 0; i < keys.length; i++) {
        int u = index.size();
        int id = index.add(keys[i]);
        if (id == u) { // first occurrence: copied, later ones added (the shard's order)
          System.arraycopy(gradients, i * dim, summed, id * dim, dim);
        } else {
          FloatKernels.axpy(1f, gradients, i * dim, summed, id * dim, dim);
        }
      }
    }
  }

  private final List<Batch> batches = new ArrayList<>();

  /**
   * Records a batch sent with learning rate {@code lr} (0: the table's own); the arrays are
   * kept, not copied (the sender does not change them).
   */
  void add(EmbeddingTable table, String[] keys, float[] gradients, float lr) {
    batches.add(new Batch(table, keys, gradients, lr));
  }

  boolean isEmpty() {
    return batches.isEmpty();
  }

  /**
   * Applies this step's batches of {@code table} to rows read before they were: row i (key
   * {@code keys[i]}, skipped where {@code found[i]} is false: the shard drops gradients of keys
   * without a row) with its slots and update count, all updated in place.
   *
   * @param rows FLOAT [n, dim]
   * @param slots FLOAT [n, slots x dim], or null for an optimizer without slots
   * @param counts LONG [n] update counts as read
   * @return rows updated
   */
  int replay(EmbeddingTable table, String[] keys, boolean[] found, float[] rows, float[] slots,
      long[] counts) {
    RowOptimizer opt = null;
    int dim = table.dim();
    int slotFloats = slots == null ? 0 : slots.length / Math.max(1, keys.length);
    float[] noSlots = new float[0];
    int replayed = 0;
    for (Batch b : batches) {
      if (b.table != table) {
        continue;
      }
      if (opt == null) {
        opt = RowOptimizer.create(table.config().getOptimizer(), dim);
      }
      b.index();
      for (int i = 0; i < keys.length; i++) {
        int u = found[i] ? b.index.indexOf(keys[i]) : -1;
        if (u < 0) {
          continue;
        }
        long t = ++counts[i];
        opt.apply(rows, i * dim, slots == null ? noSlots : slots, i * slotFloats, b.summed,
            u * dim, b.lr, t);
        replayed++;
      }
    }
    return replayed;
  }
}
