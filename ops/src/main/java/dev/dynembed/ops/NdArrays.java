package dev.dynembed.ops;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Copies between ND4J arrays and Java arrays without intermediate native buffers: a cast or a
 * {@code dup} allocates (and the OS zero-fills) a fresh off-heap buffer, which at word2vec's batch
 * sizes cost more than the ops' own arithmetic.
 */
final class NdArrays {
  private NdArrays() {}

  private static boolean dense(INDArray a) {
    return !a.isView() && a.ordering() == 'c' && a.data().length() == a.length();
  }

  /** The elements, row-major, as doubles. */
  static double[] doubles(INDArray a) {
    if (dense(a) && a.dataType() == DataType.DOUBLE) {
      return a.data().asDouble();
    }
    if (dense(a) && a.dataType() == DataType.FLOAT) {
      float[] f = a.data().asFloat();
      double[] d = new double[f.length];
      for (int i = 0; i < f.length; i++) {
        d[i] = f[i];
      }
      return d;
    }
    return a.castTo(DataType.DOUBLE).dup('c').data().asDouble();
  }

  /** The elements, row-major, as floats. */
  static float[] floats(INDArray a) {
    if (dense(a) && a.dataType() == DataType.FLOAT) {
      // one bulk copy from the native buffer (DataBuffer.asFloat goes element by element)
      float[] out = new float[(int) a.length()];
      a.data().asNioFloat().get(out);
      return out;
    }
    return a.castTo(DataType.FLOAT).dup('c').data().asFloat();
  }

  /** The elements, row-major, as ints (of an integer array). */
  static int[] ints(INDArray a) {
    return (dense(a) ? a : a.dup('c')).data().asInt();
  }

  /** A new array of {@code type} (FLOAT or DOUBLE) holding {@code v}, row-major. */
  static INDArray array(double[] v, DataType type, long... shape) {
    if (type == DataType.DOUBLE) {
      return Nd4j.create(Nd4j.createBuffer(v), shape);
    }
    float[] f = new float[v.length];
    for (int i = 0; i < v.length; i++) {
      f[i] = (float) v[i];
    }
    INDArray out = array(f, shape);
    return type == DataType.FLOAT ? out : out.castTo(type);
  }

  /**
   * A new FLOAT array holding {@code v}, row-major. Through a data buffer: {@code Nd4j.create(float[],
   * shape, order)} copies element by element in M2.1, 2x slower (measured, 8192 x 100).
   */
  static INDArray array(float[] v, long... shape) {
    return Nd4j.create(Nd4j.createBuffer(v), shape);
  }
}
