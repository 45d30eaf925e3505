package dev.dynembed.layers;

import dev.dynembed.ops.Combiner;
import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.Sampling;
import dev.dynembed.table.client.EmbeddingTable;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;

/** Building blocks over the table ops. Every method validates its inputs when the graph is built. */
public final class Layers {
  private final SameDiff sd;
  private final DynEmbed ops;

  public Layers(SameDiff sd) {
    this.sd = sd;
    this.ops = new DynEmbed(sd);
  }

  /**
   * {@code log(sum(exp(x), 1))} of [b, c] as [b], stable (max subtracted). Written out because the
   * backward of M2.1's logSumExp op fails ("reduce_sum_bp ... bad input shape").
   */
  private SDVariable logSumExp(SDVariable x) {
    SDVariable m = x.max(true, 1); // [b, 1]
    return sd.math().log(sd.math().exp(x.sub(m)).sum(1)).add(m.reshape(-1));
  }

  /** The scalar 1 in the type of {@code like} (ND4J ops need matching float types). */
  private SDVariable one(SDVariable like) {
    return sd.constant(org.nd4j.linalg.factory.Nd4j.scalar(like.dataType(), 1.0));
  }

  public DynEmbed ops() {
    return ops;
  }

  /**
   * Embedding bag: one vector per example from a variable number of keys, pooled here from the
   * rows a lookup brings ({@link #embeddingBagOnShards} pools on the shards instead).
   *
   * @param keys UTF8 [b, s], padded with any non-empty key (its mask 0: it gets no gradient)
   * @param mask FLOAT [b, s]: 1 for a real key, 0 for padding (or any weight &gt;= 0)
   * @return FLOAT [b, dim]
   */
  public SDVariable embeddingBag(String name, SDVariable keys, SDVariable mask,
      EmbeddingTable table, Combiner combiner, boolean training) {
    SDVariable rows = ops.dynamicEmbeddingLookup(name + "_rows", keys, table, training);
    SDVariable summed = rows.mul(sd.expandDims(mask, 2)).sum(1); // [b, dim]
    if (combiner == Combiner.SUM) {
      return sd.updateVariableNameAndReference(summed, name);
    }
    // an example without keys has summed = 0: any positive divisor keeps it at zero
    SDVariable norm = combiner == Combiner.MEAN ? mask.sum(true, 1)
        : sd.math().sqrt(mask.mul(mask).sum(true, 1));
    SDVariable tiny = sd.constant(org.nd4j.linalg.factory.Nd4j.scalar(mask.dataType(),
        Float.MIN_NORMAL));
    return sd.updateVariableNameAndReference(summed.div(sd.math().max(norm, tiny)), name);
  }

  /**
   * Embedding bag pooled on the shards that own the rows ({@link DynEmbed#dynamicEmbeddingBag}):
   * the same function as {@link #embeddingBag}, with one vector per example and shard on the
   * wire instead of one row per distinct key, each way. Its reads are not made ahead of a step.
   *
   * @param keys UTF8 [b, s], padded with any key of mask 0
   * @param mask FLOAT [b, s]: 1 for a real key, 0 for padding (or any weight &gt;= 0)
   * @return FLOAT [b, dim]
   */
  public SDVariable embeddingBagOnShards(String name, SDVariable keys, SDVariable mask,
      EmbeddingTable table, Combiner combiner, boolean training) {
    return ops.dynamicEmbeddingBag(name, keys, mask, table, combiner, training);
  }

  /**
   * Sampled softmax loss (Jean et al. 2015): softmax over each example's positives and S sampled
   * keys of the output table, with accidental hits removed and the logQ correction; several
   * positives per example share the label mass equally. Mean over the batch. Candidates are drawn
   * by the unigram^0.75 sampler with {@code seed} ({@link Sampling}'s defaults).
   *
   * @param activations FLOAT [b, dim of table]
   * @param positives UTF8 [b, P], padded; {@code mask} FLOAT [b, P]
   */
  public SDVariable sampledSoftmaxLoss(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, int numSampled, long seed) {
    return sampledSoftmaxLoss(name, activations, positives, mask, table,
        Sampling.builder(numSampled).logQCorrection(true).seed(seed).build());
  }

  /**
   * As above, with every sampling option; {@code sampling} should keep the logQ correction on
   * ({@link Sampling.Builder#logQCorrection}), which makes the sampled softmax an unbiased
   * estimate of the full one.
   */
  public SDVariable sampledSoftmaxLoss(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, Sampling sampling) {
    SDVariable[] out = ops.sampledLogits(name, activations, positives, mask, table, sampling);
    // softmax cross-entropy per example with the label mass shared by its positives:
    // logsumexp(x) - sum(y x) / max(sum(y), 1), then the batch mean. Built from plain ops: the
    // backward of ND4J M2.1's loss ops ignores the gradient flowing into them, so any scaling after
    // them (a mean over the batch) would be lost (docs/design/0005). Sums without kept dimensions:
    // M2.1's reduce_sum backward fails on the keep-dims form here.
    SDVariable positivesPerExample = sd.math().max(out[1].sum(1), one(out[1])); // [b]
    SDVariable perExample = logSumExp(out[0])
        .sub(out[1].mul(out[0]).sum(1).div(positivesPerExample));
    return sd.updateVariableNameAndReference(perExample.mean(), name);
  }

  /**
   * Softmax cross-entropy over a dense set of classes, mean over the batch: {@code
   * logsumexp(logits) - sum(labels * logits)} per example. Built from plain ops (M2.1's loss ops
   * ignore the gradient flowing into them, and its logSumExp backward fails; see above).
   *
   * @param logits [b, c]
   * @param labels [b, c], one-hot (or any distribution), same type
   */
  public SDVariable softmaxLoss(String name, SDVariable logits, SDVariable labels) {
    SDVariable perExample = logSumExp(logits).sub(labels.mul(logits).sum(1));
    return sd.updateVariableNameAndReference(perExample.mean(), name);
  }

  /**
   * Negative-sampling loss (word2vec): {@code -log sigma(a . w_pos) - sum_neg log sigma(-a .
   * w_neg)} per example, summed over its positives and S negatives drawn by the unigram^0.75
   * sampler with {@code seed}, mean over the batch. No logQ correction (as in word2vec);
   * accidental hits removed.
   */
  public SDVariable negativeSamplingLoss(String name, SDVariable activations,
      SDVariable positives, SDVariable mask, EmbeddingTable table, int numSampled, long seed) {
    return negativeSamplingLoss(name, activations, positives, mask, table,
        Sampling.builder(numSampled).seed(seed).build(), false);
  }

  /**
   * Negative-sampling loss with every sampling option ({@link Sampling}: word2vec draws per
   * example from a pool); {@code sumOverBatch} sums instead of averaging, so the table's learning
   * rate is the per-example rate of word2vec's SGD.
   */
  public SDVariable negativeSamplingLoss(String name, SDVariable activations,
      SDVariable positives, SDVariable mask, EmbeddingTable table, Sampling sampling,
      boolean sumOverBatch) {
    SDVariable[] out = ops.sampledLogits(name, activations, positives, mask, table, sampling);
    // sigmoid cross-entropy summed over each example's candidates, in one Java op (the same
    // formula in elementwise ops cost ~25 op executions per step); then the batch sum or mean
    SDVariable perExample = ops.sigmoidCrossEntropy(name + "_xent", out[0], out[1]);
    return sd.updateVariableNameAndReference(sumOverBatch ? perExample.sum() : perExample.mean(),
        name);
  }
}
