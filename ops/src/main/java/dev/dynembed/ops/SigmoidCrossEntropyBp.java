package dev.dynembed.ops;

import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/** Backward of {@link SigmoidCrossEntropy}: {@code dL/dx = (sigmoid(x) - y) * dL/dloss[row]}. */
@JavaOp.Name(SigmoidCrossEntropyBp.OP_NAME)
public final class SigmoidCrossEntropyBp extends JavaOp {
  static final String OP_NAME = "dynembed_sigmoid_xent_bp";

  public SigmoidCrossEntropyBp() {}

  SigmoidCrossEntropyBp(SameDiff sd, SDVariable logits, SDVariable labels, SDVariable grad) {
    super(sd, logits, labels, grad);
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    INDArray xs = oc.getInputArray(0);
    INDArray ys = oc.getInputArray(1);
    SigmoidCrossEntropy.checkShapes(xs, ys, OP_NAME);
    int b = (int) xs.size(0);
    int c = (int) xs.size(1);
    INDArray gs = oc.getInputArray(2);
    if (gs.length() != b) {
      throw new IllegalArgumentException(OP_NAME + ": the incoming gradient must be [" + b + "]");
    }
    if (xs.dataType() == DataType.FLOAT && ys.dataType() == DataType.FLOAT) {
      float[] dx = new float[b * c];
      SigmoidKernels.sigmoidMinus(NdArrays.floats(xs), NdArrays.floats(ys), dx, b * c);
      float[] gf = NdArrays.floats(gs);
      for (int e = 0; e < b; e++) {
        for (int j = e * c; j < (e + 1) * c; j++) {
          dx[j] *= gf[e];
        }
      }
      NdArrays.output(oc, 0, dx, DataType.FLOAT, b, c);
      return;
    }
    double[] x = NdArrays.doubles(xs);
    double[] y = NdArrays.doubles(ys);
    double[] g = NdArrays.doubles(gs);
    double[] dx = new double[b * c];
    for (int e = 0; e < b; e++) {
      for (int j = e * c; j < (e + 1) * c; j++) {
        dx[j] = (SigmoidKernels.sigmoid(x[j]) - y[j]) * g[e];
      }
    }
    NdArrays.output(oc, 0, dx, xs.dataType(), b, c);
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    INDArray x = oc.getInputArray(0);
    return List.of(LongShapeDescriptor.fromShape(x.shape(), x.dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(0));
  }

  @Override
  void properties(Map<String, Object> out) {}

  @Override
  void readProperties(Props in) {}
}
