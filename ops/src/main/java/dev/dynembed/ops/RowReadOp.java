package dev.dynembed.ops;

import java.util.Map;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;

/**
 * A table op that reads rows of keys: {@link DynamicEmbeddingLookup} (a row per key), {@link
 * DynamicEmbeddingBag} (rows pooled per example) and {@link CellOp} (a user's cell over the
 * rows). They carry the same attributes, saved with the
 * graph under the same names: the table, its row width, whether the op trains (creates rows and
 * sends gradients) and whether its reads count keys for admission and sampling.
 */
abstract class RowReadOp extends TableOp {
  String table;
  int dim;
  boolean training;
  boolean count = true;

  RowReadOp() {}

  RowReadOp(SameDiff sd, SDVariable[] args, String table, int dim, boolean training,
      boolean count) {
    super(sd, args);
    this.table = table;
    this.dim = dim;
    this.training = training;
    this.count = count;
  }

  /** Whether the op creates rows and sends gradients (false: an inference lookup). */
  final boolean training() {
    return training;
  }

  /** The shape of the rows of keys shaped {@code keys}: that shape, then dim. */
  final long[] rowsShape(INDArray keys) {
    long[] shape = java.util.Arrays.copyOf(keys.shape(), keys.rank() + 1);
    shape[keys.rank()] = dim;
    return shape;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("dim", (long) dim);
    out.put("training", training);
    out.put("count", count);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    dim = in.integer("dim");
    training = in.bool("training");
    count = in.bool("count");
  }
}
