package dev.dynembed.layers;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.v1.SamplerKind;
import org.nd4j.autodiff.loss.LossReduce;
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

  public DynEmbed ops() {
    return ops;
  }

  /**
   * Embedding bag: one vector per example from a variable number of keys.
   *
   * @param keys UTF8 [b, s], padded
   * @param mask FLOAT [b, s]: 1 for a real key, 0 for padding
   * @return FLOAT [b, dim]
   */
  public SDVariable embeddingBag(String name, SDVariable keys, SDVariable mask,
      EmbeddingTable table, Combiner combiner, boolean training) {
    SDVariable rows = ops.dynamicEmbeddingLookup(name + "_rows", keys, table, training);
    SDVariable summed = rows.mul(sd.expandDims(mask, 2)).sum(1); // [b, dim]
    if (combiner == Combiner.SUM) {
      return sd.updateVariableNameAndReference(summed, name);
    }
    SDVariable count = sd.math().max(mask.sum(true, 1), sd.constant(1f)); // [b, 1]
    return sd.updateVariableNameAndReference(summed.div(count), name);
  }

  /**
   * Sampled softmax loss (Jean et al. 2015): softmax over each example's positives and S sampled
   * keys of the output table, with accidental hits removed and the logQ correction; several
   * positives per example share the label mass equally. Mean over the batch.
   *
   * @param activations FLOAT [b, dim of table]
   * @param positives UTF8 [b, P], padded; {@code mask} FLOAT [b, P]
   */
  public SDVariable sampledSoftmaxLoss(String name, SDVariable activations, SDVariable positives,
      SDVariable mask, EmbeddingTable table, int numSampled, SamplerKind sampler, float alpha,
      long seed) {
    SDVariable[] out = ops.sampledLogits(name, activations, positives, mask, table, numSampled,
        sampler, alpha, true, true, seed);
    SDVariable labels = out[1].div(sd.math().max(out[1].sum(true, 1), sd.constant(1f)));
    return sd.loss().softmaxCrossEntropy(name, labels, out[0], null, LossReduce.MEAN_BY_WEIGHT,
        0.0);
  }

  /**
   * Negative-sampling loss (word2vec): {@code -log sigma(a . w_pos) - sum_neg log sigma(-a .
   * w_neg)} per example, summed over its positives and S sampled negatives, mean over the batch.
   * No logQ correction (as in word2vec); accidental hits removed.
   */
  public SDVariable negativeSamplingLoss(String name, SDVariable activations,
      SDVariable positives, SDVariable mask, EmbeddingTable table, int numSampled,
      SamplerKind sampler, float alpha, long seed) {
    SDVariable[] out = ops.sampledLogits(name, activations, positives, mask, table, numSampled,
        sampler, alpha, true, false, seed);
    SDVariable perExample = sd.loss().sigmoidCrossEntropy(name + "_sum", out[1], out[0], null,
        LossReduce.SUM, 0.0);
    SDVariable batch = sd.sizeAt(activations, 0).castTo(perExample.dataType());
    return sd.updateVariableNameAndReference(perExample.div(batch), name);
  }
}
