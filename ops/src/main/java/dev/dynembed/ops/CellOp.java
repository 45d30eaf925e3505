package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.TableReads;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * {@code cell(keys UTF8 [n] or [b, s], handle [], inputs...) -> output}: a {@link DynamicCell}'s
 * forward on the rows of the keys ({@link DynEmbed#cell}). Training reads with {@code
 * findOrInsert} (new keys get rows) and its backward ({@link CellOpBp}) sends the cell's feedback
 * to the table; inference reads with {@code find} (unknown keys read as zero rows) and sends
 * nothing, though the other inputs still get their gradients. The rows go from forward to
 * backward through the step ({@link TableStep#putForward}), so a step reads each row once.
 */
@JavaOp.Name(CellOp.OP_NAME)
public final class CellOp extends RowReadOp {
  static final String OP_NAME = "dynembed_cell";

  private String cell;

  public CellOp() {}

  CellOp(SameDiff sd, SDVariable[] args, String cell, String table, int dim, boolean training,
      boolean count) {
    super(sd, args, table, dim, training, count);
    this.cell = cell;
  }

  /** A cell reads when it runs (its reads are not planned a step ahead). */
  @Override
  boolean plan(GraphTables graph, TableStep step, Map<String, INDArray> feeds, TableReads reads) {
    return false;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    DynamicCell c = Cells.get(cell);
    INDArray keys = oc.getInputArray(0);
    String[] k = DynamicEmbeddingLookup.keys(keys, OP_NAME);
    TableStep step = graph.step();
    EmbeddingTable t = graph.table(table);
    step.awaitFreshReads();
    TableReads reads = TableStep.reads();
    CompletableFuture<float[]> read = training ? reads.findOrInsert(t, k, count)
        : reads.find(t, k).thenApply(FindResult::rows);
    reads.submit();
    float[] r = TableReads.join(read);
    DataType type = oc.getInputArray(1).dataType();
    INDArray rows = NdArrays.array(r, rowsShape(keys));
    rows = type == DataType.FLOAT ? rows : rows.castTo(type);
    List<INDArray> in = inputs(oc, 2);
    INDArray out = c.forward(rows, in);
    long[] expected = c.outputShape(rows.shape(), shapes(in));
    if (out == null || !Arrays.equals(out.shape(), expected)) {
      throw new IllegalStateException("cell '" + cell + "': forward returned "
          + (out == null ? "null" : Arrays.toString(out.shape())) + " but its outputShape is "
          + Arrays.toString(expected));
    }
    oc.setOutputArray(0, out.dataType() == type ? out : out.castTo(type));
    step.putForward(getOwnName(), rows);
  }

  /** The op's inputs from {@code first} on. */
  static List<INDArray> inputs(OpContext oc, int first) {
    List<INDArray> in = new ArrayList<>();
    for (int i = first; i < oc.getInputArrays().size(); i++) {
      in.add(oc.getInputArray(i));
    }
    return in;
  }

  static List<long[]> shapes(List<INDArray> arrays) {
    return arrays.stream().map(INDArray::shape).toList();
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    List<INDArray> in = inputs(oc, 2);
    long[] shape = Cells.get(cell).outputShape(rowsShape(oc.getInputArray(0)), shapes(in));
    return List.of(LongShapeDescriptor.fromShape(shape, oc.getInputArray(1).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(1));
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    SDVariable[] args = args();
    SDVariable[] bpArgs = new SDVariable[args.length + 1];
    bpArgs[0] = args[0];
    bpArgs[1] = args[1];
    bpArgs[2] = grads.get(0);
    System.arraycopy(args, 2, bpArgs, 3, args.length - 2);
    SDVariable[] bp = new CellOpBp(sameDiff, bpArgs, cell, table, dim, training, getOwnName(),
        args.length - 2).outputVariables();
    List<SDVariable> out = new ArrayList<>();
    out.add(sameDiff.zerosLike(args[1])); // keys (UTF8): never executed, but one per input
    out.addAll(Arrays.asList(bp));        // the handle's (zero), then each input's
    return out;
  }

  @Override
  void properties(Map<String, Object> out) {
    super.properties(out);
    out.put("cell", cell);
  }

  @Override
  void readProperties(Props in) {
    super.readProperties(in);
    cell = in.string("cell");
  }
}
