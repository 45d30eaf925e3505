package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.KeyPolicy;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.TableConfig;
import org.junit.jupiter.api.Test;

class KeyPoliciesTest {
  private static OptimizerConfig normalized(int dim, OptimizerConfig o, KeyPolicy p) {
    TableConfig c = TableConfigs.builder("t", dim).setOptimizer(o.toBuilder().setKeyPolicy(p))
        .build();
    return TableConfigs.normalize(c).getOptimizer();
  }

  @Test
  void defaultsAreFilled_anEmptyPolicyIsNone_andBadValuesAreRefusedByName() {
    OptimizerConfig o = normalized(4, TableConfigs.adagrad(0.1f, 0f, 0f),
        KeyPolicy.newBuilder().setFreezeBelow(0.01f).build());
    KeyPolicy p = o.getKeyPolicy();
    assertTrue(p.getKeepStats());
    assertEquals(0.9f, p.getStatsDecay());
    assertEquals(10, p.getFreezeAfter());
    assertEquals(0.5f, p.getRatePower());
    assertEquals(2, TableConfigs.slots(o)); // Adagrad's accumulator, then the statistics
    assertEquals(1, KeyPolicies.statsSlot(o));
    OptimizerConfig none = normalized(4, TableConfigs.sgd(0.1f), KeyPolicy.getDefaultInstance());
    assertFalse(none.hasKeyPolicy());
    assertEquals(0, TableConfigs.slots(none));
    TableException dim1 = assertThrows(TableException.class, () -> normalized(1,
        TableConfigs.sgd(0.1f), KeyPolicy.newBuilder().setKeepStats(true).build()));
    assertTrue(dim1.getMessage().contains("needs dim >= 2"), dim1.getMessage());
    TableException neg = assertThrows(TableException.class, () -> normalized(4,
        TableConfigs.sgd(0.1f), KeyPolicy.newBuilder().setFreezeBelow(-1f).build()));
    assertEquals("table 't': optimizer.key_policy.freeze_below must be >= 0 but was -1.0",
        neg.getMessage());
    TableException decay = assertThrows(TableException.class, () -> normalized(4,
        TableConfigs.sgd(0.1f), KeyPolicy.newBuilder().setKeepStats(true).setStatsDecay(1f)
            .build()));
    assertTrue(decay.getMessage().contains("stats_decay must be in [0.0, 1.0)"),
        decay.getMessage());
  }

  @Test
  void statistics_freezeSettledRows_andThawThemWhenTheirGradientsGrow() {
    OptimizerConfig o = normalized(2, TableConfigs.sgd(1f), KeyPolicy.newBuilder()
        .setStatsDecay(0.5f).setFreezeBelow(1f).setFreezeAfter(2).build());
    RowOptimizer r = RowOptimizer.create(o, 2);
    assertEquals(1, r.slots());
    float[] w = {0f, 0f};
    float[] s = {7f, 7f}; // whatever a reused page held
    r.initSlots(s, 0);
    assertArrayEquals(new float[] {0f, 0f}, s);
    r.apply(w, 0, s, 0, new float[] {0.3f, 0.4f}, 0, 1f, 1); // |g| 0.5: m = 0.5 (first)
    assertArrayEquals(new float[] {0.5f, 0f}, s);
    r.apply(w, 0, s, 0, new float[] {0.3f, 0.4f}, 0, 1f, 2); // t <= freeze_after: not yet
    assertArrayEquals(new float[] {0.5f, 0f}, s);
    assertArrayEquals(new float[] {-0.6f, -0.8f}, w, 1e-6f);
    r.apply(w, 0, s, 0, new float[] {0.3f, 0.4f}, 0, 1f, 3); // m 0.5 < 1: frozen, not applied
    assertArrayEquals(new float[] {0.5f, 1f}, s);
    assertArrayEquals(new float[] {-0.6f, -0.8f}, w, 1e-6f);
    r.apply(w, 0, s, 0, new float[] {3f, 4f}, 0, 1f, 4); // m 2.75 > 2: thawed and applied
    assertArrayEquals(new float[] {2.75f, 0f}, s);
    assertArrayEquals(new float[] {-3.6f, -4.8f}, w, 1e-6f);
  }

  @Test
  void aPerKeyRate_shrinksWithTheKeysOwnUpdateCount() {
    OptimizerConfig o = normalized(2, TableConfigs.sgd(1f), KeyPolicy.newBuilder()
        .setRateReference(4f).setRatePower(1f).build());
    RowOptimizer r = RowOptimizer.create(o, 2);
    float[] w = {0f, 0f};
    float[] s = new float[2];
    r.apply(w, 0, s, 0, new float[] {1f, 0f}, 0, 0.5f, 4); // t <= 4: the table's rate
    assertEquals(-0.5f, w[0]);
    r.apply(w, 0, s, 0, new float[] {1f, 0f}, 0, 0.5f, 16); // 0.5 x 4 / 16
    assertEquals(-0.625f, w[0]);
  }

  @Test
  void aPolicyWrapsANamedRuleToo() {
    OptimizerConfig o = normalized(3, TableConfigs.rule("surprise_decay", 0.1f,
        java.util.Map.of()), KeyPolicy.newBuilder().setKeepStats(true).build());
    assertEquals(2, TableConfigs.slots(o));
    assertEquals(1, KeyPolicies.statsSlot(o));
    assertEquals(2, RowOptimizer.create(o, 3).slots());
  }
}
