package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.KeyPolicy;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A shard's key policy: a row whose gradients settle is frozen and counted in the table's
 * counters, a busy row keeps training, and the statistics (a slot row) survive a checkpoint, so a
 * restored shard keeps the row frozen and decides as the shard it was saved from.
 */
class KeyPolicyTest {
  @TempDir Path dir;

  @Test
  void settledRowsFreeze_areCounted_andStayFrozenThroughACheckpoint() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableStore t = engine.create(TableConfigs.builder("p", 4)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f).toBuilder().setKeyPolicy(
            KeyPolicy.newBuilder().setFreezeBelow(0.05f).setFreezeAfter(5).setStatsDecay(0.5f))).build());
    PackedKeys keys = PackedKeys.of("busy", "settled");
    for (int step = 1; step <= 30; step++) {
      float small = step <= 3 ? 1f : 0.001f; // "settled" gets tiny gradients after step 3
      t.applyGradients(keys, new float[] {1f, -1f, 1f, -1f, small, small, small, small}, 0f,
          step);
    }
    TableCounters c = t.counters();
    assertEquals(1, c.getFrozenKeys());
    float settledMean = t.record("settled").slots()[1][0];
    assertEquals(2.0 + settledMean, c.getGradientNormSum(), 1e-5); // busy: |g| = 2 throughout
    float[] frozenRow = t.record("settled").weights();
    t.applyGradients(PackedKeys.of("settled"), new float[] {0.01f, 0.01f, 0.01f, 0.01f}, 0f, 31);
    assertArrayEquals(frozenRow, t.record("settled").weights(), "a frozen row does not move");
    CheckpointFile file = engine.save("p", "ckpt", 31);
    ShardEngine other = new ShardEngine(0, 1, dir);
    other.restore("p", "ckpt", List.of(file));
    TableStore r = other.get("p");
    assertEquals(1, r.counters().getFrozenKeys());
    for (TableStore s : List.of(t, r)) { // the same next step on both: the same rows
      s.applyGradients(keys, new float[] {0.5f, 0.5f, 0.5f, 0.5f, 0.02f, 0.02f, 0.02f, 0.02f},
          0f, 32);
    }
    assertArrayEquals(t.record("busy").weights(), r.record("busy").weights());
    assertArrayEquals(frozenRow, r.record("settled").weights());
    assertArrayEquals(t.record("settled").slots()[1], r.record("settled").slots()[1]);
  }
}
