package dev.dynembed.ops;

import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Backward of {@link DynamicEmbeddingBag}: {@code (keys, weights, handle, dL/d(bags)) ->
 * dL/d(handle) = 0}, sending one gradient row per example to the table, which spreads it over
 * the example's keys ({@code scale * weight * g}, summed per key) before its optimizer step. In a
 * trainer's step the batch is sent with the step's other gradients ({@link
 * TableStep#submitWrites}).
 */
@JavaOp.Name(DynamicEmbeddingBagBp.OP_NAME)
public final class DynamicEmbeddingBagBp extends JavaOp {
  static final String OP_NAME = "dynembed_bag_bp";

  private String table;
  private int dim;
  private Combiner combiner = Combiner.SUM;

  public DynamicEmbeddingBagBp() {}

  DynamicEmbeddingBagBp(SameDiff sd, SDVariable keys, SDVariable weights, SDVariable handle,
      SDVariable grad, String table, int dim, Combiner combiner) {
    super(sd, keys, weights, handle, grad);
    this.table = table;
    this.dim = dim;
    this.combiner = combiner;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    DynamicEmbeddingBag.Bags bags = DynamicEmbeddingBag.Bags.of(oc.getInputArray(0),
        oc.getInputArray(1), combiner, OP_NAME);
    if (bags.bags() != null) {
      graph.step().applyPooledGradients(graph.table(table), bags.keys(), bags.bags(),
          NdArrays.floats(oc.getInputArray(3)));
    }
    oc.setOutputArray(0, Nd4j.zeros(oc.getInputArray(2).dataType()));
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    return List.of(LongShapeDescriptor.fromShape(new long[0], oc.getInputArray(2).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(2));
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("dim", (long) dim);
    out.put("combiner", combiner.name());
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    dim = in.integer("dim");
    combiner = Combiner.valueOf(in.string("combiner"));
  }
}
