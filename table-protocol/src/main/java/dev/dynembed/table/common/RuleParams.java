package dev.dynembed.table.common;

import dev.dynembed.table.v1.OptimizerConfig;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The parameters of a named rule's config ({@code OptimizerConfig.params}), read against the
 * rule's defaults: a name the rule does not take, or a value that is not finite, is refused with
 * the table, the rule and the names it takes.
 */
public final class RuleParams {
  private final String table;
  private final String rule;
  private final Map<String, Double> values;

  private RuleParams(String table, String rule, Map<String, Double> values) {
    this.table = table;
    this.rule = rule;
    this.values = values;
  }

  /**
   * The config's parameters over {@code defaults} (every parameter the rule takes, with its
   * default value).
   */
  public static RuleParams of(String table, OptimizerConfig config, Map<String, Double> defaults) {
    Map<String, Double> v = new TreeMap<>(defaults);
    for (Map.Entry<String, Double> e : config.getParamsMap().entrySet()) {
      if (!defaults.containsKey(e.getKey())) {
        throw TableException.invalid("table '%s': rule '%s' has no parameter '%s' (it takes: %s)",
            table, config.getRule(), e.getKey(), String.join(", ", new TreeMap<>(defaults)
                .keySet()));
      }
      if (!Double.isFinite(e.getValue())) {
        throw TableException.invalid("table '%s': rule '%s' parameter '%s' must be finite but"
            + " was %s", table, config.getRule(), e.getKey(), e.getValue());
      }
      v.put(e.getKey(), e.getValue());
    }
    return new RuleParams(table, config.getRule(), v);
  }

  /** The parameters of a normalized config (every one present). */
  public static RuleParams of(OptimizerConfig normalized) {
    return new RuleParams("", normalized.getRule(), new TreeMap<>(normalized.getParamsMap()));
  }

  public double get(String name) {
    Double d = values.get(name);
    if (d == null) {
      throw new IllegalArgumentException("rule '" + rule + "' has no parameter '" + name + "'");
    }
    return d;
  }

  /**
   * Refuses the value of {@code name} outside {@code [lo, hi]} (each end open when its flag
   * says so).
   */
  public RuleParams require(String name, double lo, boolean loOpen, double hi, boolean hiOpen) {
    double v = get(name);
    boolean ok = (loOpen ? v > lo : v >= lo) && (hiOpen ? v < hi : v <= hi);
    if (!ok) {
      throw TableException.invalid("table '%s': rule '%s' parameter '%s' must be in %s%s, %s%s"
          + " but was %s", table, rule, name, loOpen ? "(" : "[", lo, hi, hiOpen ? ")" : "]", v);
    }
    return this;
  }

  /** {@code config} with every parameter set (the defaults filled in). */
  public OptimizerConfig fill(OptimizerConfig config) {
    return config.toBuilder().clearParams().putAllParams(new LinkedHashMap<>(values)).build();
  }
}
