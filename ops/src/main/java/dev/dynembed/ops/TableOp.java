package dev.dynembed.ops;

import dev.dynembed.table.client.TableReads;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.VariableType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A Java op whose forward reads tables, and whose reads can be made ahead of the step that uses
 * them ({@link GraphTables#plan}): the trainer sends the next step's reads while the current step
 * computes (docs/design/0007-pipelined-steps.md). When the op runs, it takes the planned reads if
 * its inputs are the very arrays they were planned from, and otherwise reads as usual.
 */
abstract class TableOp extends JavaOp {
  TableOp() {}

  TableOp(org.nd4j.autodiff.samediff.SameDiff sd, SDVariable... args) {
    super(sd, args);
  }

  /**
   * Adds the reads this op's forward makes for {@code feeds} to {@code reads} and records them in
   * {@code step} under the op's name.
   *
   * @return false when an input the reads depend on is not a fed placeholder (nothing added)
   */
  abstract boolean plan(GraphTables graph, TableStep step, Map<String, INDArray> feeds,
      TableReads reads);

  /** The fed array of input {@code i} when it is a placeholder, else null. */
  INDArray fed(int i, Map<String, INDArray> feeds) {
    SDVariable v = arg(i);
    return v.getVariableType() == VariableType.PLACEHOLDER ? feeds.get(v.name()) : null;
  }
}
