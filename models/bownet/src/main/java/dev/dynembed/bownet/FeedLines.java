package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.layers.feed.MultiSlotReader;
import dev.dynembed.ops.KeyArrays;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The lines of feed files as (label, words), for the baselines that count words instead of
 * training a graph: the same reader and label checks as bow_net ({@link Labels}).
 */
final class FeedLines {
  interface Line {
    void accept(int label, List<String> words);
  }

  private final Labels labels;
  private final MultiSlotReader feed;

  FeedLines(FeedDescription desc, Labels labels) {
    this.labels = labels;
    this.feed = new MultiSlotReader(desc);
  }

  /**
   * The accuracy on {@code files} of a classifier given by its scores per label: a line counts
   * as right when its label has the highest score (the first label of a tie).
   */
  BowNet.Accuracy accuracy(List<Path> files,
      java.util.function.Function<List<String>, double[]> scores) {
    long[] correct = {0};
    long[] total = {0};
    forEach(files, (label, words) -> {
      double[] s = scores.apply(words);
      int best = 0;
      for (int c = 1; c < s.length; c++) {
        if (s[c] > s[best]) {
          best = c;
        }
      }
      correct[0] += best == label ? 1 : 0;
      total[0]++;
    });
    return new BowNet.Accuracy(correct[0], total[0]);
  }

  /** Every line of {@code files}, in order. */
  void forEach(List<Path> files, Line line) {
    for (Path f : files) {
      for (Map<String, INDArray> batch : feed.read(f)) {
        List<String> w = KeyArrays.toList(batch.get("words"));
        int[] y = labels.of(batch, f);
        float[][] mask = batch.get("words_mask").toFloatMatrix();
        for (int e = 0; e < y.length; e++) {
          int len = mask[e].length;
          List<String> words = new ArrayList<>();
          for (int i = 0; i < len; i++) {
            if (mask[e][i] != 0) {
              words.add(w.get(e * len + i));
            }
          }
          line.accept(y[e], words);
        }
      }
    }
  }
}
