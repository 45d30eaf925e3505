package dev.dynembed.celltest;

import dev.dynembed.ops.DynamicCell;
import java.util.List;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * A cell with a custom forward and backward: {@code out[i] = rows[i] . x[i]}; the input x gets
 * its true gradient ({@code dL/dout[i] rows[i]}), the rows a perceptron's feedback instead of
 * theirs: {@code sign(dL/dout[i]) x[i]}.
 */
public final class SignedDotCell implements DynamicCell {
  @Override
  public String name() {
    return "test_signed_dot";
  }

  @Override
  public long[] outputShape(long[] rowsShape, List<long[]> inputShapes) {
    return new long[] {rowsShape[0]};
  }

  @Override
  public INDArray forward(INDArray rows, List<INDArray> inputs) {
    return rows.mul(inputs.get(0)).sum(1);
  }

  @Override
  public Backward backward(INDArray rows, List<INDArray> inputs, INDArray outputGrad) {
    INDArray g = outputGrad.reshape(outputGrad.length(), 1);
    INDArray feedback = inputs.get(0).mulColumnVector(Transforms.sign(g, true));
    return new Backward(feedback, List.of(rows.mulColumnVector(g)));
  }
}
