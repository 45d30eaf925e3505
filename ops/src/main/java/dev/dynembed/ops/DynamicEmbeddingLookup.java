package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

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
public final class DynamicEmbeddingLookup extends DynamicCustomOp implements JavaOp {
  static final String OP_NAME = "dynembed_lookup";

  private String table;
  private int dim;
  private boolean training;
  private boolean count = true;

  public DynamicEmbeddingLookup() {}

  DynamicEmbeddingLookup(SameDiff sd, SDVariable keys, SDVariable handle, SDVariable index,
      String table, int dim, boolean training, boolean count) {
    super(null, sd, index == null ? new SDVariable[] {keys, handle}
        : new SDVariable[] {keys, handle, index}, false);
    this.count = count;
    this.table = table;
    this.dim = dim;
    this.training = training;
  }

  @Override
  public String opName() {
    return OP_NAME;
  }

  @Override
  public void exec(OpContext oc) {
    INDArray keys = oc.getInputArray(0);
    String[] k = keys(keys, OP_NAME);
    EmbeddingTable t = Tables.get(table);
    float[] rows = training ? t.findOrInsert(k, count) : t.find(k).rows();
    INDArray index = gathered(oc) ? oc.getInputArray(2) : null;
    if (index != null) {
      int[] idx = index(index, k.length, OP_NAME);
      float[] gathered = new float[idx.length * dim];
      for (int i = 0; i < idx.length; i++) {
        System.arraycopy(rows, idx[i] * dim, gathered, i * dim, dim);
      }
      rows = gathered;
    }
    NdArrays.output(oc, 0, rows, oc.getInputArray(1).dataType(),
        outputShape(index != null ? index : keys));
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

  private long[] outputShape(INDArray keys) {
    long[] shape = Arrays.copyOf(keys.shape(), keys.rank() + 1);
    shape[keys.rank()] = dim;
    return shape;
  }

  @Override
  public List<LongShapeDescriptor> calculateOutputShape(OpContext oc) {
    INDArray shaped = gathered(oc) ? oc.getInputArray(2) : oc.getInputArray(0);
    return List.of(LongShapeDescriptor.fromShape(outputShape(shaped),
        oc.getInputArray(1).dataType()));
  }

  @Override
  public List<DataType> calculateOutputDataTypes(List<DataType> inputs) {
    return List.of(inputs.get(1));
  }

  @Override
  public int getNumOutputs() {
    return 1;
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    boolean gathered = args().length == 3;
    SDVariable handleGrad = training
        ? new DynamicEmbeddingLookupBp(sameDiff, arg(0), arg(1), grads.get(0),
            gathered ? arg(2) : null, table, dim).outputVariable()
        : sameDiff.zerosLike(arg(1)); // inference: nothing goes to the table
    // Keys (UTF8) and the index have no gradient, but SameDiff names one variable per input.
    // These are never executed: no requested gradient depends on a placeholder's gradient.
    SDVariable keysGrad = sameDiff.zerosLike(arg(1));
    return gathered ? Arrays.asList(keysGrad, handleGrad, sameDiff.zerosLike(arg(1)))
        : Arrays.asList(keysGrad, handleGrad);
  }

  @Override
  public Map<String, Object> propertiesForFunction() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("table", table);
    m.put("dim", (long) dim);
    m.put("training", training);
    m.put("count", count);
    return m;
  }

  @Override
  public void setPropertiesForFunction(Map<String, Object> properties) {
    table = (String) properties.get("table");
    dim = ((Number) properties.get("dim")).intValue();
    training = (Boolean) properties.get("training");
    count = !Boolean.FALSE.equals(properties.get("count"));
  }
}
