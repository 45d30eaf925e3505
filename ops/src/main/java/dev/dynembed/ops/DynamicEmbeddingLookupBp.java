package dev.dynembed.ops;

import dev.dynembed.table.common.FloatKernels;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Backward of {@link DynamicEmbeddingLookup}: {@code (keys, handle, dL/d(rows)[, index]) ->
 * dL/d(handle) = 0}, with the side effect the design needs: the gradient rows go to the table,
 * whose optimizer updates them (duplicate keys are summed by the table; the gathered form sums
 * them here, one row per key). In a trainer's step the rows are sent with the step's other
 * gradients when the graph has run ({@link TableStep#submitWrites}).
 */
public final class DynamicEmbeddingLookupBp extends JavaOp {
  static final String OP_NAME = "dynembed_lookup_bp";

  private String table;
  private int dim;

  public DynamicEmbeddingLookupBp() {}

  DynamicEmbeddingLookupBp(SameDiff sd, SDVariable keys, SDVariable handle, SDVariable grad,
      SDVariable index, String table, int dim) {
    super(sd, index == null ? new SDVariable[] {keys, handle, grad}
        : new SDVariable[] {keys, handle, grad, index});
    this.table = table;
    this.dim = dim;
  }

  @Override
  public String opName() {
    return OP_NAME;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    String[] k = DynamicEmbeddingLookup.keys(oc.getInputArray(0), OP_NAME);
    INDArray grad = oc.getInputArray(2);
    float[] g = NdArrays.floats(grad);
    if (oc.getInputArrays().size() == 4) { // gathered: one summed gradient row per key
      int[] idx = DynamicEmbeddingLookup.index(oc.getInputArray(3), k.length, OP_NAME);
      float[] summed = new float[k.length * dim];
      for (int i = 0; i < idx.length; i++) {
        FloatKernels.axpy(1f, g, i * dim, summed, idx[i] * dim, dim);
      }
      g = summed;
    }
    graph.step().applyGradients(graph.table(table), k, g);
    oc.setOutputArray(0, Nd4j.zeros(oc.getInputArray(1).dataType()));
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    return List.of(LongShapeDescriptor.fromShape(new long[0], oc.getInputArray(1).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(1));
  }

  @Override
  public int getNumOutputs() {
    return 1;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("dim", (long) dim);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    dim = in.integer("dim");
  }
}
