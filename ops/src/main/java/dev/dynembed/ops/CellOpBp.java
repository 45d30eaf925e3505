package dev.dynembed.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Backward of {@link CellOp}: {@code (keys, handle, dL/d(output), inputs...) -> (dL/d(handle) =
 * 0, dL/d(input) for each input)}, with the side effect of a training cell: its feedback rows go
 * to the table, whose rule applies them (sent with the step's other writes, as a lookup's
 * gradients are).
 */
@JavaOp.Name(CellOpBp.OP_NAME)
public final class CellOpBp extends JavaOp {
  static final String OP_NAME = "dynembed_cell_bp";

  private String cell;
  private String table;
  private int dim;
  private boolean training;
  /** The forward op's name, under which it left the rows for this step. */
  private String forward;
  private int inputs;

  public CellOpBp() {}

  CellOpBp(SameDiff sd, SDVariable[] args, String cell, String table, int dim, boolean training,
      String forward, int inputs) {
    super(sd, args);
    this.cell = cell;
    this.table = table;
    this.dim = dim;
    this.training = training;
    this.forward = forward;
    this.inputs = inputs;
  }

  @Override
  public int getNumOutputs() {
    return 1 + inputs;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    DynamicCell c = Cells.get(cell);
    INDArray rows = graph.step().takeForward(forward, INDArray.class);
    List<INDArray> in = CellOp.inputs(oc, 3);
    DynamicCell.Backward b = c.backward(rows, in, oc.getInputArray(2));
    if (b == null || b.feedback() == null || !Arrays.equals(b.feedback().shape(), rows.shape())) {
      throw new IllegalStateException("cell '" + cell + "': backward's feedback must have the"
          + " rows' shape " + Arrays.toString(rows.shape()) + " but was "
          + (b == null || b.feedback() == null ? "null" : Arrays.toString(b.feedback().shape())));
    }
    if (b.inputGrads().size() != in.size()) {
      throw new IllegalStateException("cell '" + cell + "': backward returned "
          + b.inputGrads().size() + " input gradients for " + in.size() + " inputs");
    }
    if (training) {
      String[] k = DynamicEmbeddingLookup.keys(oc.getInputArray(0), OP_NAME);
      graph.step().applyGradients(graph.table(table), k, NdArrays.floats(b.feedback()));
    }
    oc.setOutputArray(0, Nd4j.zeros(oc.getInputArray(1).dataType()));
    for (int i = 0; i < in.size(); i++) {
      INDArray g = b.inputGrads().get(i);
      if (g == null || !Arrays.equals(g.shape(), in.get(i).shape())) {
        throw new IllegalStateException("cell '" + cell + "': the gradient of input " + i
            + " must have its shape " + Arrays.toString(in.get(i).shape()) + " but was "
            + (g == null ? "null" : Arrays.toString(g.shape())));
      }
      DataType type = in.get(i).dataType();
      oc.setOutputArray(1 + i, g.dataType() == type ? g : g.castTo(type));
    }
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    List<LongShapeDescriptor> out = new ArrayList<>();
    out.add(LongShapeDescriptor.fromShape(new long[0], oc.getInputArray(1).dataType()));
    for (INDArray a : CellOp.inputs(oc, 3)) {
      out.add(LongShapeDescriptor.fromShape(a.shape(), a.dataType()));
    }
    return out;
  }

  @Override
  List<DataType> outputTypes(List<DataType> in) {
    List<DataType> out = new ArrayList<>();
    out.add(in.get(1));
    out.addAll(in.subList(3, in.size()));
    return out;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("cell", cell);
    out.put("table", table);
    out.put("dim", (long) dim);
    out.put("training", training);
    out.put("forward", forward);
    out.put("inputs", (long) inputs);
  }

  @Override
  void readProperties(Props in) {
    cell = in.string("cell");
    table = in.string("table");
    dim = in.integer("dim");
    training = in.bool("training");
    forward = in.string("forward");
    inputs = in.integer("inputs");
  }
}
