package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableReads;
import dev.dynembed.table.client.TableRows;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataBuffer;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * {@code lookup(keys UTF8 [n] or [b, s], handle []) -> [n, dim] or [b, s, dim]} in the handle's
 * floating-point type (FLOAT normally, DOUBLE for gradient checks): rows of the keys from a table.
 * The gathered form {@code lookup(keys UTF8 [u], handle [], index INT [n] or [b, s])} reads each
 * of u (distinct) keys once and outputs row {@code index[i]} at position i; its backward sums the
 * gradient rows per key before sending them, so a key used many times in a batch costs the table
 * one row each way.
 * Training mode creates missing rows and its backward sends the gradient rows to the table;
 * inference mode uses {@code find}: unknown keys get zero rows and nothing is created or sent.
 * The scalar {@code handle} is a trainable variable that puts the backward op on a gradient path;
 * its own gradient is always zero.
 */
@JavaOp.Name(DynamicEmbeddingLookup.OP_NAME)
public final class DynamicEmbeddingLookup extends RowReadOp {
  static final String OP_NAME = "dynembed_lookup";

  public DynamicEmbeddingLookup() {}

  DynamicEmbeddingLookup(SameDiff sd, SDVariable keys, SDVariable handle, SDVariable index,
      String table, int dim, boolean training, boolean count) {
    super(sd, index == null ? new SDVariable[] {keys, handle}
        : new SDVariable[] {keys, handle, index}, table, dim, training, count);
  }

  /** The keys and rows of a read, planned ahead or made now. */
  private record Reads(DataBuffer keysBuffer, String[] keys, CompletableFuture<TableRows> rows) {}

  /**
   * The read of {@code keysArray}: with {@code withState} (a trainer's read made ahead) the rows
   * come with their optimizer state, for the replay of the previous step's updates.
   */
  private Reads read(TableReads reads, EmbeddingTable t, INDArray keysArray, boolean withState) {
    String[] k = keys(keysArray, OP_NAME);
    CompletableFuture<TableRows> rows = !training
        ? reads.find(t, k).thenApply(r -> new TableRows(r.rows(), r.found(), null, null))
        : withState ? reads.lookup(t, k, count)
        : reads.findOrInsert(t, k, count).thenApply(r -> new TableRows(r, null, null, null));
    return new Reads(keysArray.data(), k, rows);
  }

  @Override
  boolean plan(GraphTables graph, TableStep step, Map<String, INDArray> feeds, TableReads reads) {
    INDArray keys = fed(0, feeds);
    EmbeddingTable t = graph.table(table);
    if (keys == null || (training && !TableReads.returnsState(t))) {
      return false; // not fed, or a table that cannot return what the replay needs
    }
    step.putPlanned(getOwnName(), read(reads, t, keys, training && step.wantsState()));
    return true;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    INDArray keys = oc.getInputArray(0);
    TableStep step = graph.step();
    EmbeddingTable t = graph.table(table);
    Reads r = step.takePlanned(getOwnName(), Reads.class);
    boolean usePlanned = r != null && r.keysBuffer() == keys.data();
    graph.countPlanned(usePlanned);
    if (!usePlanned) { // not planned, or planned for other keys: read now, after every update
      step.awaitFreshReads();
      TableReads now = TableStep.reads();
      r = read(now, t, keys, false);
      now.submit();
    }
    TableRows read = TableReads.join(r.rows());
    float[] rows = read.rows();
    if (read.updateCounts() != null) { // read ahead: replay the previous step's own updates
      step.replayPrevious(t, r.keys(), read.found(), rows, read.slots(), read.updateCounts());
    }
    DataType type = oc.getInputArray(1).dataType();
    if (gathered(oc)) {
      INDArray index = oc.getInputArray(2);
      NdArrays.outputGathered(oc, 0, rows, index(index, r.keys().length, OP_NAME), dim, type,
          rowsShape(index));
    } else {
      NdArrays.output(oc, 0, rows, type, rowsShape(keys));
    }
  }

  /** Whether the forward op was given an index (keys, handle, index). */
  private static boolean gathered(OpContext oc) {
    return oc.getInputArrays().size() == 3;
  }

  /** The gathered form's index, row-major, each checked against the number of keys. */
  static int[] index(INDArray index, int keys, String op) {
    if (!index.dataType().isIntType() || index.rank() < 1 || index.rank() > 2) {
      throw new IllegalArgumentException(op + ": index must be an integer array of rank 1 or 2"
          + " but was " + index.dataType() + " " + Arrays.toString(index.shape()));
    }
    int[] idx = NdArrays.ints(index);
    for (int i = 0; i < idx.length; i++) {
      if (idx[i] < 0 || idx[i] >= keys) {
        throw new IllegalArgumentException(op + ": index " + i + " is " + idx[i] + " but there"
            + " are " + keys + " keys");
      }
    }
    return idx;
  }

  /** The keys of a UTF8 [n] or [b, s] array, row-major. */
  static String[] keys(INDArray keys, String op) {
    if (keys.dataType() != DataType.UTF8 || keys.rank() < 1 || keys.rank() > 2) {
      throw new IllegalArgumentException(op + ": keys must be UTF8 of rank 1 or 2 but were "
          + keys.dataType() + " " + Arrays.toString(keys.shape()));
    }
    String[] k = KeyArrays.remembered(keys);
    if (k != null) {
      return k;
    }
    k = new String[(int) keys.length()];
    INDArray flat = keys.rank() == 1 ? keys : keys.reshape(k.length);
    for (int i = 0; i < k.length; i++) {
      k[i] = flat.getString(i);
      if (k[i].indexOf('\uFFFD') >= 0) {
        throw new IllegalArgumentException(op + ": key " + i + " ('" + k[i] + "') is not valid"
            + " UTF-8. Make key arrays with KeyArrays.of: ND4J 1.0.0-M2.1's"
            + " Nd4j.create(List<String>) stores each char as one byte and corrupts every"
            + " non-ASCII key");
      }
    }
    return k;
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    INDArray shaped = gathered(oc) ? oc.getInputArray(2) : oc.getInputArray(0);
    return List.of(LongShapeDescriptor.fromShape(rowsShape(shaped),
        oc.getInputArray(1).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(1));
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    boolean gathered = args().length == 3;
    SDVariable handleGrad = training
        ? new DynamicEmbeddingLookupBp(sameDiff, arg(0), arg(1), grads.get(0),
            gathered ? arg(2) : null, table, dim, outputVariable().name()).outputVariable()
        : sameDiff.zerosLike(arg(1)); // inference: nothing goes to the table
    // Keys (UTF8) and the index have no gradient, but SameDiff names one variable per input.
    // These are never executed: no requested gradient depends on a placeholder's gradient.
    SDVariable keysGrad = sameDiff.zerosLike(arg(1));
    return gathered ? Arrays.asList(keysGrad, handleGrad, sameDiff.zerosLike(arg(1)))
        : Arrays.asList(keysGrad, handleGrad);
  }
}
