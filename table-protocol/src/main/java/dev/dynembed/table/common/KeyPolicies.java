package dev.dynembed.table.common;

import dev.dynembed.table.v1.KeyPolicy;
import dev.dynembed.table.v1.OptimizerConfig;

/**
 * Per-key statistics and the update policy that uses them ({@code OptimizerConfig.key_policy};
 * docs/design/0025-cells-and-rules.md): a decorator of the table's rule that keeps one more slot
 * row per key, {@code [m, frozen, 0...]}, m the running mean of the key's gradient norm.
 */
public final class KeyPolicies {
  private KeyPolicies() {}

  /** Index of the statistics' slot row among the rule's slot rows (the last), or -1 if none. */
  public static int statsSlot(OptimizerConfig normalized) {
    return normalized.hasKeyPolicy() ? RowRules.of(normalized).slots(normalized) : -1;
  }

  /** The policy with its defaults, or null when it asks for nothing; checks it against dim. */
  static KeyPolicy normalize(String table, int dim, KeyPolicy p) {
    TableConfigs.nonNegative(table, "optimizer.key_policy.freeze_below", p.getFreezeBelow());
    TableConfigs.nonNegative(table, "optimizer.key_policy.rate_reference", p.getRateReference());
    boolean on = p.getKeepStats() || p.getFreezeBelow() > 0f || p.getRateReference() > 0f;
    if (!on) {
      return null;
    }
    KeyPolicy.Builder b = p.toBuilder().setKeepStats(true);
    if (b.getStatsDecay() == 0f) {
      b.setStatsDecay(0.9f);
    }
    if (b.getFreezeAfter() == 0) {
      b.setFreezeAfter(10);
    }
    if (b.getRatePower() == 0f) {
      b.setRatePower(0.5f);
    }
    TableConfigs.inRange(table, "optimizer.key_policy.stats_decay", b.getStatsDecay(), 0f, 1f);
    TableConfigs.positive(table, "optimizer.key_policy.rate_power", b.getRatePower());
    if (b.getRatePower() > 4f) {
      throw TableException.invalid("table '%s': optimizer.key_policy.rate_power must be at most"
          + " 4 but was %s", table, b.getRatePower());
    }
    if (dim < 2) {
      throw TableException.invalid("table '%s': optimizer.key_policy keeps 2 statistics per key"
          + " in a slot row of dim floats and needs dim >= 2, not %d", table, dim);
    }
    return b.build();
  }

  /** The rule's optimizer wrapped in the policy. */
  static RowOptimizer wrap(RowOptimizer inner, KeyPolicy p) {
    return new Policy(inner, p);
  }

  private static final class Policy extends RowOptimizer {
    private final RowOptimizer inner;
    private final int stats;
    private final float decay;
    private final float freezeBelow;
    private final long freezeAfter;
    private final float rateReference;
    private final double ratePower;

    Policy(RowOptimizer inner, KeyPolicy p) {
      super(inner.dim);
      this.inner = inner;
      this.stats = inner.slots() * dim;
      this.decay = p.getStatsDecay();
      this.freezeBelow = p.getFreezeBelow();
      this.freezeAfter = p.getFreezeAfter();
      this.rateReference = p.getRateReference();
      this.ratePower = p.getRatePower();
    }

    @Override
    public int slots() {
      return inner.slots() + 1;
    }

    @Override
    public void initSlots(float[] s, int sOff) {
      inner.initSlots(s, sOff);
      java.util.Arrays.fill(s, sOff + stats, sOff + stats + dim, 0f);
    }

    @Override
    public void apply(float[] w, int wOff, float[] s, int sOff, float[] g, int gOff, float lr,
        long t) {
      int st = sOff + stats;
      float norm = (float) Math.sqrt(FloatKernels.dot(g, gOff, g, gOff, dim));
      float m = t <= 1 ? norm : decay * s[st] + (1f - decay) * norm;
      s[st] = m;
      if (freezeBelow > 0f && t > freezeAfter) {
        if (s[st + 1] != 0f) {
          if (m > 2f * freezeBelow) {
            s[st + 1] = 0f;
          }
        } else if (m < freezeBelow) {
          s[st + 1] = 1f;
        }
      }
      if (s[st + 1] != 0f) {
        return; // frozen: counted, not applied
      }
      float rate = rateReference > 0f && t > rateReference
          ? (float) (lr * Math.pow(rateReference / (double) t, ratePower)) : lr;
      inner.apply(w, wOff, s, sOff, g, gOff, rate, t);
    }
  }
}
