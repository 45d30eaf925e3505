package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedException;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.ops.StringIndex;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The classes of a classification task, in output order, and the class of each example of a
 * feed batch: its {@code label} slot must hold exactly one key, one of these. Shared by bow_net
 * and its naive Bayes baseline, so that both read a feed file the same way.
 */
final class Labels {
  private final List<String> list;
  private final StringIndex index;

  Labels(List<String> labels) {
    if (labels.size() < 2) {
      throw new IllegalArgumentException("a classifier needs at least 2 labels but got "
          + labels);
    }
    this.list = List.copyOf(labels);
    this.index = new StringIndex(labels.size());
    for (String l : labels) {
      if (index.indexOf(l) >= 0) {
        throw new IllegalArgumentException("label '" + l + "' is listed twice");
      }
      index.add(l);
    }
  }

  List<String> list() {
    return list;
  }

  int size() {
    return list.size();
  }

  /** Classes {@code y} as one-hot rows: FLOAT [y.length, size()]. */
  INDArray oneHot(int[] y) {
    float[] out = new float[y.length * size()];
    for (int e = 0; e < y.length; e++) {
      out[e * size() + y[e]] = 1f;
    }
    return Nd4j.create(out, new long[] {y.length, size()}, DataType.FLOAT);
  }

  /** Each example's class index; a clear error naming {@code file} for a bad label slot. */
  int[] of(Map<String, INDArray> batch, Path file) {
    INDArray keys = batch.get("label");
    List<String> y = KeyArrays.toList(keys);
    float[][] mask = batch.get("label_mask").toFloatMatrix();
    int per = (int) keys.size(1);
    int[] out = new int[mask.length];
    for (int e = 0; e < out.length; e++) {
      int real = 0;
      for (float m : mask[e]) {
        real += m != 0 ? 1 : 0;
      }
      if (real != 1) {
        throw new FeedException(file + ": an example has " + real + " labels; one per line is"
            + " needed");
      }
      String label = y.get(e * per);
      out[e] = index.indexOf(label);
      if (out[e] < 0) {
        throw new FeedException(file + ": label '" + label + "' is not one of the " + size()
            + " labels " + list);
      }
    }
    return out;
  }
}
