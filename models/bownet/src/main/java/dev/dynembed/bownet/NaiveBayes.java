package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The baseline bow_net is compared with: multinomial naive Bayes over the same feed files' word
 * counts, add-alpha smoothing over the training vocabulary (add-one by default; words unseen in
 * training are ignored at prediction), the class prior from the training lines (add-one). A
 * strong baseline for genre-like labels.
 */
public final class NaiveBayes {
  private final Labels labels;
  private final Map<String, long[]> counts = new HashMap<>();
  private final long[] wordsPerClass;
  private final long[] linesPerClass;
  private final FeedLines lines;
  private final double alpha;

  /** Add-one smoothing. */
  public NaiveBayes(FeedDescription desc, List<String> labels) {
    this(desc, labels, 1.0);
  }

  /** @param alpha added to every word's count in every class (> 0) */
  public NaiveBayes(FeedDescription desc, List<String> labels, double alpha) {
    if (!(alpha > 0) || Double.isInfinite(alpha)) {
      throw new IllegalArgumentException("smoothing alpha must be > 0 and finite but was "
          + alpha);
    }
    this.alpha = alpha;
    this.labels = new Labels(labels);
    this.wordsPerClass = new long[labels.size()];
    this.linesPerClass = new long[labels.size()];
    this.lines = new FeedLines(desc, this.labels);
  }

  /** Counts the words of every line of {@code files} under the line's label. */
  public NaiveBayes train(List<Path> files) {
    lines.forEach(files, (label, words) -> {
      linesPerClass[label]++;
      for (String w : words) {
        counts.computeIfAbsent(w, k -> new long[labels.size()])[label]++;
        wordsPerClass[label]++;
      }
    });
    return this;
  }

  /** Held-out accuracy on {@code files}. */
  public BowNet.Accuracy evaluate(List<Path> files) {
    long lineCount = 0;
    for (long n : linesPerClass) {
      lineCount += n;
    }
    double[] prior = new double[labels.size()];
    for (int c = 0; c < prior.length; c++) {
      prior[c] = Math.log((linesPerClass[c] + 1.0) / (lineCount + labels.size()));
    }
    int v = counts.size();
    return lines.accuracy(files, words -> {
      double[] score = prior.clone();
      for (String w : words) {
        long[] n = counts.get(w);
        if (n == null) {
          continue;
        }
        for (int c = 0; c < score.length; c++) {
          score[c] += Math.log((n[c] + alpha) / (wordsPerClass[c] + alpha * v));
        }
      }
      return score;
    });
  }
}
