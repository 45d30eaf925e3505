package dev.dynembed.table.common;

import dev.dynembed.table.v1.OptimizerConfig;

/**
 * A table's row-update rule: what a shard does with the row of "feedback" a trainer sends for a
 * key (docs/design/0025-cells-and-rules.md). For the built-in optimizers the feedback is a
 * gradient and the rule a descent step (SGD, momentum, Adagrad, Adam, FTRL: each an instance of
 * this interface); a rule may also react to feedback that is no gradient at all (a moving
 * average toward a target row, a decay of rows whose feedback is surprising).
 *
 * <p>Rules are classes on the class path of every process that applies them, found by {@link
 * java.util.ServiceLoader} (a line with the class's name in {@code
 * META-INF/services/dev.dynembed.table.common.RowRule}); nothing but the rule's name and
 * parameters crosses the wire. A table names its rule with {@code OptimizerConfig.kind = RULE},
 * {@code rule} and {@code params}; a shard refuses to create (or restore) a table whose rule it
 * does not have, and the rule itself validates the parameters ({@link RuleParams}). A trainer
 * needs the rule too where it applies updates itself: a row cache, pipelined steps, the Redis
 * backend.
 *
 * <p>A rule must be a pure function of the row, its slots, the feedback and its parameters
 * (replicas and a replayed log apply it again and must get the same floats), and thread-safe
 * (shards apply rows of one table from many threads; a row is never applied concurrently).
 */
public interface RowRule {
  /** The name tables give in {@code OptimizerConfig.rule}: {@code [a-z][a-z0-9_]{0,63}}. */
  String name();

  /**
   * The config with every default filled in, or a {@link TableException#invalid} that names the
   * table, the parameter, the constraint and the value. The learning rate is already checked.
   * Called once, where the table is created; stored configs are normalized.
   */
  OptimizerConfig normalize(String table, OptimizerConfig config);

  /** Slot rows (each {@code dim} floats) the rule keeps beside each weight row. */
  int slots(OptimizerConfig config);

  /** The rule's update for rows of {@code dim} floats, from a normalized config. */
  RowOptimizer create(OptimizerConfig config, int dim);
}
