package dev.dynembed.table.common;

import dev.dynembed.table.v1.GrowTableRequest;
import dev.dynembed.table.v1.InitializerConfig;
import dev.dynembed.table.v1.InitializerKind;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.OptimizerKind;
import dev.dynembed.table.v1.TableConfig;

/**
 * Defaults and validation of table configs, in one place. {@link #normalize} is applied once when
 * a table is created: it fills every default ("0 means the default" for the fields listed in the
 * README's configuration table) and rejects invalid values with a message that names the field,
 * the constraint and the value. Stored and described configs are always normalized.
 */
public final class TableConfigs {
  private TableConfigs() {}

  public static final float DEFAULT_LEARNING_RATE = 0.01f;
  public static final float DEFAULT_INIT_RANGE = 0.05f;

  /** An SGD table of the given name and dim with the default initializer. */
  public static TableConfig.Builder builder(String name, int dim) {
    return TableConfig.newBuilder().setName(name).setDim(dim);
  }

  public static OptimizerConfig sgd(float lr) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.SGD).setLearningRate(lr).build();
  }

  public static OptimizerConfig momentum(float lr, float momentum) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.MOMENTUM).setLearningRate(lr)
        .setMomentum(momentum).build();
  }

  public static OptimizerConfig adagrad(float lr, float initialAccumulator, float epsilon) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.ADAGRAD).setLearningRate(lr)
        .setInitialAccumulator(initialAccumulator).setEpsilon(epsilon).build();
  }

  public static OptimizerConfig adam(float lr, float beta1, float beta2, float epsilon) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.ADAM).setLearningRate(lr)
        .setBeta1(beta1).setBeta2(beta2).setEpsilon(epsilon).build();
  }

  public static OptimizerConfig ftrl(
      float lr, float initialAccumulator, float l1, float l2, float beta) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.FTRL).setLearningRate(lr)
        .setInitialAccumulator(initialAccumulator).setL1(l1).setL2(l2).setBeta(beta).build();
  }

  public static InitializerConfig uniform(float low, float high, long seed) {
    return InitializerConfig.newBuilder().setKind(InitializerKind.UNIFORM).setLow(low)
        .setHigh(high).setSeed(seed).build();
  }

  public static InitializerConfig normal(float mean, float stddev, long seed) {
    return InitializerConfig.newBuilder().setKind(InitializerKind.NORMAL).setMean(mean)
        .setStddev(stddev).setSeed(seed).build();
  }

  /**
   * A grow of {@code table} to {@code dim}, its new columns and new keys from {@code init} (null:
   * the table's own initializer).
   */
  public static GrowTableRequest grow(String table, int dim, InitializerConfig init) {
    GrowTableRequest.Builder g = GrowTableRequest.newBuilder().setTable(table).setDim(dim);
    if (init != null) {
      g.setInitializer(init);
    }
    return g.build();
  }

  public static InitializerConfig zeros() {
    return InitializerConfig.newBuilder().setKind(InitializerKind.ZEROS).build();
  }

  /** Number of slot rows the (normalized) optimizer keeps beside each weight row. */
  public static int slots(OptimizerConfig optimizer) {
    return RowRules.of(optimizer).slots(optimizer) + (optimizer.hasKeyPolicy() ? 1 : 0);
  }

  /** A named rule's config ({@link RowRule}): its name and parameters, checked on create. */
  public static OptimizerConfig rule(String name, float lr, java.util.Map<String, Double> params) {
    return OptimizerConfig.newBuilder().setKind(OptimizerKind.RULE).setRule(name)
        .setLearningRate(lr).putAllParams(params).build();
  }

  /** Fills defaults and validates. */
  /**
   * The config of a table that holds every row in memory: no memory caps and no tier below
   * memory (a whole checkpoint read by an offline tool).
   */
  public static TableConfig uncapped(TableConfig c) {
    return c.toBuilder().clearMaxKeys().clearMaxBytes().clearDiskTier().clearRedisTier().build();
  }

  /**
   * The config a table written over a Redis tier takes where there is none (a checkpoint loaded
   * into a table in the caller's own process): redis_tier off, and a capped table's victims go
   * to the disk tier instead, so that no row of the checkpoint is evicted for want of a tier.
   */
  public static TableConfig withoutRedisTier(TableConfig c) {
    if (!c.getRedisTier()) {
      return c;
    }
    return c.toBuilder().setRedisTier(false)
        .setDiskTier(c.getMaxKeys() > 0 || c.getMaxBytes() > 0).build();
  }

  /** Largest admission sketch: 1 GiB per shard. */
  public static final long MAX_ADMISSION_SKETCH_KIB = 1 << 20;

  public static TableConfig normalize(TableConfig c) {
    if (!c.getName().matches(Limits.TABLE_NAME_PATTERN)) {
      throw TableException.invalid(
          "table name '%s' is invalid: it must match %s", c.getName(), Limits.TABLE_NAME_PATTERN);
    }
    if (c.getDim() < 1 || c.getDim() > Limits.MAX_DIM) {
      throw TableException.invalid(
          "table '%s': dim must be in [1, %d] but was %d",
          c.getName(), Limits.MAX_DIM, Integer.toUnsignedLong(c.getDim()));
    }
    int maxKey = c.getMaxKeyBytes() == 0 ? Limits.DEFAULT_MAX_KEY_BYTES : c.getMaxKeyBytes();
    if (maxKey < 1 || maxKey > Limits.MAX_KEY_BYTES) {
      throw TableException.invalid(
          "table '%s': max_key_bytes must be in [1, %d] but was %d",
          c.getName(), Limits.MAX_KEY_BYTES, Integer.toUnsignedLong(maxKey));
    }
    if (Integer.toUnsignedLong(c.getAdmissionSketchKib()) > MAX_ADMISSION_SKETCH_KIB) {
      throw TableException.invalid(
          "table '%s': admission_sketch_kib must be in [0, %d] but was %d", c.getName(),
          MAX_ADMISSION_SKETCH_KIB, Integer.toUnsignedLong(c.getAdmissionSketchKib()));
    }
    if (c.getMinCount() < 0) { // a uint32 past 2^31 - 1 would read as "no admission"
      throw TableException.invalid("table '%s': min_count must be in [0, %d] but was %d",
          c.getName(), Integer.MAX_VALUE, Integer.toUnsignedLong(c.getMinCount()));
    }
    if (c.hasAdmissionPressure()) {
      checkPressure(c);
    }
    if (c.hasCooccurrence()) {
      checkCooccurrence(c);
    }
    if (c.getAdmissionSketchKib() > 0 && c.getMinCount() <= 1 && !c.hasAdmissionPressure()) {
      throw TableException.invalid("table '%s': admission_sketch_kib (%d) counts keys awaiting"
          + " admission, which needs min_count > 1 (was %d)", c.getName(),
          c.getAdmissionSketchKib(), c.getMinCount());
    }
    if (c.getEvictionPolicyValue() < 0 || c.getEvictionPolicyValue() > 2) {
      throw TableException.invalid("table '%s': eviction_policy %d is not LFU or LRU",
          c.getName(), c.getEvictionPolicyValue());
    }
    if (c.getDiskTier() && c.getMaxKeys() == 0 && c.getMaxBytes() == 0) {
      throw TableException.invalid("table '%s': disk_tier moves the victims of a cap to disk,"
          + " which needs max_keys or max_bytes (the memory the hot rows may use)", c.getName());
    }
    if (c.getDiskTier() && c.getRedisTier()) {
      throw TableException.invalid("table '%s': choose disk_tier or redis_tier, not both (one"
          + " tier below memory per table)", c.getName());
    }
    return c.toBuilder()
        .setMaxKeyBytes(maxKey)
        .setInitializer(normalize(c.getName(), c.getInitializer()))
        .setOptimizer(withPolicy(c.getName(), c.getDim(), c.getOptimizer(),
            normalize(c.getName(), c.getOptimizer())))
        .build();
  }

  /** Largest cooccurrence.max_anchors per shard. */
  public static final int MAX_PAIR_ANCHORS = 1 << 26;

  /** Largest cooccurrence.sketch_kib (1 GiB). */
  public static final int MAX_PAIR_SKETCH_KIB = 1 << 20;

  private static void checkCooccurrence(TableConfig c) {
    dev.dynembed.table.v1.Cooccurrence p = c.getCooccurrence();
    long partners = Integer.toUnsignedLong(p.getPartnersPerKey());
    if (partners < 1 || partners > 1024) {
      throw TableException.invalid("table '%s': cooccurrence.partners_per_key must be in [1, 1024]"
          + " but was %d", c.getName(), partners);
    }
    long anchors = Integer.toUnsignedLong(p.getMaxAnchors());
    if (anchors < 1 || anchors > MAX_PAIR_ANCHORS) {
      throw TableException.invalid("table '%s': cooccurrence.max_anchors must be in [1, %d] but"
          + " was %d", c.getName(), MAX_PAIR_ANCHORS, anchors);
    }
    long kib = Integer.toUnsignedLong(p.getSketchKib());
    if (kib < 1 || kib > MAX_PAIR_SKETCH_KIB) {
      throw TableException.invalid("table '%s': cooccurrence.sketch_kib must be in [1, %d] but"
          + " was %d", c.getName(), MAX_PAIR_SKETCH_KIB, kib);
    }
  }

  /** Largest admission_pressure.max_count. */
  public static final int MAX_PRESSURE_COUNT = 1 << 20;

  private static void checkPressure(TableConfig c) {
    dev.dynembed.table.v1.AdmissionPressure p = c.getAdmissionPressure();
    if (!(p.getFrom() > 0 && p.getFrom() < 1)) {
      throw TableException.invalid("table '%s': admission_pressure.from must be in (0, 1) (the"
          + " fraction of the memory where admission starts to tighten) but was %s", c.getName(),
          p.getFrom());
    }
    long base = Math.max(1, c.getMinCount());
    long max = Integer.toUnsignedLong(p.getMaxCount());
    if (max <= base || max > MAX_PRESSURE_COUNT) {
      throw TableException.invalid("table '%s': admission_pressure.max_count must be in (%d, %d]"
          + " (above max(min_count, 1)) but was %d", c.getName(), base, MAX_PRESSURE_COUNT, max);
    }
    if (c.getAdmissionSketchKib() == 0) {
      throw TableException.invalid("table '%s': admission_pressure needs admission_sketch_kib > 0:"
          + " the counts of keys kept out under pressure must stay in a fixed memory",
          c.getName());
    }
    if (c.getDiskTier() || c.getRedisTier()) {
      throw TableException.invalid("table '%s': admission_pressure is not for a table with a tier"
          + " (its memory is full by design, and a cold row comes back without admission)",
          c.getName());
    }
  }

  /**
   * The count a key of table {@code c} needs for a row at memory pressure {@code p}: max(min_count,
   * 1) below admission_pressure.from (and without the policy), rising geometrically to max_count
   * at p = 1 (and above).
   */
  public static int admissionCount(TableConfig c, double p) {
    int base = Math.max(1, c.getMinCount());
    if (!c.hasAdmissionPressure() || !(p > c.getAdmissionPressure().getFrom())) {
      return base;
    }
    double from = c.getAdmissionPressure().getFrom();
    int max = c.getAdmissionPressure().getMaxCount();
    double f = Math.min(1, (p - from) / (1 - from));
    return (int) Math.min(max, Math.ceil(base * Math.pow((double) max / base, f) - 1e-9));
  }

  private static InitializerConfig normalize(String table, InitializerConfig i) {
    InitializerConfig.Builder b = i.toBuilder();
    switch (i.getKind()) {
      case INITIALIZER_KIND_UNSPECIFIED ->
          b.setKind(InitializerKind.UNIFORM).setLow(-DEFAULT_INIT_RANGE).setHigh(DEFAULT_INIT_RANGE);
      case ZEROS -> { }
      case UNIFORM -> {
        finite(table, "initializer.low", i.getLow());
        finite(table, "initializer.high", i.getHigh());
        if (!(i.getLow() <= i.getHigh())) {
          throw TableException.invalid(
              "table '%s': initializer.low (%s) must not exceed initializer.high (%s)",
              table, i.getLow(), i.getHigh());
        }
      }
      case NORMAL, TRUNCATED_NORMAL -> {
        finite(table, "initializer.mean", i.getMean());
        positive(table, "initializer.stddev", i.getStddev());
      }
      default -> throw TableException.invalid(
          "table '%s': initializer kind %s is not supported", table, i.getKind());
    }
    return b.build();
  }

  /** {@code o} (normalized by its rule) with the asked config's key policy, normalized. */
  private static OptimizerConfig withPolicy(String table, int dim, OptimizerConfig asked,
      OptimizerConfig o) {
    dev.dynembed.table.v1.KeyPolicy p = asked.hasKeyPolicy()
        ? KeyPolicies.normalize(table, dim, asked.getKeyPolicy()) : null;
    return p == null ? o.toBuilder().clearKeyPolicy().build()
        : o.toBuilder().setKeyPolicy(p).build();
  }

  private static OptimizerConfig normalize(String table, OptimizerConfig o) {
    OptimizerConfig.Builder b = o.toBuilder();
    if (o.getKind() == OptimizerKind.OPTIMIZER_KIND_UNSPECIFIED) {
      b.setKind(OptimizerKind.SGD);
    }
    if (o.getLearningRate() == 0f) {
      b.setLearningRate(DEFAULT_LEARNING_RATE);
    }
    positive(table, "optimizer.learning_rate", b.getLearningRate());
    if (b.getLearningRate() > Limits.MAX_LEARNING_RATE) {
      throw TableException.invalid("table '%s': optimizer.learning_rate must be at most %s but"
          + " was %s", table, Limits.MAX_LEARNING_RATE, b.getLearningRate());
    }
    if (b.getKind() == OptimizerKind.UNRECOGNIZED) {
      throw TableException.invalid("table '%s': optimizer kind %s is not supported", table,
          o.getKindValue());
    }
    if (b.getKind() == OptimizerKind.RULE) {
      if (!RowRules.NAME.matcher(b.getRule()).matches()) {
        throw TableException.invalid("table '%s': optimizer.rule must match %s but was '%s'",
            table, RowRules.NAME.pattern(), b.getRule());
      }
    } else if (!b.getRule().isEmpty()) {
      throw TableException.invalid("table '%s': optimizer.rule ('%s') is read only with kind"
          + " RULE, not %s", table, b.getRule(), b.getKind());
    }
    OptimizerConfig c = b.build();
    return RowRules.of(c).normalize(table, c); // a built-in named as a rule becomes its kind
  }

  static void finite(String table, String field, float v) {
    if (!Float.isFinite(v)) {
      throw TableException.invalid("table '%s': %s must be finite but was %s", table, field, v);
    }
  }

  static void positive(String table, String field, float v) {
    if (!(Float.isFinite(v) && v > 0f)) {
      throw TableException.invalid("table '%s': %s must be > 0 but was %s", table, field, v);
    }
  }

  static void nonNegative(String table, String field, float v) {
    if (!(Float.isFinite(v) && v >= 0f)) {
      throw TableException.invalid("table '%s': %s must be >= 0 but was %s", table, field, v);
    }
  }

  /** lo <= v < hi. */
  static void inRange(String table, String field, float v, float lo, float hi) {
    if (!(v >= lo && v < hi)) {
      throw TableException.invalid(
          "table '%s': %s must be in [%s, %s) but was %s", table, field, lo, hi, v);
    }
  }
}
