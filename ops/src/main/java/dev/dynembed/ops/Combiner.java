package dev.dynembed.ops;

/**
 * How an embedding bag combines the rows of one example's keys, each row weighted by its entry's
 * weight (the mask: 1 for a real key, 0 for padding, or any finite weight).
 */
public enum Combiner {
  /** {@code sum_e w_e row_e}. */
  SUM,
  /** {@code sum_e w_e row_e / sum_e w_e}; an example with no key gets zeros. */
  MEAN,
  /** {@code sum_e w_e row_e / sqrt(sum_e w_e^2)}; an example with no key gets zeros. */
  SQRTN
}
