package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableReads;
import dev.dynembed.table.common.KeyBags;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * {@code bag(keys UTF8 [b, s], weights [b, s], handle []) -> [b, dim]} in the handle's type: one
 * vector per example, its keys' rows combined ({@link Combiner}) <em>on the shards that own
 * them</em> (docs/design/0011-pooled-lookups.md). Example i's bag holds its keys of non-zero
 * weight; each shard answers one partial vector per example instead of a row per key, and the
 * backward sends one gradient row per example, which the shards spread over the keys before their
 * optimizer step. The same function as {@code embeddingBag} pooling on the client (lookup, mask,
 * sum, divide), with fewer bytes on the wire when examples share few keys per shard.
 *
 * <p>Training mode creates missing rows (counting each key once per use) and its backward sends
 * the gradients; inference mode reads existing rows only (unknown keys pool as zeros). The
 * weights get no gradient (they are data). A pooled read cannot be made ahead of its step (the
 * step's own updates could not be replayed on a pooled vector): it is read when the op runs,
 * after the previous step's gradients are applied.
 */
@JavaOp.Name(DynamicEmbeddingBag.OP_NAME)
public final class DynamicEmbeddingBag extends RowReadOp {
  static final String OP_NAME = "dynembed_bag";

  private Combiner combiner = Combiner.SUM;

  public DynamicEmbeddingBag() {}

  DynamicEmbeddingBag(SameDiff sd, SDVariable keys, SDVariable weights, SDVariable handle,
      String table, int dim, Combiner combiner, boolean training, boolean count) {
    super(sd, new SDVariable[] {keys, weights, handle}, table, dim, training, count);
    this.combiner = combiner;
  }

  /**
   * The distinct keys of a batch of bags (keys of weight 0 left out) and the bags over them.
   * The forward and the backward build the same bags from the same arrays.
   */
  record Bags(String[] keys, KeyBags bags) {
    static Bags of(INDArray keysArray, INDArray weightsArray, Combiner combiner, String op) {
      String[] k = DynamicEmbeddingLookup.keys(keysArray, op);
      if (keysArray.rank() != 2 || !Arrays.equals(keysArray.shape(), weightsArray.shape())) {
        throw new IllegalArgumentException(op + ": keys must be [b, s] and weights of the same"
            + " shape, but were " + Arrays.toString(keysArray.shape()) + " and "
            + Arrays.toString(weightsArray.shape()));
      }
      int b = (int) keysArray.size(0);
      int s = (int) keysArray.size(1);
      double[] w = NdArrays.doubles(weightsArray);
      StringIndex distinct = new StringIndex(Math.max(1, k.length / 2));
      int[] sizes = new int[b];
      int entries = 0;
      boolean unit = true;
      for (int i = 0; i < w.length; i++) {
        if (!Double.isFinite(w[i])) {
          throw new IllegalArgumentException(op + ": weight of example " + i / s + " position "
              + i % s + " is " + w[i]);
        }
        if (w[i] != 0) {
          entries++;
          unit &= w[i] == 1;
        }
      }
      int[] index = new int[entries];
      float[] weights = unit ? null : new float[entries];
      float[] scales = combiner == Combiner.SUM ? null : new float[b];
      int e = 0;
      for (int ex = 0; ex < b; ex++) {
        double sum = 0;
        double squares = 0;
        for (int j = 0; j < s; j++) {
          double wi = w[ex * s + j];
          if (wi == 0) {
            continue;
          }
          index[e] = distinct.add(k[ex * s + j]);
          if (weights != null) {
            weights[e] = (float) wi;
          }
          e++;
          sizes[ex]++;
          sum += wi;
          squares += wi * wi;
        }
        if (scales != null && sizes[ex] > 0) {
          double norm = combiner == Combiner.MEAN ? sum : Math.sqrt(squares);
          if (!(norm > 0)) {
            throw new IllegalArgumentException(op + ": example " + ex + " has weights summing"
                + " to " + sum + "; a " + combiner + " bag needs a positive sum (weights >= 0)");
          }
          scales[ex] = (float) (1 / norm);
        }
      }
      String[] keys = distinct.keys();
      return new Bags(keys, keys.length == 0 ? null
          : KeyBags.of(sizes, index, weights, scales, keys.length));
    }
  }

  @Override
  boolean plan(GraphTables graph, TableStep step, Map<String, INDArray> feeds, TableReads reads) {
    return false; // see the class comment: read when the op runs
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    INDArray keys = oc.getInputArray(0);
    Bags bags = Bags.of(keys, oc.getInputArray(1), combiner, OP_NAME);
    DataType type = oc.getInputArray(2).dataType();
    long[] shape = {keys.size(0), dim};
    graph.countPlanned(false);
    if (bags.bags() == null) { // no key in the whole batch
      NdArrays.output(oc, 0, new float[(int) keys.size(0) * dim], type, shape);
      return;
    }
    TableStep step = graph.step();
    step.awaitFreshReads();
    EmbeddingTable t = graph.table(table);
    TableReads now = TableStep.reads();
    var pooled = now.pooled(t, bags.keys(), bags.bags(), training, training && count);
    now.submit();
    NdArrays.output(oc, 0, TableReads.join(pooled), type, shape);
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    return List.of(LongShapeDescriptor.fromShape(new long[] {oc.getInputArray(0).size(0), dim},
        oc.getInputArray(2).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(2));
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    SDVariable handleGrad = training
        ? new DynamicEmbeddingBagBp(sameDiff, arg(0), arg(1), arg(2), grads.get(0), table, dim,
            combiner).outputVariable()
        : sameDiff.zerosLike(arg(2));
    // keys and weights get no gradient; never executed (see DynamicEmbeddingLookup#doDiff)
    return Arrays.asList(sameDiff.zerosLike(arg(2)), sameDiff.zerosLike(arg(1)), handleGrad);
  }

  @Override
  void properties(Map<String, Object> out) {
    super.properties(out);
    out.put("combiner", combiner.name());
  }

  @Override
  void readProperties(Props in) {
    super.readProperties(in);
    combiner = Combiner.valueOf(in.string("combiner"));
  }
}
