package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.OptimizerConfig;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every optimizer keeps rows within ±{@link Limits#MAX_ROW_VALUE} and slots finite (issue 49,
 * D6): an update that would leave them is not applied to that row and is counted; updates of unit
 * step go through unchecked and apply exactly as before.
 */
class RowRangeTest {
  @TempDir Path dir;

  private static final List<OptimizerConfig> ALL = List.of(TableConfigs.sgd(1f),
      TableConfigs.momentum(1f, 0.9f), TableConfigs.adagrad(1f, 0.1f, 1e-7f),
      TableConfigs.adam(1f, 0.9f, 0.999f, 1e-8f), TableConfigs.ftrl(1f, 0.1f, 0f, 0f, 1f));

  private static void assertInRange(TableStore t, String key) {
    TableStore.Record r = t.record(key);
    for (float v : r.weights()) {
      assertTrue(Math.abs(v) <= Limits.MAX_ROW_VALUE, t.config().getOptimizer().getKind()
          + ": weight " + v);
    }
    for (float[] slot : r.slots()) {
      for (float v : slot) {
        assertTrue(Float.isFinite(v), t.config().getOptimizer().getKind() + ": slot " + v);
      }
    }
  }

  @Test
  void hugeGradientsAndRates_neverLeaveARowOutOfRange_underAnyOptimizer() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    int i = 0;
    for (OptimizerConfig o : ALL) {
      TableStore t = engine.create(TableConfigs.builder("t" + i++, 4).setOptimizer(o).build());
      PackedKeys k = PackedKeys.of("k");
      float[][] grads = {{1e18f, -1e18f, 1e18f, 1e18f}, {3e38f, 0, 0, 0}, {1e-30f, 0, 0, 0}};
      for (int step = 1; step <= 40; step++) {
        float[] g = grads[step % grads.length];
        float lr = step % 4 == 0 ? 1e6f : step % 4 == 1 ? 1e-20f : 1f;
        try {
          t.applyGradients(k, g, lr, step);
        } catch (dev.dynembed.table.common.TableException e) { // g x rate past float: refused
          assertEquals(dev.dynembed.table.common.ErrorCode.INVALID_ARGUMENT, e.code());
        }
        assertInRange(t, "k");
      }
      assertTrue(t.refusedUpdates() > 0, o.getKind() + " refused nothing");
    }
  }

  @Test
  void unitStepUpdates_applyUncheckedAndExactly() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableStore sgd = engine.create(TableConfigs.builder("sgd", 2).setOptimizer(
        TableConfigs.sgd(0.5f)).setInitializer(TableConfigs.zeros()).build());
    TableStore ada = engine.create(TableConfigs.builder("ada", 2).setOptimizer(
        TableConfigs.adagrad(1f, 0.1f, 1e-7f)).setInitializer(TableConfigs.zeros()).build());
    for (int step = 1; step <= 3; step++) {
      assertEquals(1, sgd.applyGradients(PackedKeys.of("k"), new float[] {1f, -0.5f}, 0f, step));
      assertEquals(1, ada.applyGradients(PackedKeys.of("k"), new float[] {1f, -1f}, 0f, step));
    }
    assertEquals(-1.5f, sgd.record("k").weights()[0], 0f);
    assertEquals(0.75f, sgd.record("k").weights()[1], 0f);
    // Adagrad: a = 0.1 + t, w -= 1 / sqrt(a) per step
    float w = 0;
    float a = 0.1f;
    for (int step = 1; step <= 3; step++) {
      a += 1f;
      w -= 1f / ((float) Math.sqrt(a) + 1e-7f);
    }
    assertEquals(w, ada.record("k").weights()[0], 1e-6f);
    assertEquals(0, sgd.refusedUpdates() + ada.refusedUpdates());
  }
}
