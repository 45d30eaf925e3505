package dev.dynembed.ops;

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
 * Backward of {@link SampledLogits}: {@code (activations, handle, dL/d(logits)) ->
 * (dL/d(activations), dL/d(handle) = 0)}, and the candidate rows' gradients go to the table.
 */
public final class SampledLogitsBp extends JavaOp {
  static final String OP_NAME = "dynembed_sampled_logits_bp";

  private String table;
  private String forward;

  public SampledLogitsBp() {}

  SampledLogitsBp(SameDiff sd, SDVariable activations, SDVariable handle, SDVariable gradLogits,
      String table, String forward) {
    super(sd, activations, handle, gradLogits);
    this.table = table;
    this.forward = forward;
  }

  @Override
  public String opName() {
    return OP_NAME;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    SampledLogits.Forward f = graph.step().takeForward(forward, SampledLogits.Forward.class);
    INDArray act = oc.getInputArray(0);
    Activations a = f.activations(); // the forward's copy: the same array in the same step
    double[] g = NdArrays.doubles(oc.getInputArray(2));
    int b = f.b();
    int p = f.p();
    int s = f.s();
    int d = f.d();
    int np = f.uniq().length;
    int u = f.sampled().length;
    // one gradient row per distinct key: the positives', then the sampled keys' (a key both
    // positive and sampled appears twice; the table sums duplicates)
    float[] rowGrads = new float[(np + u) * d];
    double[] mask = f.mask();
    int[] posIdx = f.posIdx();
    float[] posRows = f.posRows();
    float[] sampRows = f.sampRows();
    int[] sampIdx = f.sampIdx();
    boolean[] hit = f.hit();
    // each example's live logits (the forward's candidates) in one pass over its activation row
    double[] cg = new double[p + s];
    float[][] cRows = new float[p + s][];
    int[] cOff = new int[p + s];
    int[] cSlot = new int[p + s];
    int[] cGradOff = new int[p + s];
    for (int e = 0; e < b; e++) {
      int m = SampledLogits.candidates(e, mask, posIdx, posRows, sampIdx, sampRows, hit, p, s, d,
          cRows, cOff, cSlot);
      for (int c = 0; c < m; c++) {
        cg[c] = g[e * (p + s) + cSlot[c]];
        cGradOff[c] = cSlot[c] < p ? cOff[c] : np * d + cOff[c]; // sampled rows follow positives
      }
      a.backward(e, m, cg, cRows, cOff, rowGrads, cGradOff);
    }
    String[] keys = new String[np + u];
    System.arraycopy(f.uniq(), 0, keys, 0, np);
    System.arraycopy(f.sampled(), 0, keys, np, u);
    if (keys.length > 0) {
      graph.step().applyGradients(graph.table(table), keys, rowGrads);
    }
    a.gradient(oc, 0, act.dataType());
    oc.setOutputArray(1, Nd4j.zeros(oc.getInputArray(1).dataType()));
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    INDArray act = oc.getInputArray(0);
    return List.of(LongShapeDescriptor.fromShape(act.shape(), act.dataType()),
        LongShapeDescriptor.fromShape(new long[0], oc.getInputArray(1).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(0), inputs.get(1));
  }

  @Override
  public int getNumOutputs() {
    return 2;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("forward", forward);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    forward = in.string("forward");
  }
}
