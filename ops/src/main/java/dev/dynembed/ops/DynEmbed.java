package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The namespace that creates the table ops of one graph, in the style of SameDiff's {@code SDNN}:
 * validate the inputs, bind the table to the graph ({@link GraphTables}), build the op, name its
 * outputs.
 */
public final class DynEmbed {
  private final SameDiff sd;
  private final GraphTables tables;

  public DynEmbed(SameDiff sd) {
    JavaOps.install();
    // a graph that already ran before the ops were installed holds sessions of the default
    // factory, which cannot run Java ops: drop them, they are recreated through the bound factory
    sd.getSessions().values().removeIf(s -> !(s instanceof JavaOpSession));
    this.sd = sd;
    this.tables = GraphTables.of(sd);
  }

  /** The table state of this graph (bindings, steps). */
  public GraphTables tables() {
    return tables;
  }

  /**
   * The name of the trainable scalar whose gradient path carries {@code table}'s backward pass
   * in {@code sd}: request its gradient to make the graph's backward send the table's gradients.
   */
  public static String handleName(SameDiff sd, EmbeddingTable table) {
    return GraphTables.of(sd).handleName(table);
  }

  /** The table's handle variable, created with its first op in this graph. */
  private SDVariable handle(EmbeddingTable table, DataType type) {
    String id = tables.bind(table);
    String name = GraphTables.HANDLE_PREFIX + id;
    return sd.hasVariable(name) ? sd.getVariable(name) : sd.var(name, Nd4j.zeros(type));
  }

  /**
   * Rows of string keys from a table, FLOAT.
   *
   * @param keys UTF8 [n] or [b, s]; make the fed arrays with {@link KeyArrays#of} (ND4J M2.1's
   *     own string arrays corrupt non-ASCII keys)
   * @param training true: missing keys get rows, the backward pass sends gradients to the table;
   *     false: unknown keys read as zero rows and nothing is created or sent
   * @return FLOAT [n, dim] or [b, s, dim]
   */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training) {
    return dynamicEmbeddingLookup(name, keys, table, training, DataType.FLOAT);
  }

  /** As above, with the output in {@code dataType} (FLOAT or DOUBLE; DOUBLE for gradient checks). */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training, DataType dataType) {
    return dynamicEmbeddingLookup(name, keys, table, training, dataType, true);
  }

  /**
   * As above; with {@code count = false} a training lookup counts nothing toward the keys'
   * frequencies (for keys already counted through {@link EmbeddingTable#count}). With admission
   * (min_count &gt; 1) keys not yet admitted read as zero rows and get no gradient.
   */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training, DataType dataType, boolean count) {
    return dynamicEmbeddingLookup(name, keys, null, table, training, dataType, count);
  }

  /**
   * The gathered lookup: {@code keys} UTF8 [u] (normally distinct), {@code index} INT [n] or [b,
   * s] with values in [0, u); the output [n, dim] or [b, s, dim] holds row {@code index[i]} at i.
   * The table reads each key once and, in training, gets one gradient row per key, summed over
   * its uses (word2vec: a center word's 2 * window pairs). {@code index == null} is the plain
   * lookup.
   */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, SDVariable index,
      EmbeddingTable table, boolean training, DataType dataType, boolean count) {
    if (keys.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("dynamicEmbeddingLookup: keys must be UTF8 but '"
          + keys.name() + "' is " + keys.dataType());
    }
    if (dataType != DataType.FLOAT && dataType != DataType.DOUBLE) {
      throw new IllegalArgumentException(
          "dynamicEmbeddingLookup: dataType must be FLOAT or DOUBLE but was " + dataType);
    }
    if (index != null && !index.dataType().isIntType()) {
      throw new IllegalArgumentException("dynamicEmbeddingLookup: index must be an integer type"
          + " but '" + index.name() + "' is " + index.dataType());
    }
    SDVariable handle = handle(table, dataType);
    SDVariable out = new DynamicEmbeddingLookup(sd, keys, handle, index, tables.bind(table),
        table.dim(), training, count).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }

  /**
   * A {@link DynamicCell} over the rows of {@code keys} ({@link CellOp}): its forward's output,
   * in {@code dataType}. The cell is registered ({@link Cells#register}) if it was not.
   *
   * @param keys UTF8 [n] or [b, s] (make the fed arrays with {@link KeyArrays#of})
   * @param training true: missing keys get rows and the backward sends the cell's feedback to
   *     the table, whose rule applies it; false: unknown keys read as zero rows and nothing is
   *     created or sent (the inputs still get their gradients)
   * @param dataType FLOAT or DOUBLE: the rows' type as the cell sees them, and the output's
   * @param inputs the cell's other inputs, in the order its forward takes them
   */
  public SDVariable cell(String name, DynamicCell cell, SDVariable keys, EmbeddingTable table,
      boolean training, DataType dataType, SDVariable... inputs) {
    if (keys.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("cell '" + cell.name() + "': keys must be UTF8 but '"
          + keys.name() + "' is " + keys.dataType());
    }
    if (dataType != DataType.FLOAT && dataType != DataType.DOUBLE) {
      throw new IllegalArgumentException("cell '" + cell.name() + "': dataType must be FLOAT or"
          + " DOUBLE but was " + dataType);
    }
    DynamicCell registered = Cells.register(cell);
    SDVariable[] args = new SDVariable[inputs.length + 2];
    args[0] = keys;
    args[1] = handle(table, dataType);
    System.arraycopy(inputs, 0, args, 2, inputs.length);
    SDVariable out = new CellOp(sd, args, registered.name(), tables.bind(table), table.dim(),
        training, true).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }

  /** As above, FLOAT. */
  public SDVariable cell(String name, DynamicCell cell, SDVariable keys, EmbeddingTable table,
      boolean training, SDVariable... inputs) {
    return cell(name, cell, keys, table, training, DataType.FLOAT, inputs);
  }

  /**
   * Pooled embedding bag: one vector per example, its keys' rows combined by the shards that own
   * them ({@link DynamicEmbeddingBag}; docs/design/0011-pooled-lookups.md). The same function as
   * a lookup followed by a masked sum or mean on the client, with bags x dim values per shard on
   * the wire instead of a row per distinct key.
   *
   * @param keys UTF8 [b, s], padded with any key of weight 0
   * @param weights FLOAT or DOUBLE [b, s]: 1 for a real key, 0 for padding (or any finite weight;
   *     MEAN and SQRTN need a positive sum per example that has keys)
   * @param training true: missing keys get rows and the backward sends gradients (one row per
   *     example) to the table; false: unknown keys pool as zeros, nothing is created or sent
   * @return [b, dim] in {@code dataType} (FLOAT, or DOUBLE for gradient checks)
   */
  public SDVariable dynamicEmbeddingBag(String name, SDVariable keys, SDVariable weights,
      EmbeddingTable table, Combiner combiner, boolean training, DataType dataType) {
    if (keys.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("dynamicEmbeddingBag: keys must be UTF8 but '"
          + keys.name() + "' is " + keys.dataType());
    }
    if (!weights.dataType().isFPType()) {
      throw new IllegalArgumentException("dynamicEmbeddingBag: weights must be floating point"
          + " but '" + weights.name() + "' is " + weights.dataType());
    }
    if (dataType != DataType.FLOAT && dataType != DataType.DOUBLE) {
      throw new IllegalArgumentException(
          "dynamicEmbeddingBag: dataType must be FLOAT or DOUBLE but was " + dataType);
    }
    SDVariable handle = handle(table, dataType);
    SDVariable out = new DynamicEmbeddingBag(sd, keys, weights, handle, tables.bind(table),
        table.dim(), combiner, training, true).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }

  /** As above, FLOAT. */
  public SDVariable dynamicEmbeddingBag(String name, SDVariable keys, SDVariable weights,
      EmbeddingTable table, Combiner combiner, boolean training) {
    return dynamicEmbeddingBag(name, keys, weights, table, combiner, training, DataType.FLOAT);
  }

  /**
   * Logits of each example's positives and of keys sampled from the output table (see {@link
   * SampledLogits}), drawn as {@code sampling} says.
   *
   * @param activations FLOAT or DOUBLE [b, dim of {@code table}]
   * @param positives UTF8 [b, P], padded
   * @param mask [b, P], same type as activations: 1 for a real positive, 0 for padding
   * @return {logits [b, P + S], labels [b, P + S]}
   */
  public SDVariable[] sampledLogits(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, Sampling sampling) {
    if (positives.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("sampledLogits: positives must be UTF8 but '"
          + positives.name() + "' is " + positives.dataType());
    }
    SDVariable handle = handle(table, activations.dataType());
    SDVariable[] out = new SampledLogits(sd, activations, positives, mask, handle,
        tables.bind(table), table.dim(), sampling).outputVariables();
    return new SDVariable[] {sd.updateVariableNameAndReference(out[0], name + "_logits"),
        sd.updateVariableNameAndReference(out[1], name + "_labels")};
  }

  /**
   * Sigmoid cross-entropy of each row, summed over its columns, in one Java op (see {@link
   * SigmoidCrossEntropy}: far fewer op executions per step than the same formula in elementwise
   * ops).
   *
   * @param logits [b, c]; a logit of {@link SampledLogits#MASKED} contributes nothing
   * @param labels [b, c], same type
   * @return [b]
   */
  public SDVariable sigmoidCrossEntropy(String name, SDVariable logits, SDVariable labels) {
    return sd.updateVariableNameAndReference(
        new SigmoidCrossEntropy(sd, logits, labels).outputVariable(), name);
  }

  /**
   * The k keys of the whole table with the highest score per query (inference only).
   *
   * @param query FLOAT [b, dim], or [b, dim - 1] with {@code biasLastDim} (scored as [q, 1] . row)
   * @param cosine score by cosine similarity instead of the dot product
   * @return {keys UTF8 [b, k], scores FLOAT [b, k]}, best first; padded with "" and -Infinity when
   *     the table holds fewer than k keys
   */
  public SDVariable[] topK(String name, SDVariable query, EmbeddingTable table, int k,
      boolean biasLastDim, boolean cosine) {
    return topK(name, query, table, k, biasLastDim, cosine, 0);
  }

  /**
   * As {@link #topK(String, SDVariable, EmbeddingTable, int, boolean, boolean)}, answered from
   * the table's approximate index with {@code searchBreadth} &gt; 0 where it has one for this
   * metric and bias option ({@link EmbeddingTable#buildIndex}; exact otherwise).
   */
  public SDVariable[] topK(String name, SDVariable query, EmbeddingTable table, int k,
      boolean biasLastDim, boolean cosine, int searchBreadth) {
    if (k < 1) {
      throw new IllegalArgumentException("topK: k must be >= 1 but was " + k);
    }
    if (searchBreadth < 0) {
      throw new IllegalArgumentException("topK: searchBreadth must be >= 0 (0: exact) but was "
          + searchBreadth);
    }
    SDVariable[] out = new TopK(sd, query, tables.bind(table), k, biasLastDim, cosine,
        searchBreadth).outputVariables();
    return new SDVariable[] {sd.updateVariableNameAndReference(out[0], name + "_keys"),
        sd.updateVariableNameAndReference(out[1], name + "_scores")};
  }
}
