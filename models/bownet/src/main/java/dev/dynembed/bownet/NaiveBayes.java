package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.layers.feed.MultiSlotReader;
import dev.dynembed.ops.KeyArrays;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The baseline bow_net is compared with: multinomial naive Bayes over the same feed files' word
 * counts, add-one smoothing over the training vocabulary (words unseen in training are ignored at
 * prediction), the class prior from the training lines. A strong baseline for genre-like labels.
 */
public final class NaiveBayes {
  private final Labels labels;
  private final Map<String, long[]> counts = new HashMap<>();
  private final long[] wordsPerClass;
  private final long[] linesPerClass;
  private final MultiSlotReader feed;

  public NaiveBayes(FeedDescription desc, List<String> labels) {
    this.labels = new Labels(labels);
    this.wordsPerClass = new long[labels.size()];
    this.linesPerClass = new long[labels.size()];
    this.feed = new MultiSlotReader(desc);
  }

  /** Counts the words of every line of {@code files} under the line's label. */
  public NaiveBayes train(List<Path> files) {
    for (Path f : files) {
      for (Map<String, INDArray> batch : feed.read(f)) {
        forEach(batch, f, (label, words) -> {
          linesPerClass[label]++;
          for (String w : words) {
            counts.computeIfAbsent(w, k -> new long[labels.size()])[label]++;
            wordsPerClass[label]++;
          }
        });
      }
    }
    return this;
  }

  /** Held-out accuracy on {@code files}. */
  public BowNet.Accuracy evaluate(List<Path> files) {
    long[] correct = {0};
    long[] total = {0};
    long lines = 0;
    for (long n : linesPerClass) {
      lines += n;
    }
    double[] prior = new double[labels.size()];
    for (int c = 0; c < prior.length; c++) {
      prior[c] = Math.log((linesPerClass[c] + 1.0) / (lines + labels.size()));
    }
    int v = counts.size();
    for (Path f : files) {
      for (Map<String, INDArray> batch : feed.read(f)) {
        forEach(batch, f, (label, words) -> {
          double[] score = prior.clone();
          for (String w : words) {
            long[] n = counts.get(w);
            if (n == null) {
              continue;
            }
            for (int c = 0; c < score.length; c++) {
              score[c] += Math.log((n[c] + 1.0) / (wordsPerClass[c] + v));
            }
          }
          int best = 0;
          for (int c = 1; c < score.length; c++) {
            if (score[c] > score[best]) {
              best = c;
            }
          }
          correct[0] += best == label ? 1 : 0;
          total[0]++;
        });
      }
    }
    return new BowNet.Accuracy(correct[0], total[0]);
  }

  private interface Line {
    void accept(int label, List<String> words);
  }

  private void forEach(Map<String, INDArray> batch, Path file, Line line) {
    List<String> w = KeyArrays.toList(batch.get("words"));
    int[] y = labels.of(batch, file);
    float[][] mask = batch.get("words_mask").toFloatMatrix();
    for (int e = 0; e < y.length; e++) {
      int len = mask[e].length;
      List<String> words = new java.util.ArrayList<>();
      for (int i = 0; i < len; i++) {
        if (mask[e][i] != 0) {
          words.add(w.get(e * len + i));
        }
      }
      line.accept(y[e], words);
    }
  }
}
