package dev.dynembed.table.common;

import static dev.dynembed.table.common.TableConfigs.inRange;
import static dev.dynembed.table.common.TableConfigs.nonNegative;
import static dev.dynembed.table.common.TableConfigs.positive;

import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.OptimizerKind;
import java.util.List;
import java.util.Locale;

/**
 * The built-in optimizers as {@link RowRule}s: each fills its defaults, validates its fields and
 * makes its {@link RowOptimizer}. A config may name one as a rule ({@code kind = RULE, rule =
 * "adagrad"}); it is normalized to the kind.
 */
final class BuiltInRules {
  private BuiltInRules() {}

  private static final List<OptimizerKind> KINDS = List.of(OptimizerKind.SGD,
      OptimizerKind.MOMENTUM, OptimizerKind.ADAGRAD, OptimizerKind.ADAM, OptimizerKind.FTRL);

  static List<String> names() {
    return KINDS.stream().map(k -> k.name().toLowerCase(Locale.ROOT)).toList();
  }

  /** The built-in named {@code name} (lower case), or null. */
  static RowRule named(String name) {
    for (OptimizerKind k : KINDS) {
      if (k.name().toLowerCase(Locale.ROOT).equals(name)) {
        return of(k);
      }
    }
    return null;
  }

  static RowRule of(OptimizerKind kind) {
    return switch (kind) {
      case SGD -> SGD;
      case MOMENTUM -> MOMENTUM;
      case ADAGRAD -> ADAGRAD;
      case ADAM -> ADAM;
      case FTRL -> FTRL;
      default -> throw TableException.invalid("optimizer kind %s is not supported", kind);
    };
  }

  /** A built-in: its kind, slots, defaults and checks, and its optimizer. */
  private abstract static class BuiltIn implements RowRule {
    private final OptimizerKind kind;
    private final int slots;

    BuiltIn(OptimizerKind kind, int slots) {
      this.kind = kind;
      this.slots = slots;
    }

    @Override
    public String name() {
      return kind.name().toLowerCase(Locale.ROOT);
    }

    @Override
    public int slots(OptimizerConfig config) {
      return slots;
    }

    @Override
    public OptimizerConfig normalize(String table, OptimizerConfig o) {
      if (!o.getParamsMap().isEmpty()) {
        throw TableException.invalid("table '%s': optimizer %s takes its settings in its own"
            + " fields, not in params (%s)", table, name(), o.getParamsMap().keySet());
      }
      OptimizerConfig.Builder b = o.toBuilder().setKind(kind).clearRule();
      fill(table, o, b);
      return b.build();
    }

    abstract void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b);
  }

  static final RowRule SGD = new BuiltIn(OptimizerKind.SGD, 0) {
    @Override
    void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b) {}

    @Override
    public RowOptimizer create(OptimizerConfig c, int dim) {
      return new RowOptimizer.Sgd(dim);
    }
  };

  static final RowRule MOMENTUM = new BuiltIn(OptimizerKind.MOMENTUM, 1) {
    @Override
    void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b) {
      if (o.getMomentum() == 0f) {
        b.setMomentum(0.9f);
      }
      inRange(table, "optimizer.momentum", b.getMomentum(), 0f, 1f);
    }

    @Override
    public RowOptimizer create(OptimizerConfig c, int dim) {
      return new RowOptimizer.Momentum(dim, c.getMomentum());
    }
  };

  static final RowRule ADAGRAD = new BuiltIn(OptimizerKind.ADAGRAD, 1) {
    @Override
    void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b) {
      if (o.getInitialAccumulator() == 0f) {
        b.setInitialAccumulator(0.1f);
      }
      if (o.getEpsilon() == 0f) {
        b.setEpsilon(1e-7f);
      }
      positive(table, "optimizer.initial_accumulator", b.getInitialAccumulator());
      positive(table, "optimizer.epsilon", b.getEpsilon());
    }

    @Override
    public RowOptimizer create(OptimizerConfig c, int dim) {
      return new RowOptimizer.Adagrad(dim, c.getInitialAccumulator(), c.getEpsilon());
    }
  };

  static final RowRule ADAM = new BuiltIn(OptimizerKind.ADAM, 2) {
    @Override
    void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b) {
      if (o.getBeta1() == 0f) {
        b.setBeta1(0.9f);
      }
      if (o.getBeta2() == 0f) {
        b.setBeta2(0.999f);
      }
      if (o.getEpsilon() == 0f) {
        b.setEpsilon(1e-8f);
      }
      inRange(table, "optimizer.beta1", b.getBeta1(), 0f, 1f);
      inRange(table, "optimizer.beta2", b.getBeta2(), 0f, 1f);
      positive(table, "optimizer.epsilon", b.getEpsilon());
    }

    @Override
    public RowOptimizer create(OptimizerConfig c, int dim) {
      return new RowOptimizer.Adam(dim, c.getBeta1(), c.getBeta2(), c.getEpsilon());
    }
  };

  static final RowRule FTRL = new BuiltIn(OptimizerKind.FTRL, 2) {
    @Override
    void fill(String table, OptimizerConfig o, OptimizerConfig.Builder b) {
      if (o.getInitialAccumulator() == 0f) {
        b.setInitialAccumulator(0.1f);
      }
      positive(table, "optimizer.initial_accumulator", b.getInitialAccumulator());
      nonNegative(table, "optimizer.l1", b.getL1());
      nonNegative(table, "optimizer.l2", b.getL2());
      nonNegative(table, "optimizer.beta", b.getBeta());
    }

    @Override
    public RowOptimizer create(OptimizerConfig c, int dim) {
      return new RowOptimizer.Ftrl(dim, c.getInitialAccumulator(), c.getL1(), c.getL2(),
          c.getBeta());
    }
  };
}
