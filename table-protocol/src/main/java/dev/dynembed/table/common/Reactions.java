package dev.dynembed.table.common;

import dev.dynembed.table.v1.OptimizerConfig;
import java.util.Map;

/**
 * Two row-update rules that are not gradient descent ("reactions", docs/design/0025), shipped
 * with the project and found as any user's rule is: by {@link java.util.ServiceLoader}, through
 * this module's {@code META-INF/services/dev.dynembed.table.common.RowRule}.
 *
 * <ul>
 *   <li>{@code moving_average} (params {@code rate} in (0, 1], default 0.1; no slots): the
 *       feedback is a target row and the row moves toward it, {@code w += rate (f - w)}. The
 *       table sums a batch's feedback rows per key (as it sums gradients), so a cell sends one
 *       target per key (the gathered form) or the batch holds each key once.
 *   <li>{@code surprise_decay} (params {@code max_norm} &gt; 0, default 1; {@code surprise} &gt;
 *       1, default 4; {@code decay} in [0, 1], default 0.5; {@code smoothing} in [0, 1), default
 *       0.9; one slot, of which the first float is used): an SGD step with the feedback's norm
 *       clipped to {@code max_norm}; a row whose feedback norm exceeds {@code surprise} times
 *       the running mean of its earlier norms is first scaled by {@code decay}. The running mean
 *       (slot float 0) starts at the first norm and then takes {@code smoothing m + (1 -
 *       smoothing) |f|} (of the unclipped norm).
 * </ul>
 */
public final class Reactions {
  private Reactions() {}

  /** {@code w += rate (f - w)}. */
  public static final class MovingAverage implements RowRule {
    @Override
    public String name() {
      return "moving_average";
    }

    @Override
    public OptimizerConfig normalize(String table, OptimizerConfig config) {
      return RuleParams.of(table, config, Map.of("rate", 0.1))
          .require("rate", 0, true, 1, false).fill(config);
    }

    @Override
    public int slots(OptimizerConfig config) {
      return 0;
    }

    @Override
    public RowOptimizer create(OptimizerConfig config, int dim) {
      float rate = (float) RuleParams.of(config).get("rate");
      return new RowOptimizer(dim) {
        @Override
        public int slots() {
          return 0;
        }

        @Override
        public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff,
            float lr, long t) {
          for (int j = 0; j < dim; j++) {
            w[wOff + j] += rate * (g[gOff + j] - w[wOff + j]);
          }
        }
      };
    }
  }

  /** SGD with clipping, and a decay of rows whose feedback is surprisingly large. */
  public static final class SurpriseDecay implements RowRule {
    @Override
    public String name() {
      return "surprise_decay";
    }

    @Override
    public OptimizerConfig normalize(String table, OptimizerConfig config) {
      return RuleParams.of(table, config, Map.of("max_norm", 1.0, "surprise", 4.0, "decay", 0.5,
              "smoothing", 0.9))
          .require("max_norm", 0, true, Double.MAX_VALUE, false)
          .require("surprise", 1, true, Double.MAX_VALUE, false)
          .require("decay", 0, false, 1, false)
          .require("smoothing", 0, false, 1, true)
          .fill(config);
    }

    @Override
    public int slots(OptimizerConfig config) {
      return 1;
    }

    @Override
    public RowOptimizer create(OptimizerConfig config, int dim) {
      RuleParams p = RuleParams.of(config);
      float maxNorm = (float) p.get("max_norm");
      float surprise = (float) p.get("surprise");
      float decay = (float) p.get("decay");
      float smoothing = (float) p.get("smoothing");
      return new RowOptimizer(dim) {
        @Override
        public int slots() {
          return 1;
        }

        @Override
        public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff,
            float lr, long t) {
          float norm = (float) Math.sqrt(FloatKernels.dot(g, gOff, g, gOff, dim));
          float mean = s[sOff];
          if (t > 1 && norm > surprise * mean) {
            for (int j = 0; j < dim; j++) {
              w[wOff + j] *= decay;
            }
          }
          float scale = norm > maxNorm ? lr * maxNorm / norm : lr;
          for (int j = 0; j < dim; j++) {
            w[wOff + j] -= scale * g[gOff + j];
          }
          s[sOff] = t == 1 ? norm : smoothing * mean + (1f - smoothing) * norm;
        }
      };
    }
  }
}
