package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.v1.OptimizerConfig;

/**
 * Implicit (proximal) SGD steps for the rows of a batch: each distinct row's summed gradient
 * {@code G_r} is sent as {@code G_r / (1 + 2 lr C_r)}, where {@code C_r} is the curvature of the
 * step's loss along {@code G_r}. For a logistic logit {@code f = h . u} a term adds {@code L''(f)
 * (h . G)^2 / |G|^2} to the curvature of u's row along G (and {@code L''(f) (u . G)^2 / |G|^2} to
 * h's); the ops compute {@code L''(f)} from the logit and the gradient they already have ({@link
 * #logisticCurvature}).
 *
 * <p>Why: word2vec's C tool applies every (pair, target) term at once, so a row that takes n
 * terms in a stretch of text moves n times, each step on its current value; a sigmoid that
 * saturates stops the row. A batch computes all n terms on the same stale row and sums them:
 * with plain SGD the step is n times the sequential one in one direction, and a frequent word
 * (hundreds of terms per 8,192-pair batch) overshoots and diverges (NaN on Brown). The implicit
 * step {@code v' = v - lr G(v')}, linearised, is {@code v' = v - lr G / (1 + lr C)}: it equals
 * the summed step while {@code lr C} is small (a rare word's handful of terms: within a few
 * percent of the C tool's updates) and tends to the Newton step {@code G / C} when many terms
 * pile up, which is where the sequential updates would have saturated (halved: both factors of
 * a logit move at once, {@link #COUPLING}); it is stable at every learning rate (Toulis and
 * Airoldi, "Asymptotic and finite-sample properties of estimators based on stochastic
 * gradients", Annals of Statistics 2017). Along G, not the trace: terms in many directions (a
 * rare word's window of different contexts) barely interact in sequence and are barely damped;
 * terms that pull the same way (a frequent word drawn as a negative hundreds of times) are. A
 * first version damped by the trace {@code sum L'' |h|^2}; at batch 1,024 its final loss stayed
 * above that of summed steps (2.407 against 2.388), the kept version reaches it (2.392).
 * Averaging per occurrence, the alternative, divides a rare word's window of 2-10 terms too and
 * stopped training on Brown (docs/benchmarks.md).
 *
 * <p>The curvature is exact for a logistic loss on the logits (negative sampling's, summed,
 * averaged or weighted); under another loss the factor is still in (0, 1], a damping rather than
 * a Newton step. It is meant for plain SGD tables: an adaptive optimizer (Adagrad, Adam)
 * normalises its steps itself.
 */
final class ImplicitSteps {
  private ImplicitSteps() {}

  /**
   * Both factors of a logit step at once (the two tables' rows, or a row and its activation):
   * each row's step, damped as if its partners stood still, moves the logit up to twice as far
   * as a Newton step would. Counting the curvature twice (a Jacobi splitting over the two
   * factors) bounds the joint step by one Newton step; with 1, SGD on the 21-word test corpus
   * at batch 1,024 reached NaN in one of the first two runs (none in three runs with 2).
   */
  static final double COUPLING = 2;

  /**
   * {@code d2L/df2} of a term {@code L = w * logistic(f, label)} from its logit and its gradient
   * {@code g = dL/df = w (sigma(f) - label)}: {@code w sigma'(f) = |g| sigma(f)} for label 1 and
   * {@code |g| (1 - sigma(f))} for label 0. Exact for the sum, the mean or any weighting of the
   * logistic loss; never negative.
   */
  static double logisticCurvature(double logit, boolean positive, double g) {
    double sigma = 1 / (1 + Math.exp(-logit));
    return Math.abs(g) * (positive ? sigma : 1 - sigma);
  }

  /**
   * The factor a row's summed gradient G is scaled by: {@code 1 / (1 + 2 lr C)} with {@code C =
   * along / |G|^2} the curvature along G ({@code along}: the loss's second derivative in
   * direction G, unnormalised), counted twice ({@link #COUPLING}). 1 for a zero gradient.
   */
  static float factor(float lr, double along, double squaredNorm) {
    return squaredNorm > 0 ? (float) (1 / (1 + COUPLING * lr * along / squaredNorm)) : 1f;
  }

  /**
   * The curvature of a step's loss along directions of the rows of an activation variable,
   * published by the op that consumed them ({@code sampledLogits}) for the op that produced them
   * ({@code dynamicEmbeddingLookup}), which knows which rows share a key.
   */
  interface RowCurvature {
    /** Rows of the variable (the batch). */
    int rows();

    /** The second derivative of the step's loss along {@code x[off .. off + d)} of row e. */
    double along(int e, float[] x, int off);
  }

  /**
   * The learning rate a step's update will use: the step's own, or (0) the table's configured
   * rate. A table whose optimizer has no single rate to read (none configured) fails clearly.
   */
  static float rate(float stepRate, EmbeddingTable table) {
    if (stepRate > 0) {
      return stepRate;
    }
    OptimizerConfig o = table.config().getOptimizer();
    float lr = o.getLearningRate();
    if (!(lr > 0)) {
      throw new IllegalStateException("implicit row steps on table '" + table.name()
          + "' need a learning rate, but the step has none and the table's optimizer ("
          + o.getKind() + ") has learning rate " + lr);
    }
    return lr;
  }

  /** Multiplies each of {@code rows.length / d} rows by {@code factor[r]}. */
  static void scale(float[] rows, int d, float[] factor) {
    for (int r = 0; r < factor.length; r++) {
      float f = factor[r];
      if (f != 1f) {
        for (int j = r * d, end = j + d; j < end; j++) {
          rows[j] *= f;
        }
      }
    }
  }
}
