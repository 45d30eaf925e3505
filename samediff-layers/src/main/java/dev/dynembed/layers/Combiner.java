package dev.dynembed.layers;

/** How an embedding bag combines the rows of one example's keys. */
public enum Combiner {
  /** Sum of the rows of the real (unmasked) keys. */
  SUM,
  /** Mean of the rows of the real keys; an example with none gets zeros. */
  MEAN
}
