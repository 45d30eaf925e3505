package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
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
 *
 * <p>When the op that consumes the looked-up rows published their curvature in this step (a
 * {@code sampledLogits} with {@link Sampling#implicitRowSteps}), each distinct key's summed
 * gradient is damped by its rows' total curvature, {@code 1 / (1 + 2 lr C)} ({@link
 * ImplicitSteps}).
 */
@JavaOp.Name(DynamicEmbeddingLookupBp.OP_NAME)
public final class DynamicEmbeddingLookupBp extends JavaOp {
  static final String OP_NAME = "dynembed_lookup_bp";

  private String table;
  private int dim;
  /** The forward's output variable, whose rows' curvature a consumer may publish. */
  private String output;

  public DynamicEmbeddingLookupBp() {}

  DynamicEmbeddingLookupBp(SameDiff sd, SDVariable keys, SDVariable handle, SDVariable grad,
      SDVariable index, String table, int dim, String output) {
    super(sd, index == null ? new SDVariable[] {keys, handle, grad}
        : new SDVariable[] {keys, handle, grad, index});
    this.table = table;
    this.dim = dim;
    this.output = output;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    String[] k = DynamicEmbeddingLookup.keys(oc.getInputArray(0), OP_NAME);
    INDArray grad = oc.getInputArray(2);
    float[] g = NdArrays.floats(grad);
    ImplicitSteps.RowCurvature curvature = output == null ? null
        : graph.step().takeCurvature(output);
    int[] idx = null;
    if (oc.getInputArrays().size() == 4) { // gathered: one summed gradient row per key
      idx = DynamicEmbeddingLookup.index(oc.getInputArray(3), k.length, OP_NAME);
      float[] summed = new float[k.length * dim];
      for (int i = 0; i < idx.length; i++) {
        FloatKernels.axpy(1f, g, i * dim, summed, idx[i] * dim, dim);
      }
      g = summed;
    }
    EmbeddingTable t = graph.table(table);
    if (curvature != null) {
      ImplicitSteps.scale(g, dim, factors(k, idx, g, curvature,
          ImplicitSteps.rate(graph.step().learningRate(), t)));
    }
    graph.step().applyGradients(t, k, g);
    oc.setOutputArray(0, Nd4j.zeros(oc.getInputArray(1).dataType()));
  }

  /**
   * The factor of each gradient row {@code g} (one per key when gathered, {@code idx} given; one
   * per output row otherwise, a repeated key's rows summed by the table): the curvature along
   * the key's summed gradient, over every output row of the key.
   */
  private float[] factors(String[] keys, int[] idx, float[] g,
      ImplicitSteps.RowCurvature curvature, float lr) {
    int outRows = idx != null ? idx.length : keys.length;
    if (curvature.rows() != outRows) {
      throw new IllegalStateException(OP_NAME + ": curvature of " + curvature.rows()
          + " rows for " + outRows + " output rows");
    }
    int[] keyOf; // output row -> row of dir holding its key's summed gradient
    float[] dir;
    if (idx != null) {
      keyOf = idx;
      dir = g;
    } else {
      StringIndex distinct = new StringIndex(keys.length);
      keyOf = new int[keys.length];
      for (int i = 0; i < keys.length; i++) {
        keyOf[i] = distinct.add(keys[i]);
      }
      dir = new float[distinct.size() * dim];
      for (int i = 0; i < keys.length; i++) {
        FloatKernels.axpy(1f, g, i * dim, dir, keyOf[i] * dim, dim);
      }
    }
    double[] along = new double[dir.length / dim];
    for (int i = 0; i < outRows; i++) {
      along[keyOf[i]] += curvature.along(i, dir, keyOf[i] * dim);
    }
    float[] out = new float[keys.length];
    for (int r = 0; r < out.length; r++) {
      int q = idx != null ? r : keyOf[r];
      out[r] = ImplicitSteps.factor(lr, along[q], FloatKernels.dot(dir, q * dim, dir, q * dim,
          dim));
    }
    return out;
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
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("dim", (long) dim);
    out.put("output", output);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    dim = in.integer("dim");
    output = in.string("output");
  }
}
