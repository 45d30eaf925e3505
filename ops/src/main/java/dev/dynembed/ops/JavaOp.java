package dev.dynembed.ops;

import org.nd4j.linalg.api.ops.OpContext;

/**
 * An op computed in Java inside a SameDiff graph. {@link JavaOpSession} routes ops implementing
 * this to {@link #exec} instead of the native executioner (which only knows native op hashes).
 */
public interface JavaOp {
  /** Reads inputs from {@code oc.getInputArray(i)} and sets every output on {@code oc}. */
  void exec(OpContext oc);
}
