package dev.dynembed.bownet;

import dev.dynembed.ops.KeyArrays;
import java.util.List;
import java.util.Map;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The bag bow_net reads from a feed batch's {@code words} slot: the words, and with bigrams each
 * pair of adjacent real words as one more key {@code "w1 w2"} of the same table. Shared by
 * training, evaluation and the served model, so that all three see the same keys.
 */
final class Features {
  private Features() {}

  /** {@code words} and {@code words_mask} of the bag for a feed batch. */
  static Map<String, INDArray> bag(Map<String, INDArray> batch, boolean bigrams) {
    INDArray words = batch.get("words");
    INDArray mask = batch.get("words_mask");
    if (!bigrams) {
      return Map.of("words", words, "words_mask", mask);
    }
    int b = (int) words.size(0);
    int len = (int) words.size(1);
    int width = 2 * len - 1;
    List<String> w = KeyArrays.toList(words);
    float[][] m = mask.toFloatMatrix();
    String[] keys = new String[b * width];
    float[] out = new float[b * width];
    for (int e = 0; e < b; e++) {
      String pad = w.get(e * len);
      for (int j = 0; j < width; j++) {
        keys[e * width + j] = pad;
      }
      for (int j = 0; j < len; j++) {
        keys[e * width + j] = w.get(e * len + j);
        out[e * width + j] = m[e][j];
      }
      for (int j = 0; j + 1 < len; j++) {
        if (m[e][j] != 0 && m[e][j + 1] != 0) {
          keys[e * width + len + j] = w.get(e * len + j) + " " + w.get(e * len + j + 1);
          out[e * width + len + j] = 1f;
        }
      }
    }
    return Map.of("words", KeyArrays.of(keys, b, width),
        "words_mask", Nd4j.create(out, new long[] {b, width}, DataType.FLOAT));
  }
}
