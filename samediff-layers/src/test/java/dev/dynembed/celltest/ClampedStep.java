package dev.dynembed.celltest;

import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.RowRule;
import dev.dynembed.table.common.RuleParams;
import dev.dynembed.table.v1.OptimizerConfig;
import java.util.Map;

/**
 * A reaction defined outside the project's packages, found by the ServiceLoader on this module's
 * test class path (the in-JVM shards' too): {@code w = clamp(w - lr f, -bound, bound)}.
 */
public final class ClampedStep implements RowRule {
  @Override
  public String name() {
    return "test_clamped_step";
  }

  @Override
  public OptimizerConfig normalize(String table, OptimizerConfig config) {
    return RuleParams.of(table, config, Map.of("bound", 0.5))
        .require("bound", 0, true, 1e6, false).fill(config);
  }

  @Override
  public int slots(OptimizerConfig config) {
    return 0;
  }

  @Override
  public RowOptimizer create(OptimizerConfig config, int dim) {
    float bound = (float) RuleParams.of(config).get("bound");
    return new RowOptimizer(dim) {
      @Override
      public int slots() {
        return 0;
      }

      @Override
      public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
          long t) {
        for (int j = 0; j < dim; j++) {
          w[wOff + j] = clamp(w[wOff + j] - lr * g[gOff + j], bound);
        }
      }
    };
  }

  static float clamp(float v, float bound) {
    return Math.max(-bound, Math.min(bound, v));
  }
}
