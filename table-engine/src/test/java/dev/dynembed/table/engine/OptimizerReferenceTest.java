package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.TableConfig;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Every optimizer against the textbook formulas over many steps, with duplicate keys. */
class OptimizerReferenceTest {
  static Stream<Arguments> cases() {
    OptimizerConfig[] opts = {
        TableConfigs.sgd(0.05f),
        TableConfigs.momentum(0.05f, 0.9f),
        TableConfigs.adagrad(0.1f, 0.1f, 1e-7f),
        TableConfigs.adam(0.01f, 0.9f, 0.999f, 1e-8f),
        TableConfigs.ftrl(0.1f, 0.1f, 0.01f, 0.05f, 1f),
    };
    return Stream.of(opts).flatMap(o -> Stream.of(1, 7, 64).map(d -> Arguments.of(o, d)));
  }

  @ParameterizedTest(name = "{0} dim {1}")
  @MethodSource("cases")
  void applyGradients_manySteps_matchesTextbookFormula(OptimizerConfig opt, int dim) {
    TableConfig cfg = TableConfigs.normalize(TableConfigs.builder("t", dim).setOptimizer(opt)
        .setInitializer(TableConfigs.normal(0f, 0.5f, 7)).build());
    TableStore table = new TableStore(cfg, 0, 1);
    ReferenceOptimizers ref = new ReferenceOptimizers(cfg.getOptimizer(), dim);
    Random rnd = new Random(42);
    String[] vocab = {"a", "b", "c", "d", "e", "f"};
    for (String k : vocab) {
      float[] row = new float[dim];
      table.findOrInsert(PackedKeys.of(k), null, row);
      ref.init(k, row);
    }
    int steps = 200;
    for (int step = 1; step <= steps; step++) {
      int n = 1 + rnd.nextInt(8);
      String[] keys = new String[n];
      float[] g = new float[n * dim];
      for (int i = 0; i < n; i++) {
        keys[i] = vocab[rnd.nextInt(vocab.length)];
        for (int j = 0; j < dim; j++) {
          g[i * dim + j] = (float) rnd.nextGaussian() * 0.5f;
        }
      }
      // alternate between the configured rate and a per-call override
      float lr = step % 3 == 0 ? 0f : cfg.getOptimizer().getLearningRate() * (1f - step / 400f);
      table.applyGradients(PackedKeys.of(keys), g, lr, step);
      Map<String, double[]> summed = new LinkedHashMap<>();
      for (int i = 0; i < n; i++) {
        double[] acc = summed.computeIfAbsent(keys[i], k -> new double[dim]);
        for (int j = 0; j < dim; j++) {
          acc[j] += g[i * dim + j];
        }
      }
      double rate = lr > 0 ? lr : cfg.getOptimizer().getLearningRate();
      summed.forEach((k, acc) -> ref.apply(k, acc, (float) rate));
    }
    for (String k : vocab) {
      TableStore.Record r = table.record(k);
      double[] expected = ref.w.get(k);
      for (int j = 0; j < dim; j++) {
        assertEquals(expected[j], r.weights()[j], 2e-4 * (1 + Math.abs(expected[j])),
            "key " + k + " column " + j);
      }
      if (r.slots().length > 0) {
        double[] s0 = ref.s1.get(k);
        for (int j = 0; j < dim; j++) {
          assertEquals(s0[j], r.slots()[0][j], 2e-4 * (1 + Math.abs(s0[j])), "slot 0 of " + k);
        }
      }
      if (r.slots().length > 1) {
        double[] s1 = ref.s2.get(k);
        for (int j = 0; j < dim; j++) {
          assertEquals(s1[j], r.slots()[1][j], 2e-4 * (1 + Math.abs(s1[j])), "slot 1 of " + k);
        }
      }
      assertEquals((long) ref.t.get(k), r.updates());
    }
  }
}
