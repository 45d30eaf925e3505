package dev.dynembed.table.common;

import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.OptimizerKind;
import java.util.Collections;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The row-update rules this process has: the built-in optimizers by kind, and the named rules
 * found once by {@link ServiceLoader} ({@link RowRule}). A named rule may not take a built-in's
 * name, and two classes may not share a name: either stops the lookup with an error that names
 * both.
 */
public final class RowRules {
  static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_]{0,63}");
  private static volatile Map<String, RowRule> named;

  private RowRules() {}

  /** The rule of a config: its kind's built-in, or the named rule of kind RULE. */
  public static RowRule of(OptimizerConfig c) {
    return c.getKind() == OptimizerKind.RULE ? named(c.getRule()) : BuiltInRules.of(c.getKind());
  }

  /** The named rule, or a {@link TableException#invalid} that lists what this process has. */
  public static RowRule named(String name) {
    RowRule r = BuiltInRules.named(name);
    if (r == null) {
      r = loaded().get(name);
    }
    if (r == null) {
      throw TableException.invalid("optimizer rule '%s' is not installed in this process (a rule"
          + " is a class on the class path, listed in META-INF/services/%s; installed: %s)",
          name, RowRule.class.getName(), String.join(", ", names()));
    }
    return r;
  }

  /** Whether this process has the rule {@code name} (built-in or named). */
  public static boolean has(String name) {
    return BuiltInRules.named(name) != null || loaded().containsKey(name);
  }

  /** The names of every rule this process has, built-in first. */
  public static java.util.List<String> names() {
    java.util.List<String> n = new java.util.ArrayList<>(BuiltInRules.names());
    n.addAll(loaded().keySet());
    return n;
  }

  private static Map<String, RowRule> loaded() {
    Map<String, RowRule> m = named;
    if (m == null) {
      synchronized (RowRules.class) {
        m = named;
        if (m == null) {
          m = load(ServiceLoader.load(RowRule.class, RowRule.class.getClassLoader()));
          named = m;
        }
      }
    }
    return m;
  }

  static Map<String, RowRule> load(Iterable<RowRule> rules) {
    Map<String, RowRule> m = new TreeMap<>();
    for (RowRule r : rules) {
      String n = r.name();
      if (n == null || !NAME.matcher(n).matches()) {
        throw new IllegalStateException("row rule " + r.getClass().getName() + " has the name '"
            + n + "'; a rule's name must match " + NAME.pattern());
      }
      if (BuiltInRules.named(n) != null) {
        throw new IllegalStateException("row rule " + r.getClass().getName() + " takes the name"
            + " of the built-in optimizer '" + n + "'");
      }
      RowRule before = m.putIfAbsent(n, r);
      if (before != null && before.getClass() != r.getClass()) {
        throw new IllegalStateException("row rules " + before.getClass().getName() + " and "
            + r.getClass().getName() + " both take the name '" + n + "'");
      }
    }
    return Collections.unmodifiableMap(m);
  }
}
