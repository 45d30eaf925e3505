package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The second baseline: multinomial logistic regression on a line's bag of words (counts scaled
 * by 1 / sqrt(words)), one weight per (word, label) and a bias per label, trained by Adagrad
 * with L2 on the weights a line touches, for a fixed number of passes in file order. Default
 * settings (rate 0.1, L2 1e-3, 5 passes) are the best of a 27-setting grid on Brown genres'
 * held-out set (docs/benchmarks.md): an optimistic baseline, as bow_net's best epoch is.
 */
public final class LogisticRegression {
  private final Labels labels;
  private final FeedLines lines;
  private final Map<String, float[]> weights = new HashMap<>(); // per word: c weights, c accumulators
  private final float[] bias;
  private final float[] biasAcc;
  private final float rate;
  private final float l2;
  private final int passes;

  public LogisticRegression(FeedDescription desc, List<String> labels) {
    this(desc, labels, 0.1f, 1e-3f, 5);
  }

  public LogisticRegression(FeedDescription desc, List<String> labels, float rate, float l2,
      int passes) {
    this.labels = new Labels(labels);
    this.lines = new FeedLines(desc, this.labels);
    this.bias = new float[labels.size()];
    this.biasAcc = new float[labels.size()];
    this.rate = rate;
    this.l2 = l2;
    this.passes = passes;
  }

  /** The label probabilities of a line (softmax of its scores), into {@code p}. */
  private void probabilities(List<String> words, double[] p, boolean create) {
    int c = p.length;
    for (int k = 0; k < c; k++) {
      p[k] = bias[k];
    }
    double scale = 1 / Math.sqrt(Math.max(1, words.size()));
    for (String w : words) {
      float[] wt = create ? weights.computeIfAbsent(w, k -> new float[2 * c]) : weights.get(w);
      if (wt == null) {
        continue;
      }
      for (int k = 0; k < c; k++) {
        p[k] += scale * wt[k];
      }
    }
    double max = Double.NEGATIVE_INFINITY;
    for (double v : p) {
      max = Math.max(max, v);
    }
    double sum = 0;
    for (int k = 0; k < c; k++) {
      p[k] = Math.exp(p[k] - max);
      sum += p[k];
    }
    for (int k = 0; k < c; k++) {
      p[k] /= sum;
    }
  }

  /** Trains on every line of {@code files}, {@code passes} times. */
  public LogisticRegression train(List<Path> files) {
    int c = labels.size();
    double[] p = new double[c];
    for (int pass = 0; pass < passes; pass++) {
      lines.forEach(files, (label, words) -> {
        probabilities(words, p, true);
        double scale = 1 / Math.sqrt(Math.max(1, words.size()));
        float[][] wts = new float[words.size()][];
        for (int i = 0; i < wts.length; i++) {
          wts[i] = weights.get(words.get(i)); // created by probabilities
        }
        for (int k = 0; k < c; k++) {
          double g = p[k] - (k == label ? 1 : 0); // d(cross-entropy)/d(score k)
          biasAcc[k] += (float) (g * g);
          bias[k] -= (float) (rate * g / Math.sqrt(biasAcc[k] + 1e-8));
          for (float[] wt : wts) {
            double gw = g * scale + l2 * wt[k];
            wt[c + k] += (float) (gw * gw);
            wt[k] -= (float) (rate * gw / Math.sqrt(wt[c + k] + 1e-8));
          }
        }
      });
    }
    return this;
  }

  /** Held-out accuracy on {@code files} (words unseen in training are ignored). */
  public BowNet.Accuracy evaluate(List<Path> files) {
    double[] p = new double[labels.size()];
    return lines.accuracy(files, words -> {
      probabilities(words, p, false);
      return p;
    });
  }
}
