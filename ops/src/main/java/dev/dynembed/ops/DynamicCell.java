package dev.dynembed.ops;

import java.util.List;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A layer over a table's rows with a forward and a backward of its own (the DynamicEmbedding
 * paper's DynamicCell; docs/design/0025-cells-and-rules.md): the forward maps the rows of the
 * batch's keys and the cell's other inputs to an output (the "action"); the backward maps the
 * output's gradient to the <em>feedback</em> each row receives, sent to the table, and to the
 * gradients of the other inputs, which flow on through the graph as usual. What the table does
 * with a row's feedback is its rule ({@link dev.dynembed.table.common.RowRule}): for a gradient
 * and a built-in optimizer, a descent step; for other feedback, any update a rule on the shard's
 * class path defines (a "reaction").
 *
 * <p>Register a cell once per process ({@link Cells#register}) and put it in a graph with {@link
 * DynEmbed#cell}. A graph names its cells, and saved graphs find them by that name: a process that
 * loads or runs the graph registers the same cell first. A cell holds no state of its own (one
 * instance serves every graph and thread); its arrays are the table's floating-point type
 * (FLOAT, or DOUBLE for gradient checks).
 *
 * <p>{@link Cells#gradient()} is the cell of {@code dynamicEmbeddingLookup}: the rows are the
 * output, and the output's gradient is the feedback.
 */
public interface DynamicCell {
  /** The name graphs refer to the cell by: {@code [A-Za-z0-9_.-]{1,128}}. */
  String name();

  /**
   * The output's shape for rows of {@code rowsShape} (the keys' shape and then dim: {@code [n,
   * dim]} or {@code [b, s, dim]}) and the other inputs' shapes.
   */
  long[] outputShape(long[] rowsShape, List<long[]> inputShapes);

  /** The output of the rows read for the keys (new keys' rows freshly initialised in training). */
  INDArray forward(INDArray rows, List<INDArray> inputs);

  /**
   * The feedback for each row (the rows' shape; sent to the table in training, where a key that
   * occurs more than once in a batch gets the sum of its rows' feedback) and the gradient of the
   * loss for each other input (its shape), given the output's gradient.
   */
  Backward backward(INDArray rows, List<INDArray> inputs, INDArray outputGrad);

  /** What a backward returns: one feedback row per row, one gradient per other input. */
  record Backward(INDArray feedback, List<INDArray> inputGrads) {}
}
