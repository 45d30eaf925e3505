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
