package dev.dynembed.ops;

import java.util.Arrays;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
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

  /**
   * Sets output {@code i} of a Java op to {@code v} (row-major) as {@code type} [shape]. SameDiff
   * allocates each op's outputs from {@code calculateOutputShape} before running it (a zero-filled
   * native buffer); when that array fits, the values are written into it instead of allocating a
   * second one (profiled: the extra allocation and its memset were ~7% of a word2vec run).
   */
  static void output(OpContext oc, int i, float[] v, DataType type, long... shape) {
    INDArray pre = preallocated(oc, i, type, shape);
    if (pre != null && type == DataType.FLOAT) {
      pre.data().asNioFloat().put(v);
    } else if (pre != null && type == DataType.DOUBLE) {
      java.nio.DoubleBuffer d = pre.data().asNioDouble();
      for (float f : v) {
        d.put(f);
      }
    } else {
      INDArray out = array(v, shape);
      oc.setOutputArray(i, type == DataType.FLOAT ? out : out.castTo(type));
    }
  }

  /**
   * Sets output {@code i} to rows of {@code rows} picked by {@code index}: row {@code index[j]}
   * (of {@code dim} values) at position j, as {@code type} [shape]. A pre-allocated FLOAT output
   * is filled row by row straight from {@code rows} (no gathered copy in between).
   */
  static void outputGathered(OpContext oc, int i, float[] rows, int[] index, int dim,
      DataType type, long... shape) {
    INDArray pre = preallocated(oc, i, type, shape);
    if (pre != null && type == DataType.FLOAT) {
      java.nio.FloatBuffer out = pre.data().asNioFloat();
      for (int j = 0; j < index.length; j++) {
        out.put(j * dim, rows, index[j] * dim, dim);
      }
      return;
    }
    float[] gathered = new float[index.length * dim];
    for (int j = 0; j < index.length; j++) {
      System.arraycopy(rows, index[j] * dim, gathered, j * dim, dim);
    }
    output(oc, i, gathered, type, shape);
  }

  /** As above, from doubles. */
  static void output(OpContext oc, int i, double[] v, DataType type, long... shape) {
    INDArray pre = preallocated(oc, i, type, shape);
    if (pre != null && type == DataType.DOUBLE) {
      pre.data().asNioDouble().put(v);
    } else if (pre != null && type == DataType.FLOAT) {
      java.nio.FloatBuffer f = pre.data().asNioFloat();
      for (double d : v) {
        f.put((float) d);
      }
    } else {
      oc.setOutputArray(i, array(v, type, shape));
    }
  }

  /** SameDiff's array for output i if it is dense and of this type and shape, else null. */
  private static INDArray preallocated(OpContext oc, int i, DataType type, long[] shape) {
    java.util.List<INDArray> outs = oc.getOutputArrays();
    INDArray pre = outs != null && i < outs.size() ? outs.get(i) : null;
    if (pre == null || pre.dataType() != type || !Arrays.equals(pre.shape(), shape)
        || !dense(pre)) { // dense: not a view, so its data starts at the buffer's start
      return null;
    }
    return pre;
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
