package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;
import dev.dynembed.table.v1.SamplerKind;

/** The namespace that creates the ops, in the style of SameDiff's {@code SDNN}. */
public final class DynEmbed {
  private final SameDiff sd;

  public DynEmbed(SameDiff sd) {
    JavaOps.install();
    // a graph that already ran before the ops were installed holds sessions of the default
    // factory, which cannot run Java ops: drop them, they are recreated through the bound factory
    sd.getSessions().values().removeIf(s -> !(s instanceof JavaOpSession));
    this.sd = sd;
  }

  /** The trainable scalar whose gradient path carries a table's backward pass. */
  public static String handleName(EmbeddingTable table) {
    return "dynembed_handle_" + table.name();
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
    Tables.register(table);
    String handleName = handleName(table);
    SDVariable handle = sd.hasVariable(handleName) ? sd.getVariable(handleName)
        : sd.var(handleName, Nd4j.zeros(dataType));
    if (index != null && !index.dataType().isIntType()) {
      throw new IllegalArgumentException("dynamicEmbeddingLookup: index must be an integer type"
          + " but '" + index.name() + "' is " + index.dataType());
    }
    SDVariable out = new DynamicEmbeddingLookup(sd, keys, handle, index, table.name(),
        table.dim(), training, count).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }

  /**
   * Logits of each example's positives and of keys sampled from the output table (see {@link
   * SampledLogits}).
   *
   * @param activations FLOAT or DOUBLE [b, dim of {@code table}]
   * @param positives UTF8 [b, P], padded
   * @param mask [b, P], same type as activations: 1 for a real positive, 0 for padding
   * @return {logits [b, P + S], labels [b, P + S]}
   */
  public SDVariable[] sampledLogits(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, int numSampled, SamplerKind sampler, float alpha,
      boolean removeAccidentalHits, boolean subtractLogQ, long seed) {
    return sampledLogits(name, activations, positives, mask, table, new Sampling(numSampled,
        sampler, alpha, removeAccidentalHits, subtractLogQ, seed, false, true));
  }

  /**
   * How {@link #sampledLogits(String, SDVariable, SDVariable, SDVariable, EmbeddingTable,
   * Sampling)} draws its candidates.
   *
   * @param numSampled S candidates per example
   * @param alpha unigram exponent (0 = 0.75)
   * @param perExample draw S keys for every example (b * S draws) instead of S shared ones
   * @param countPositives count each positive occurrence toward its frequency
   * @param pool with {@code perExample}, 0 for b * S independent draws; P &gt; 0 draws only
   *     min(P, b * S) keys per step and gives each example S picks among them, uniformly and
   *     with replacement. Each candidate is still distributed as the sampler's q (a uniform pick
   *     of an i.i.d. draw is a draw), but examples share keys: fewer distinct rows to read and
   *     update per step (word2vec on 2 shards: see docs/benchmarks.md)
   */
  public record Sampling(int numSampled, SamplerKind sampler, float alpha,
      boolean removeAccidentalHits, boolean subtractLogQ, long seed, boolean perExample,
      boolean countPositives, int pool) {
    public Sampling {
      if (pool < 0) {
        throw new IllegalArgumentException("sampledLogits: pool must be >= 0 but was " + pool);
      }
    }

    /** Independent draws for every example (no pool). */
    public Sampling(int numSampled, SamplerKind sampler, float alpha,
        boolean removeAccidentalHits, boolean subtractLogQ, long seed, boolean perExample,
        boolean countPositives) {
      this(numSampled, sampler, alpha, removeAccidentalHits, subtractLogQ, seed, perExample,
          countPositives, 0);
    }
  }

  /** As above, with every sampling option (see {@link Sampling}). */
  public SDVariable[] sampledLogits(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, Sampling sampling) {
    int numSampled = sampling.numSampled();
    if (positives.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("sampledLogits: positives must be UTF8 but '"
          + positives.name() + "' is " + positives.dataType());
    }
    if (numSampled < 0) {
      throw new IllegalArgumentException("sampledLogits: numSampled must be >= 0 but was "
          + numSampled);
    }
    Tables.register(table);
    String handleName = handleName(table);
    SDVariable handle = sd.hasVariable(handleName) ? sd.getVariable(handleName)
        : sd.var(handleName, Nd4j.zeros(activations.dataType()));
    SDVariable[] out = new SampledLogits(sd, activations, positives, mask, handle, table.name(),
        table.dim(), numSampled, sampling.sampler(), sampling.alpha(),
        sampling.removeAccidentalHits(), sampling.subtractLogQ(), sampling.seed(),
        sampling.perExample(), sampling.countPositives(), sampling.pool()).outputVariables();
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
    if (k < 1) {
      throw new IllegalArgumentException("topK: k must be >= 1 but was " + k);
    }
    Tables.register(table);
    SDVariable[] out = new TopK(sd, query, table.name(), k, biasLastDim, cosine).outputVariables();
    return new SDVariable[] {sd.updateVariableNameAndReference(out[0], name + "_keys"),
        sd.updateVariableNameAndReference(out[1], name + "_scores")};
  }
}
