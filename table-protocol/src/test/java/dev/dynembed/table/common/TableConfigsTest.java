package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.InitializerKind;
import dev.dynembed.table.v1.OptimizerKind;
import dev.dynembed.table.v1.TableConfig;
import org.junit.jupiter.api.Test;

class TableConfigsTest {
  @Test
  void normalize_minimalConfig_fillsDefaults() {
    TableConfig c = TableConfigs.normalize(TableConfigs.builder("t", 8).build());
    assertEquals(256, c.getMaxKeyBytes());
    assertEquals(OptimizerKind.SGD, c.getOptimizer().getKind());
    assertEquals(0.01f, c.getOptimizer().getLearningRate());
    assertEquals(InitializerKind.UNIFORM, c.getInitializer().getKind());
    assertEquals(-0.05f, c.getInitializer().getLow());
  }

  @Test
  void normalize_adagradZeros_getDocumentedDefaults() {
    TableConfig c = TableConfigs.normalize(TableConfigs.builder("t", 8)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f)).build());
    assertEquals(0.1f, c.getOptimizer().getInitialAccumulator());
    assertEquals(1e-7f, c.getOptimizer().getEpsilon());
  }

  private static String error(TableConfig c) {
    TableException e = assertThrows(TableException.class, () -> TableConfigs.normalize(c));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    return e.getMessage();
  }

  @Test
  void normalize_invalidValues_nameFieldAndValue() {
    assertTrue(error(TableConfigs.builder("t", 0).build()).contains("dim must be in [1, 4096] but was 0"));
    assertTrue(error(TableConfigs.builder("t", 5000).build()).contains("but was 5000"));
    assertTrue(error(TableConfigs.builder("bad name!", 4).build()).contains("table name 'bad name!'"));
    assertTrue(error(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.sgd(-1f)).build())
        .contains("optimizer.learning_rate must be > 0 but was -1.0"));
    assertTrue(error(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.sgd(Float.NaN)).build())
        .contains("learning_rate"));
    assertTrue(error(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.adam(0.1f, 1.5f, 0f, 0f))
        .build()).contains("optimizer.beta1 must be in [0.0, 1.0) but was 1.5"));
    assertTrue(error(TableConfigs.builder("t", 4).setInitializer(TableConfigs.uniform(1f, -1f, 0))
        .build()).contains("initializer.low (1.0) must not exceed initializer.high (-1.0)"));
    assertTrue(error(TableConfigs.builder("t", 4).setInitializer(TableConfigs.normal(0f, 0f, 0))
        .build()).contains("initializer.stddev must be > 0"));
    assertTrue(error(TableConfigs.builder("t", 4).setMaxKeyBytes(5000).build())
        .contains("max_key_bytes must be in [1, 4096] but was 5000"));
    assertTrue(error(TableConfigs.builder("t", 4).setOptimizer(TableConfigs.ftrl(0.1f, 0f, -1f, 0f, 0f))
        .build()).contains("optimizer.l1 must be >= 0"));
  }
}
