package dev.dynembed.ops;

import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.v1.Metric;
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
 * {@code topK(query FLOAT [b, w]) -> keys UTF8 [b, k], scores FLOAT [b, k]}: the k keys of the
 * whole table (every shard) with the highest score per query, best first. {@code w = dim}, or
 * {@code dim - 1} with the "[c, 1]" bias option (rows' last column is a bias). Inference only (no
 * gradient). When the table holds fewer than k keys the tail is padded with key "" and score
 * -Infinity. It has no gradient.
 */
@JavaOp.Name(TopK.OP_NAME)
public final class TopK extends JavaOp {
  static final String OP_NAME = "dynembed_top_k";

  private String table;
  private int k;
  private boolean biasLastDim;
  private boolean cosine;
  private int searchBreadth; // 0: exact; > 0: the table's approximate index (design 0016)

  public TopK() {}

  TopK(SameDiff sd, SDVariable query, String table, int k, boolean biasLastDim, boolean cosine,
      int searchBreadth) {
    super(sd, query);
    this.table = table;
    this.k = k;
    this.biasLastDim = biasLastDim;
    this.cosine = cosine;
    this.searchBreadth = searchBreadth;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    INDArray q = oc.getInputArray(0);
    if (q.rank() != 2) {
      throw new IllegalArgumentException(OP_NAME + ": query must be [b, w] but was "
          + Arrays.toString(q.shape()));
    }
    int b = (int) q.size(0);
    float[] queries = q.castTo(DataType.FLOAT).dup('c').data().asFloat();
    TopKResult r = graph.table(table).topK(queries, b, k,
        new TopKOptions(biasLastDim, cosine ? Metric.COSINE : Metric.DOT, List.of(),
            searchBreadth));
    List<String> keys = new ArrayList<>(b * k);
    float[] scores = new float[b * k];
    for (int i = 0; i < b; i++) {
      for (int j = 0; j < k; j++) {
        boolean has = j < r.keys()[i].length;
        keys.add(has ? r.keys()[i][j] : "");
        scores[i * k + j] = has ? r.scores()[i][j] : Float.NEGATIVE_INFINITY;
      }
    }
    oc.setOutputArray(0, KeyArrays.of(keys, b, k)); // UTF-8 intact (see KeyArrays)
    oc.setOutputArray(1, Nd4j.create(scores, new long[] {b, k}, 'c'));
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    long b = oc.getInputArray(0).size(0);
    return List.of(LongShapeDescriptor.fromShape(new long[] {b, k}, DataType.UTF8),
        LongShapeDescriptor.fromShape(new long[] {b, k}, DataType.FLOAT));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(DataType.UTF8, DataType.FLOAT);
  }

  @Override
  public int getNumOutputs() {
    return 2;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("k", (long) k);
    out.put("biasLastDim", biasLastDim);
    out.put("cosine", cosine);
    out.put("searchBreadth", (long) searchBreadth);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    k = in.integer("k");
    biasLastDim = in.bool("biasLastDim");
    cosine = in.bool("cosine");
    searchBreadth = in.integerOr("searchBreadth", 0); // graphs saved before issue 32: exact
  }
}
