package dev.dynembed.ops;

import java.util.ArrayList;
import java.util.List;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

final class Strings {
  private Strings() {}

  /** A UTF8 [b, s] array, row-major. */
  static INDArray matrix(String[][] keys) {
    List<String> flat = new ArrayList<>();
    for (String[] row : keys) {
      flat.addAll(List.of(row));
    }
    return KeyArrays.of(flat, keys.length, keys[0].length);
  }
}
