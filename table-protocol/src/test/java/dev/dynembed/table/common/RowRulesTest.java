package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.OptimizerKind;
import dev.dynembed.table.v1.TableConfig;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RowRulesTest {
  private static TableConfig normalized(OptimizerConfig o) {
    return TableConfigs.normalize(TableConfigs.builder("t", 3).setOptimizer(o).build());
  }

  @Test
  void theShippedReactionsAreFoundThroughTheServiceLoader() {
    List<String> names = RowRules.names();
    assertEquals(List.of("sgd", "momentum", "adagrad", "adam", "ftrl"), names.subList(0, 5));
    assertTrue(names.contains("moving_average") && names.contains("surprise_decay"), "" + names);
    assertTrue(RowRules.has("adagrad") && RowRules.has("surprise_decay"));
    assertFalse(RowRules.has("energy") || RowRules.has(""), "only what is installed");
  }

  @Test
  void aBuiltInNamedAsARule_becomesItsKind() {
    OptimizerConfig o = normalized(TableConfigs.rule("adagrad", 0.5f, Map.of())).getOptimizer();
    assertEquals(OptimizerKind.ADAGRAD, o.getKind());
    assertEquals("", o.getRule());
    assertEquals(0.1f, o.getInitialAccumulator());
    assertEquals(normalized(TableConfigs.adagrad(0.5f, 0f, 0f)).getOptimizer(), o);
  }

  @Test
  void aRuleIsNormalizedWithItsDefaults_andRefusesWhatItDoesNotTake() {
    OptimizerConfig o = normalized(TableConfigs.rule("surprise_decay", 0.1f, Map.of("decay",
        0.25))).getOptimizer();
    assertEquals(Map.of("max_norm", 1.0, "surprise", 4.0, "decay", 0.25, "smoothing", 0.9),
        o.getParamsMap());
    assertEquals(1, TableConfigs.slots(o));
    TableException unknown = assertThrows(TableException.class, () -> normalized(
        TableConfigs.rule("moving_average", 0.1f, Map.of("rat", 0.5))));
    assertEquals("table 't': rule 'moving_average' has no parameter 'rat' (it takes: rate)",
        unknown.getMessage());
    TableException range = assertThrows(TableException.class, () -> normalized(
        TableConfigs.rule("moving_average", 0.1f, Map.of("rate", 1.5))));
    assertEquals("table 't': rule 'moving_average' parameter 'rate' must be in (0.0, 1.0] but"
        + " was 1.5", range.getMessage());
    TableException missing = assertThrows(TableException.class, () -> normalized(
        TableConfigs.rule("no_such_rule", 0.1f, Map.of())));
    assertTrue(missing.getMessage().startsWith("optimizer rule 'no_such_rule' is not installed"
        + " in this process"), missing.getMessage());
    assertTrue(missing.getMessage().contains("moving_average"), missing.getMessage());
    TableException badName = assertThrows(TableException.class, () -> normalized(
        TableConfigs.rule("Bad Name", 0.1f, Map.of())));
    assertTrue(badName.getMessage().contains("optimizer.rule must match"), badName.getMessage());
    TableException ruleOnKind = assertThrows(TableException.class, () -> normalized(
        TableConfigs.sgd(0.1f).toBuilder().setRule("moving_average").build()));
    assertTrue(ruleOnKind.getMessage().contains("read only with kind RULE"),
        ruleOnKind.getMessage());
    TableException paramsOnKind = assertThrows(TableException.class, () -> normalized(
        TableConfigs.sgd(0.1f).toBuilder().putParams("rate", 1).build()));
    assertTrue(paramsOnKind.getMessage().contains("not in params"), paramsOnKind.getMessage());
  }

  @Test
  void movingAverage_movesTheRowTowardTheFeedback() {
    OptimizerConfig o = normalized(TableConfigs.rule("moving_average", 0.1f,
        Map.of("rate", 0.25))).getOptimizer();
    RowOptimizer r = RowOptimizer.create(o, 3);
    float[] w = {1f, -2f, 0f};
    r.apply(w, 0, new float[0], 0, new float[] {3f, 2f, 4f}, 0, 0.1f, 1);
    assertArrayEquals(new float[] {1.5f, -1f, 1f}, w);
  }

  @Test
  void surpriseDecay_clipsAndDecaysRowsWhoseFeedbackIsSurprising() {
    OptimizerConfig o = normalized(TableConfigs.rule("surprise_decay", 0.5f, Map.of("max_norm",
        2.0, "surprise", 3.0, "decay", 0.5, "smoothing", 0.5))).getOptimizer();
    RowOptimizer r = RowOptimizer.create(o, 2);
    float[] w = {1f, 1f};
    float[] s = new float[2];
    r.apply(w, 0, s, 0, new float[] {0f, 1f}, 0, 0.5f, 1); // norm 1: the mean starts there
    assertArrayEquals(new float[] {1f, 0.5f}, w);
    assertEquals(1f, s[0]);
    r.apply(w, 0, s, 0, new float[] {2f, 0f}, 0, 0.5f, 2); // norm 2 <= 3 x 1: no decay
    assertArrayEquals(new float[] {0f, 0.5f}, w);
    assertEquals(1.5f, s[0]);
    r.apply(w, 0, s, 0, new float[] {0f, 8f}, 0, 0.5f, 3); // 8 > 3 x 1.5: halved, clipped to 2
    assertArrayEquals(new float[] {0f, 0.25f - 1f}, w);
    assertEquals(4.75f, s[0]);
  }

  @Test
  void aRuleMayNotTakeABuiltInsNameOrAnotherRulesName() {
    RowRule copy = renamed(new Reactions.MovingAverage(), "adam");
    IllegalStateException builtIn = assertThrows(IllegalStateException.class,
        () -> RowRules.load(List.of(copy)));
    assertTrue(builtIn.getMessage().contains("takes the name of the built-in optimizer 'adam'"),
        builtIn.getMessage());
    RowRule other = renamed(new Reactions.SurpriseDecay(), "moving_average");
    IllegalStateException twice = assertThrows(IllegalStateException.class,
        () -> RowRules.load(List.of(new Reactions.MovingAverage(), other)));
    assertTrue(twice.getMessage().contains("both take the name 'moving_average'"),
        twice.getMessage());
  }

  /** {@code rule} under another name (a class of its own, as a second provider would be). */
  private static RowRule renamed(RowRule rule, String name) {
    return new RowRule() {
      @Override
      public String name() {
        return name;
      }

      @Override
      public OptimizerConfig normalize(String table, OptimizerConfig config) {
        return rule.normalize(table, config);
      }

      @Override
      public int slots(OptimizerConfig config) {
        return rule.slots(config);
      }

      @Override
      public RowOptimizer create(OptimizerConfig config, int dim) {
        return rule.create(config, dim);
      }
    };
  }
}
