package dev.dynembed.ops;

import java.util.Map;
import java.util.Set;
import org.nd4j.autodiff.functions.DifferentialFunction;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.samediff.config.ExecutionResult;
import org.nd4j.autodiff.samediff.config.SDValue;
import org.nd4j.autodiff.samediff.internal.AbstractSession;
import org.nd4j.autodiff.samediff.internal.FrameIter;
import org.nd4j.autodiff.samediff.internal.InferenceSession;
import org.nd4j.linalg.api.ops.OpContext;

/**
 * The inference session every SameDiff instance uses once {@link JavaOps#install()} ran: it
 * executes {@link JavaOp}s in Java and hands every other op to the native executioner unchanged.
 * Its op outputs are recycled between training steps ({@link StepArrays}).
 */
final class JavaOpSession extends InferenceSession {
  private GraphTables graph;

  JavaOpSession(SameDiff sd) {
    super(sd);
    setMmgr(StepArrays.memoryManager(getMmgr())); // arrays recycled between training steps
  }

  /** The table state of the graph this session runs (looked up once). */
  private GraphTables graph() {
    GraphTables g = graph;
    if (g == null) {
      g = GraphTables.of(sameDiff);
      graph = g;
    }
    return g;
  }

  @Override
  public ExecutionResult doExec(DifferentialFunction op, OpContext oc, FrameIter frame,
      Set<AbstractSession.VarId> opInputs, Set<AbstractSession.VarId> allIterInputs,
      Set<String> constAndPhInputs, Map<String, SDValue> otherPlaceHolders) {
    if (op instanceof JavaOp j) {
      j.exec(oc, graph());
      return ExecutionResult.createFrom(op, oc);
    }
    return super.doExec(op, oc, frame, opInputs, allIterInputs, constAndPhInputs,
        otherPlaceHolders);
  }
}
