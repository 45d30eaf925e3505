package dev.dynembed.bownet;

import dev.dynembed.ops.KeyArrays;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
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

  /** One training example cut from a line: its keys, their weights and the line's class. */
  record SubBag(List<String> keys, List<Float> weights, int label) {}

  /**
   * Training examples from a bag ({@link #bag}) and each line's class: every line's keys are
   * shuffled by {@code r} and cut into bags of {@code size} keys (the last one shorter), each an
   * example with the line's class. Trained on short bags, the model must find each word's own
   * evidence instead of the few document-specific words that already separate a whole line
   * (docs/design/0010-data-feed.md, "Sub-bags").
   */
  static List<SubBag> subBags(Map<String, INDArray> bag, int[] labels, int size, Random r) {
    INDArray words = bag.get("words");
    int b = (int) words.size(0);
    int len = (int) words.size(1);
    List<String> w = KeyArrays.toList(words);
    float[][] m = bag.get("words_mask").toFloatMatrix();
    List<SubBag> examples = new ArrayList<>();
    List<Integer> real = new ArrayList<>(len);
    for (int e = 0; e < b; e++) {
      real.clear();
      for (int j = 0; j < len; j++) {
        if (m[e][j] != 0) {
          real.add(j);
        }
      }
      Collections.shuffle(real, r);
      for (int from = 0; from < real.size(); from += size) {
        List<String> keys = new ArrayList<>(size);
        List<Float> weights = new ArrayList<>(size);
        for (int j : real.subList(from, Math.min(real.size(), from + size))) {
          keys.add(w.get(e * len + j));
          weights.add(m[e][j]);
        }
        examples.add(new SubBag(keys, weights, labels[e]));
      }
    }
    return examples;
  }

  /**
   * {@code examples} shuffled by {@code r} and grouped into steps of {@code batch} ({@code
   * words}, {@code words_mask}, {@code label_onehot} over {@code labels}).
   */
  static List<Map<String, INDArray>> steps(List<SubBag> examples, Labels labels, int batch,
      Random r) {
    Collections.shuffle(examples, r);
    List<Map<String, INDArray>> steps = new ArrayList<>();
    for (int from = 0; from < examples.size(); from += batch) {
      List<SubBag> step = examples.subList(from, Math.min(examples.size(), from + batch));
      int width = 0;
      for (SubBag s : step) {
        width = Math.max(width, s.keys().size());
      }
      String[] keys = new String[step.size() * width];
      float[] mask = new float[keys.length];
      int[] y = new int[step.size()];
      for (int e = 0; e < step.size(); e++) {
        SubBag s = step.get(e);
        for (int j = 0; j < width; j++) { // padding repeats a real key (masked out)
          keys[e * width + j] = s.keys().get(j < s.keys().size() ? j : 0);
          mask[e * width + j] = j < s.keys().size() ? s.weights().get(j) : 0f;
        }
        y[e] = s.label();
      }
      steps.add(Map.of("words", KeyArrays.of(keys, step.size(), width),
          "words_mask", Nd4j.create(mask, new long[] {step.size(), width}, DataType.FLOAT),
          "label_onehot", labels.oneHot(y)));
    }
    return steps;
  }
}
