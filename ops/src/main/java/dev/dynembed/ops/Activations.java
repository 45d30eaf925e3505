package dev.dynembed.ops;

import dev.dynembed.table.common.FloatKernels;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;

/**
 * One batch of activations [b, d] as {@link SampledLogits} reads them, in the graph's precision,
 * with the two products of the op: logits ({@link #dots}) and gradients ({@link #backward}).
 * FLOAT graphs (training) run on {@link FloatKernels}' SIMD loops; DOUBLE graphs (gradient
 * checks) keep double arithmetic so that finite differences stay meaningful. Row gradients are
 * float either way: the table stores floats.
 */
abstract class Activations {
  final int b;
  final int d;

  private Activations(int b, int d) {
    this.b = b;
    this.d = d;
  }

  static Activations of(INDArray act) {
    int b = (int) act.size(0);
    int d = (int) act.size(1);
    return act.dataType() == DataType.FLOAT ? new Floats(NdArrays.floats(act), b, d)
        : new Doubles(NdArrays.doubles(act), b, d);
  }

  /**
   * {@code out[c] = activations[e] . rows[c][rowOffs[c] .. + d)} for c in [0, m); the float path
   * loads the activation row once per four rows ({@link FloatKernels#dots}).
   */
  abstract void dots(int e, int m, float[][] rows, int[] rowOffs, double[] out);

  /**
   * The backward of m logits of example {@code e}: candidate c is the row at {@code
   * rows[c][rowOffs[c] ..]} with gradient {@code g[c]}; dL/d(activations[e]) += g[c] row, and
   * rowGrad[rowGradOffs[c] .. + d) += g[c] activations[e]. The float path makes one pass over the
   * activation row for all m ({@link FloatKernels#dotBackward}).
   */
  abstract void backward(int e, int m, double[] g, float[][] rows, int[] rowOffs,
      float[] rowGrad, int[] rowGradOffs);

  /** Sets output i of {@code oc} to dL/d(activations) accumulated by {@link #backward}. */
  abstract void gradient(OpContext oc, int i, DataType type);

  private static final class Floats extends Activations {
    private final float[] a;
    private float[] grad;
    private float[] gf = new float[0]; // one example's logit gradients, as floats
    private float[] dotsOut = new float[0]; // one example's logits, as floats

    Floats(float[] a, int b, int d) {
      super(b, d);
      this.a = a;
    }

    @Override
    void dots(int e, int m, float[][] rows, int[] rowOffs, double[] out) {
      if (dotsOut.length < m) {
        dotsOut = new float[m];
      }
      FloatKernels.dots(a, e * d, d, m, rows, rowOffs, dotsOut);
      for (int c = 0; c < m; c++) {
        out[c] = dotsOut[c];
      }
    }

    @Override
    void backward(int e, int m, double[] g, float[][] rows, int[] rowOffs, float[] rowGrad,
        int[] rowGradOffs) {
      if (grad == null) {
        grad = new float[b * d];
      }
      if (gf.length < m) {
        gf = new float[m];
      }
      for (int c = 0; c < m; c++) {
        gf[c] = (float) g[c];
      }
      FloatKernels.dotBackward(a, e * d, grad, e * d, d, m, gf, rows, rowOffs, rowGrad,
          rowGradOffs);
    }

    @Override
    void gradient(OpContext oc, int i, DataType type) {
      NdArrays.output(oc, i, grad == null ? new float[b * d] : grad, type, b, d);
    }
  }

  private static final class Doubles extends Activations {
    private final double[] a;
    private double[] grad;

    Doubles(double[] a, int b, int d) {
      super(b, d);
      this.a = a;
    }

    @Override
    void dots(int e, int m, float[][] rows, int[] rowOffs, double[] out) {
      for (int c = 0; c < m; c++) {
        double s = 0;
        for (int j = 0; j < d; j++) {
          s += a[e * d + j] * rows[c][rowOffs[c] + j];
        }
        out[c] = s;
      }
    }

    private void backward(int e, double g, float[] rows, int r, float[] rowGrad, int gr) {
      if (grad == null) {
        grad = new double[b * d];
      }
      for (int j = 0; j < d; j++) {
        grad[e * d + j] += g * rows[r + j];
        rowGrad[gr + j] += (float) (g * a[e * d + j]);
      }
    }

    @Override
    void backward(int e, int m, double[] g, float[][] rows, int[] rowOffs, float[] rowGrad,
        int[] rowGradOffs) {
      for (int c = 0; c < m; c++) {
        backward(e, g[c], rows[c], rowOffs[c], rowGrad, rowGradOffs[c]);
      }
    }

    @Override
    void gradient(OpContext oc, int i, DataType type) {
      NdArrays.output(oc, i, grad == null ? new double[b * d] : grad, type, b, d);
    }
  }
}
