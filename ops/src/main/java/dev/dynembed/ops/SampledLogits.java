package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.v1.SamplerKind;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * {@code sampledLogits(activations [b, d], positives UTF8 [b, P], mask [b, P], handle [])
 * -> logits [b, P + S], labels [b, P + S]} over an output table of dim d.
 *
 * <p>Candidates: each example's P positive slots (padded; {@code mask} 1 = real), then S keys
 * from the table's sampler, with replacement: drawn once per batch and shared by all examples,
 * or with {@code perExample} drawn for each example (b * S draws, word2vec's negatives).
 * {@code logits[b, j] = activations[b] . row(candidate j)}; labels are 1 for real positives and 0
 * otherwise (multi-label). Padded slots, and with {@code removeAccidentalHits} sampled keys that
 * equal one of the example's positives, get logit {@link #MASKED} and no gradient. With {@code
 * subtractLogQ} every logit is corrected by {@code -log(S q(key))} (sampled softmax), q the
 * sampler's probability per draw (floored at 1e-12 for keys the sampler cannot yet draw). The
 * draws are a function of the op's seed and the step and stream set in {@link StepContext}.
 *
 * <p>Positives are created in the output table if missing and, with {@code countPositives}, each
 * occurrence counts toward its frequency (the unigram sampler's counts). A caller that counts
 * keys itself ({@link dev.dynembed.table.client.EmbeddingTable#count}) turns that off; with
 * admission, a positive not yet admitted reads as a zero row and gets no gradient.
 *
 * <p>The backward op returns dL/d(activations) and sends the gradient of every candidate row to
 * the table, summed per distinct key (positives and sampled keys alike).
 */
public final class SampledLogits extends DynamicCustomOp implements JavaOp {
  static final String OP_NAME = "dynembed_sampled_logits";
  /** Logit of padded slots and removed accidental hits: exp() of it is 0 in float. */
  public static final double MASKED = -1e9;

  private static final AtomicLong CALLS = new AtomicLong();
  /** What the forward used, for its backward on the same thread. */
  private static final ThreadLocal<Map<String, Forward>> STASH =
      ThreadLocal.withInitial(HashMap::new);

  /**
   * @param uniq the distinct positive keys; {@code posRows} their rows [uniq, d]
   * @param posIdx [b * p]: which of them is positive slot i (-1 for padding)
   * @param sampled the distinct sampled keys; {@code sampRows} their rows [u, d]
   * @param sampIdx [b * s]: which of them is candidate k of example e (at e * s + k)
   */
  record Forward(Activations activations, String[] uniq, int[] posIdx, double[] mask,
      String[] sampled, float[] posRows, float[] sampRows, int[] sampIdx, boolean[] hit, int b,
      int p, int s, int d) {}

  private String table;
  private int dim;
  private int numSampled;
  private int sampler;
  private float alpha;
  private boolean removeAccidentalHits;
  private boolean subtractLogQ;
  private long seed;
  private boolean perExample;
  private boolean countPositives = true;
  private int pool;

  public SampledLogits() {}

  SampledLogits(SameDiff sd, SDVariable activations, SDVariable positives, SDVariable mask,
      SDVariable handle, String table, int dim, int numSampled, SamplerKind sampler, float alpha,
      boolean removeAccidentalHits, boolean subtractLogQ, long seed, boolean perExample,
      boolean countPositives, int pool) {
    super(null, sd, new SDVariable[] {activations, positives, mask, handle}, false);
    this.pool = pool;
    this.perExample = perExample;
    this.countPositives = countPositives;
    this.table = table;
    this.dim = dim;
    this.numSampled = numSampled;
    this.sampler = sampler.getNumber();
    this.alpha = alpha;
    this.removeAccidentalHits = removeAccidentalHits;
    this.subtractLogQ = subtractLogQ;
    this.seed = seed;
  }

  @Override
  public String opName() {
    return OP_NAME;
  }

  @Override
  public void exec(OpContext oc) {
    INDArray act = oc.getInputArray(0);
    INDArray posArr = oc.getInputArray(1);
    if (act.rank() != 2 || act.size(1) != dim) {
      throw new IllegalArgumentException(OP_NAME + ": activations must be [b, " + dim
          + "] for table '" + table + "' but were " + Arrays.toString(act.shape()));
    }
    if (posArr.rank() != 2 || posArr.size(0) != act.size(0)) {
      throw new IllegalArgumentException(OP_NAME + ": positives must be UTF8 [b, P] with b = "
          + act.size(0) + " but were " + Arrays.toString(posArr.shape()));
    }
    int b = (int) act.size(0);
    int p = (int) posArr.size(1);
    int s = numSampled;
    int d = dim;
    String[] pos = DynamicEmbeddingLookup.keys(posArr, OP_NAME);
    double[] mask = NdArrays.doubles(oc.getInputArray(2));
    if (mask.length != b * p) {
      throw new IllegalArgumentException(OP_NAME + ": mask must be [" + b + ", " + p + "]");
    }
    Activations a = Activations.of(act);
    EmbeddingTable t = Tables.get(table);

    // real positives: rows (created if new), each occurrence counted toward the frequencies the
    // unigram sampler draws from; then the draws, whose rows are read without counting (counting
    // negatives would feed the sampler its own draws)
    StringIndex distinct = new StringIndex(b * p);
    int[] posIdx = new int[b * p];
    int real = 0;
    for (int i = 0; i < b * p; i++) {
      posIdx[i] = -1;
      if (mask[i] != 0) {
        posIdx[i] = distinct.add(pos[i]);
        real++;
      }
    }
    String[] uniq = distinct.keys();
    float[] posRows = positiveRows(t, uniq, posIdx, real, d);
    // draws are a function of (seed, step): a resumed run draws what the original run drew
    long drawSeed = StepContext.has(table)
        ? seed + 0x9E3779B97F4A7C15L * (StepContext.step(table) + 1)
            + 0xC2B2AE3D27D4EB4FL * StepContext.stream(table)
        : seed + CALLS.getAndIncrement();
    int draws = !perExample ? s : pool > 0 ? Math.min(pool, b * s) : b * s;
    boolean picks = perExample && draws < b * s; // each example picks among the pooled draws
    // distinct draws with their rows, in one call; sampIdx maps (example, slot) to one of them
    SampledRows sr = t.sampleDistinct(uniq, draws, SamplerKind.forNumber(sampler), alpha,
        drawSeed);
    int[] sampIdx = new int[b * s];
    double[] drawProb = new double[b * s];
    for (int e = 0; e < b; e++) {
      for (int k = 0; k < s; k++) {
        int draw = !perExample ? k : picks ? pick(drawSeed, e * s + k, draws) : e * s + k;
        int idx = sr.drawIndex()[draw];
        sampIdx[e * s + k] = idx;
        drawProb[e * s + k] = sr.probability()[idx];
      }
    }
    String[] sampled = sr.keys();
    float[] sampRows = sr.rows();
    boolean[] hit = removeAccidentalHits ? accidentalHits(pos, mask, sampled, sampIdx, b, p, s)
        : new boolean[b * s];
    double[] logits = new double[b * (p + s)];
    double[] labels = new double[b * (p + s)];
    logits(a, mask, posIdx, posRows, sr.positiveProbability(), sampIdx, sampRows, drawProb, hit,
        b, p, s, d, logits, labels);
    STASH.get().put(getOwnName(), new Forward(a, uniq, posIdx, mask, sampled, posRows, sampRows,
        sampIdx, hit, b, p, s, d));
    DataType type = act.dataType();
    NdArrays.output(oc, 0, logits, type, b, p + s);
    NdArrays.output(oc, 1, labels, type, b, p + s);
  }

  /** Whether sampled candidate (e, k) equals one of example e's real positives. */
  private static boolean[] accidentalHits(String[] pos, double[] mask, String[] sampled,
      int[] sampIdx, int b, int p, int s) {
    boolean[] hit = new boolean[b * s];
    for (int e = 0; e < b; e++) {
      for (int k = 0; k < s; k++) {
        String key = sampled[sampIdx[e * s + k]];
        for (int q = 0; q < p; q++) {
          if (mask[e * p + q] != 0 && pos[e * p + q].equals(key)) {
            hit[e * s + k] = true;
            break;
          }
        }
      }
    }
    return hit;
  }

  /** Fills logits and labels [b, p + s]: the positives' slots, then the sampled ones. */
  private void logits(Activations a, double[] mask, int[] posIdx, float[] posRows,
      double[] posProb, int[] sampIdx, float[] sampRows, double[] drawProb, boolean[] hit,
      int b, int p, int s, int d, double[] logits, double[] labels) {
    // each example's live candidates in one call; dead slots keep MASKED
    float[][] cRows = new float[p + s][];
    int[] cOff = new int[p + s];
    int[] cSlot = new int[p + s];
    double[] dot = new double[p + s];
    for (int e = 0; e < b; e++) {
      int m = candidates(e, mask, posIdx, posRows, sampIdx, sampRows, hit, p, s, d, cRows, cOff,
          cSlot);
      Arrays.fill(logits, e * (p + s), (e + 1) * (p + s), MASKED);
      a.dots(e, m, cRows, cOff, dot);
      for (int c = 0; c < m; c++) {
        int slot = cSlot[c];
        if (slot < p) {
          labels[e * (p + s) + slot] = 1;
        }
        double v = dot[c];
        if (subtractLogQ) {
          double q = slot < p ? posProb[posIdx[e * p + slot]] : drawProb[e * s + slot - p];
          v -= Math.log(s * Math.max(q, 1e-12));
        }
        logits[e * (p + s) + slot] = v;
      }
    }
  }

  /**
   * Example e's live candidates, the logits the forward computes and the backward differentiates:
   * its real positives (mask != 0), then its draws that are not accidental hits. For candidate c,
   * {@code rows[c]} is the row array ({@code posRows} or {@code sampRows}), {@code offs[c]} the
   * row's offset in it and {@code slots[c]} the logit's column (q, or p + k).
   *
   * @return how many candidates were written
   */
  static int candidates(int e, double[] mask, int[] posIdx, float[] posRows, int[] sampIdx,
      float[] sampRows, boolean[] hit, int p, int s, int d, float[][] rows, int[] offs,
      int[] slots) {
    int m = 0;
    for (int q = 0; q < p; q++) {
      int i = e * p + q;
      if (mask[i] != 0) {
        rows[m] = posRows;
        offs[m] = posIdx[i] * d;
        slots[m++] = q;
      }
    }
    for (int k = 0; k < s; k++) {
      if (!hit[e * s + k]) {
        rows[m] = sampRows;
        offs[m] = sampIdx[e * s + k] * d;
        slots[m++] = p + k;
      }
    }
    return m;
  }

  /**
   * Rows of the distinct positives [uniq, d], created if new; with {@code countPositives} every
   * occurrence counts toward the key's frequency (the rows of one key are equal).
   */
  private float[] positiveRows(EmbeddingTable t, String[] uniq, int[] posIdx, int real, int d) {
    if (uniq.length == 0) {
      return new float[0]; // every slot is padding
    }
    if (!countPositives) {
      return t.findOrInsert(uniq, false); // each distinct key once
    }
    String[] occurrences = new String[real];
    for (int i = 0, o = 0; i < posIdx.length; i++) {
      if (posIdx[i] >= 0) {
        occurrences[o++] = uniq[posIdx[i]];
      }
    }
    float[] occRows = t.findOrInsert(occurrences, true);
    float[] posRows = new float[uniq.length * d];
    for (int i = 0, o = 0; i < posIdx.length; i++) {
      if (posIdx[i] >= 0) {
        System.arraycopy(occRows, o++ * d, posRows, posIdx[i] * d, d);
      }
    }
    return posRows;
  }

  /** Candidate i's uniform pick among {@code draws} pooled draws: a function of (seed, i). */
  static int pick(long seed, int i, int draws) {
    long z = seed + 0x9E3779B97F4A7C15L * (i + 1L);
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return (int) (((z >>> 32) * draws) >>> 32); // high bits scaled to [0, draws)
  }

  /** The forward state of the op named {@code name} on this thread (removed when taken). */
  static Forward take(String name) {
    Forward f = STASH.get().remove(name);
    if (f == null) {
      throw new IllegalStateException("the backward of " + name + " ran without its forward on"
          + " this thread");
    }
    return f;
  }

  @Override
  public List<LongShapeDescriptor> calculateOutputShape(OpContext oc) {
    long b = oc.getInputArray(0).size(0);
    long c = oc.getInputArray(1).size(1) + numSampled;
    DataType type = oc.getInputArray(0).dataType();
    return List.of(LongShapeDescriptor.fromShape(new long[] {b, c}, type),
        LongShapeDescriptor.fromShape(new long[] {b, c}, type));
  }

  @Override
  public List<DataType> calculateOutputDataTypes(List<DataType> inputs) {
    return List.of(inputs.get(0), inputs.get(0));
  }

  @Override
  public int getNumOutputs() {
    return 2;
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    SDVariable[] bp = new SampledLogitsBp(sameDiff, arg(0), arg(3), grads.get(0), table,
        getOwnName()).outputVariables();
    return Arrays.asList(bp[0], sameDiff.zerosLike(arg(3)), sameDiff.zerosLike(arg(2)), bp[1]);
  }

  @Override
  public Map<String, Object> propertiesForFunction() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("table", table);
    m.put("dim", (long) dim);
    m.put("numSampled", (long) numSampled);
    m.put("sampler", (long) sampler);
    m.put("alpha", (double) alpha);
    m.put("removeAccidentalHits", removeAccidentalHits);
    m.put("subtractLogQ", subtractLogQ);
    m.put("seed", seed);
    m.put("perExample", perExample);
    m.put("countPositives", countPositives);
    m.put("pool", (long) pool);
    return m;
  }

  @Override
  public void setPropertiesForFunction(Map<String, Object> m) {
    table = (String) m.get("table");
    dim = ((Number) m.get("dim")).intValue();
    numSampled = ((Number) m.get("numSampled")).intValue();
    sampler = ((Number) m.get("sampler")).intValue();
    alpha = ((Number) m.get("alpha")).floatValue();
    removeAccidentalHits = (Boolean) m.get("removeAccidentalHits");
    subtractLogQ = (Boolean) m.get("subtractLogQ");
    seed = ((Number) m.get("seed")).longValue();
    perExample = Boolean.TRUE.equals(m.get("perExample"));
    countPositives = !Boolean.FALSE.equals(m.get("countPositives"));
    pool = m.get("pool") == null ? 0 : ((Number) m.get("pool")).intValue();
  }
}
