package dev.dynembed.ops;

import java.util.List;
import org.nd4j.autodiff.functions.DifferentialFunction;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.imports.converters.ImportClassMapping;

/**
 * One-time, idempotent registration of the Java ops and their session. This is the one
 * process-wide setting of the ops, and M2.1's API makes it one: {@code
 * SameDiff.bindInferenceFactory} is static, and clones find op classes by name in a static map.
 * The bound session runs every other op exactly as SameDiff's default session does.
 */
public final class JavaOps {
  private static volatile boolean installed;

  private JavaOps() {}

  public static synchronized void install() {
    if (installed) {
      return;
    }
    SameDiff.bindInferenceFactory(JavaOpSession::new);
    // M2.1's SameDiff prints "Added differentiated op NAME" (System.out.println) for ops of every
    // gradient function it builds: 8 lines per graph, in the middle of a progress display. Those
    // lines, and only those, are dropped.
    if (!(System.out instanceof QuietOut)) {
      System.setOut(new QuietOut(System.out));
    }
    for (DifferentialFunction prototype : List.<DifferentialFunction>of(
        new DynamicEmbeddingLookup(), new DynamicEmbeddingLookupBp(), new SampledLogits(),
        new SampledLogitsBp(), new TopK(), new SigmoidCrossEntropy(),
        new SigmoidCrossEntropyBp(), new DynamicEmbeddingBag(), new DynamicEmbeddingBagBp(),
        new CellOp(), new CellOpBp())) {
      // graph clones (gradient functions) are deserialized by op name
      ImportClassMapping.getOpNameMapping().put(prototype.opName(), prototype);
    }
    installed = true;
  }

  /** Standard output without SameDiff's "Added differentiated op" lines. */
  static final class QuietOut extends java.io.PrintStream {
    static final String CHATTER = "Added differentiated op ";

    QuietOut(java.io.PrintStream out) {
      super(out, true);
    }

    @Override
    public void println(String x) {
      if (x == null || !x.startsWith(CHATTER)) {
        super.println(x);
      }
    }
  }
}
