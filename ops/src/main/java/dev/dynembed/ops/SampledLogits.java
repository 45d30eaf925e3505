package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.SampledRows;
import dev.dynembed.table.client.TableReads;
import dev.dynembed.table.client.TableRows;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.v1.SamplerKind;
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
 * {@code sampledLogits(activations [b, d], positives UTF8 [b, P], mask [b, P], handle [])
 * -> logits [b, P + S], labels [b, P + S]} over an output table of dim d.
 *
 * <p>Candidates: each example's P positive slots (padded; {@code mask} 1 = real), then S keys
 * from the table's sampler ({@link Sampling}: shared by the batch, or per example).
 * {@code logits[b, j] = activations[b] . row(candidate j)}; labels are 1 for real positives and 0
 * otherwise (multi-label). Padded slots, and with accidental-hit removal sampled keys that equal
 * one of the example's positives, get logit {@link #MASKED} and no gradient. With the logQ
 * correction every logit is corrected by {@code -log(S q(key))} (sampled softmax), q the
 * sampler's probability per draw (floored at 1e-12 for keys the sampler cannot yet draw). The
 * draws are a function of the sampling seed and the step's number and stream ({@link TableStep}).
 *
 * <p>Positives are created in the output table if missing and, with {@code countPositives}, each
 * occurrence counts toward its frequency (the unigram sampler's counts); with admission, a
 * positive not yet admitted reads as a zero row and gets no gradient. The positives' rows and the
 * draws are read together (one call per shard), and can be planned ahead of the step.
 *
 * <p>The backward op returns dL/d(activations) and sends the gradient of every candidate row to
 * the table, summed per distinct key (positives and sampled keys alike); with {@link
 * Sampling#implicitRowSteps} each distinct key's sum is damped by its curvature ({@link
 * ImplicitSteps}).
 */
@JavaOp.Name(SampledLogits.OP_NAME)
public final class SampledLogits extends TableOp {
  static final String OP_NAME = "dynembed_sampled_logits";
  /** Logit of padded slots and removed accidental hits: exp() of it is 0 in float. */
  public static final double MASKED = -1e9;

  /**
   * What the forward used, for its backward in the same step.
   *
   * @param uniq the distinct positive keys; {@code posRows} their rows [uniq, d]
   * @param posIdx [b * p]: which of them is positive slot i (-1 for padding)
   * @param sampled the distinct sampled keys; {@code sampRows} their rows [u, d]
   * @param sampIdx [b * s]: which of them is candidate k of example e (at e * s + k)
   * @param logits [b, p + s] as output, kept only with implicit row steps (null without them)
   */
  record Forward(Activations activations, String[] uniq, int[] posIdx, double[] mask,
      String[] sampled, float[] posRows, float[] sampRows, int[] sampIdx, boolean[] hit, int b,
      int p, int s, int d, double[] logits) {}

  /** A batch's positives: every slot's key, the distinct real ones, and each slot's index. */
  private record Positives(String[] pos, double[] mask, String[] uniq, int[] posIdx, int real) {}

  /** The reads of one batch, planned ahead or made now, and the draws' seed. */
  private record Reads(DataBuffer positivesBuffer, DataBuffer maskBuffer, Positives positives,
      long drawSeed, CompletableFuture<TableRows> posRows,
      CompletableFuture<SampledRows> sampled) {}

  private String table;
  private int dim;
  private Sampling sampling;

  public SampledLogits() {}

  SampledLogits(SameDiff sd, SDVariable activations, SDVariable positives, SDVariable mask,
      SDVariable handle, String table, int dim, Sampling sampling) {
    super(sd, activations, positives, mask, handle);
    this.table = table;
    this.dim = dim;
    this.sampling = sampling;
  }

  private static Positives positives(INDArray posArr, INDArray maskArr) {
    if (posArr.rank() != 2) {
      throw new IllegalArgumentException(OP_NAME + ": positives must be UTF8 [b, P] but were "
          + Arrays.toString(posArr.shape()));
    }
    int b = (int) posArr.size(0);
    int p = (int) posArr.size(1);
    String[] pos = DynamicEmbeddingLookup.keys(posArr, OP_NAME);
    double[] mask = NdArrays.doubles(maskArr);
    if (mask.length != b * p) {
      throw new IllegalArgumentException(OP_NAME + ": mask must be [" + b + ", " + p + "] but was "
          + Arrays.toString(maskArr.shape()));
    }
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
    return new Positives(pos, mask, distinct.keys(), posIdx, real);
  }

  /**
   * The batch's reads, added to {@code reads}: the positives' rows (created if new, counted per
   * occurrence with {@code countPositives}) and the draws with their rows. Drawn rows are read
   * without counting: counting negatives would feed the sampler its own draws. The positives go
   * with the draws only when their probabilities are needed (the logQ correction). With {@code
   * withState} (a trainer's reads made ahead) every row comes with its optimizer state, for the
   * replay of the previous step's updates.
   */
  private Reads read(TableReads reads, EmbeddingTable t, TableStep step, INDArray posArr,
      INDArray maskArr, boolean withState) {
    Positives ps = positives(posArr, maskArr);
    CompletableFuture<TableRows> posRows = positiveRows(reads, t, ps, withState);
    long seed = step.drawSeed(sampling.seed());
    int draws = sampling.draws((int) posArr.size(0));
    CompletableFuture<SampledRows> sampled = reads.sampleDistinct(t,
        sampling.subtractLogQ() ? ps.uniq() : new String[0], draws, sampling.sampler(),
        sampling.alpha(), seed, withState);
    return new Reads(posArr.data(), maskArr.data(), ps, seed, posRows, sampled);
  }

  /** Rows (and state) of the distinct positives [uniq, d]; the rows of one key are equal. */
  private CompletableFuture<TableRows> positiveRows(TableReads reads, EmbeddingTable t,
      Positives ps, boolean withState) {
    String[] uniq = ps.uniq();
    if (uniq.length == 0) { // every slot is padding
      return CompletableFuture.completedFuture(new TableRows(new float[0], new boolean[0],
          null, withState ? new long[0] : null));
    }
    if (!sampling.countPositives()) { // each distinct key once
      return withState ? reads.lookup(t, uniq, false)
          : reads.findOrInsert(t, uniq, false).thenApply(r -> new TableRows(r, null, null, null));
    }
    String[] occurrences = new String[ps.real()];
    int[] occOf = new int[uniq.length]; // an occurrence of each distinct key
    for (int i = 0, o = 0; i < ps.posIdx().length; i++) {
      if (ps.posIdx()[i] >= 0) {
        occOf[ps.posIdx()[i]] = o;
        occurrences[o++] = uniq[ps.posIdx()[i]];
      }
    }
    CompletableFuture<TableRows> occRows = withState ? reads.lookup(t, occurrences, true)
        : reads.findOrInsert(t, occurrences, true).thenApply(r -> new TableRows(r, null, null,
            null));
    return occRows.thenApply(r -> gather(r, occOf));
  }

  /** Row {@code at[u]} of {@code r} (and its state) as row u, for every u. */
  private TableRows gather(TableRows r, int[] at) {
    int n = at.length;
    float[] rows = new float[n * dim];
    boolean[] found = r.found() == null ? null : new boolean[n];
    int sf = r.slots() == null ? 0 : r.slots().length / Math.max(1, r.rows().length / dim);
    float[] slots = r.slots() == null ? null : new float[n * sf];
    long[] counts = r.updateCounts() == null ? null : new long[n];
    for (int u = 0; u < n; u++) {
      System.arraycopy(r.rows(), at[u] * dim, rows, u * dim, dim);
      if (found != null) {
        found[u] = r.found()[at[u]];
      }
      if (slots != null) {
        System.arraycopy(r.slots(), at[u] * sf, slots, u * sf, sf);
      }
      if (counts != null) {
        counts[u] = r.updateCounts()[at[u]];
      }
    }
    return new TableRows(rows, found, slots, counts);
  }

  @Override
  boolean plan(GraphTables graph, TableStep step, Map<String, INDArray> feeds, TableReads reads) {
    INDArray pos = fed(1, feeds);
    INDArray mask = fed(2, feeds);
    EmbeddingTable t = graph.table(table);
    if (pos == null || mask == null || !TableReads.returnsState(t)) {
      return false; // not fed, or a table that cannot return what the replay needs
    }
    step.putPlanned(getOwnName(), read(reads, t, step, pos, mask, step.wantsState()));
    return true;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    INDArray act = oc.getInputArray(0);
    INDArray posArr = oc.getInputArray(1);
    INDArray maskArr = oc.getInputArray(2);
    if (act.rank() != 2 || act.size(1) != dim) {
      throw new IllegalArgumentException(OP_NAME + ": activations must be [b, " + dim
          + "] for table '" + table + "' but were " + Arrays.toString(act.shape()));
    }
    if (posArr.rank() != 2 || posArr.size(0) != act.size(0)) {
      throw new IllegalArgumentException(OP_NAME + ": positives must be UTF8 [b, P] with b = "
          + act.size(0) + " but were " + Arrays.toString(posArr.shape()));
    }
    TableStep step = graph.step();
    EmbeddingTable t = graph.table(table);
    Reads r = step.takePlanned(getOwnName(), Reads.class);
    boolean usePlanned = r != null && r.positivesBuffer() == posArr.data()
        && r.maskBuffer() == maskArr.data();
    graph.countPlanned(usePlanned);
    if (!usePlanned) { // not planned, or planned for other inputs: read now, after every update
      step.awaitFreshReads();
      TableReads now = TableStep.reads();
      r = read(now, t, step, posArr, maskArr, false);
      now.submit();
    }
    int b = (int) act.size(0);
    int p = (int) posArr.size(1);
    int s = sampling.numSampled();
    int d = dim;
    Positives ps = r.positives();
    TableRows positiveRows = TableReads.join(r.posRows());
    float[] posRows = positiveRows.rows();
    SampledRows sr = TableReads.join(r.sampled());
    if (positiveRows.updateCounts() != null) { // read ahead: replay the previous step's updates
      step.replayPrevious(t, ps.uniq(), positiveRows.found(), posRows, positiveRows.slots(),
          positiveRows.updateCounts());
    }
    if (sr.updateCounts() != null) {
      boolean[] drawn = new boolean[sr.keys().length];
      java.util.Arrays.fill(drawn, true);
      step.replayPrevious(t, sr.keys(), drawn, sr.rows(), sr.slots(), sr.updateCounts());
    }
    int draws = sampling.draws(b);
    boolean picks = sampling.perExample() && draws < b * s; // examples pick among pooled draws
    int[] sampIdx = new int[b * s];
    double[] drawProb = new double[b * s];
    int[] unit = sampling.sharedByRuns() ? runs(ps.posIdx(), b, p) : null;
    for (int e = 0; e < b; e++) {
      int u = unit == null ? e : unit[e]; // whose candidates example e takes
      for (int k = 0; k < s; k++) {
        int draw = !sampling.perExample() ? k
            : picks ? pick(r.drawSeed(), u * s + k, draws) : u * s + k;
        int idx = sr.drawIndex()[draw];
        sampIdx[e * s + k] = idx;
        drawProb[e * s + k] = sr.probability()[idx];
      }
    }
    String[] sampled = sr.keys();
    float[] sampRows = sr.rows();
    boolean[] hit = sampling.removeAccidentalHits()
        ? accidentalHits(ps.pos(), ps.mask(), sampled, sampIdx, b, p, s) : new boolean[b * s];
    double[] logits = new double[b * (p + s)];
    double[] labels = new double[b * (p + s)];
    Activations a = Activations.of(act);
    logits(a, ps.mask(), ps.posIdx(), posRows, sr.positiveProbability(), sampIdx, sampRows,
        drawProb, hit, b, p, s, d, logits, labels);
    step.putForward(getOwnName(), new Forward(a, ps.uniq(), ps.posIdx(), ps.mask(), sampled,
        posRows, sampRows, sampIdx, hit, b, p, s, d, sampling.implicitRowSteps() ? logits : null));
    DataType type = act.dataType();
    NdArrays.output(oc, 0, logits, type, b, p + s);
    NdArrays.output(oc, 1, labels, type, b, p + s);
  }

  /**
   * The run of each example: consecutive examples whose first positive slot holds the same real
   * key share a run; runs are numbered from 0 in order, so run r's candidates are those example
   * r would take alone (r &lt;= e: the draws exist).
   */
  static int[] runs(int[] posIdx, int b, int p) {
    int[] run = new int[b];
    int r = -1;
    for (int e = 0; e < b; e++) {
      int key = p == 0 ? -1 : posIdx[e * p];
      if (e == 0 || key < 0 || key != posIdx[(e - 1) * p]) {
        r++;
      }
      run[e] = r;
    }
    return run;
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
        if (sampling.subtractLogQ()) {
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

  /** Candidate i's uniform pick among {@code draws} pooled draws: a function of (seed, i). */
  static int pick(long seed, int i, int draws) {
    long z = KeyHashing.splitMix64(seed + 0x9E3779B97F4A7C15L * (i + 1L));
    return (int) (((z >>> 32) * draws) >>> 32); // high bits scaled to [0, draws)
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    long b = oc.getInputArray(0).size(0);
    long c = oc.getInputArray(1).size(1) + sampling.numSampled();
    DataType type = oc.getInputArray(0).dataType();
    return List.of(LongShapeDescriptor.fromShape(new long[] {b, c}, type),
        LongShapeDescriptor.fromShape(new long[] {b, c}, type));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(0), inputs.get(0));
  }

  @Override
  public int getNumOutputs() {
    return 2;
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    SDVariable[] bp = new SampledLogitsBp(sameDiff, arg(0), arg(3), grads.get(0), table,
        getOwnName(), arg(0).name()).outputVariables();
    return Arrays.asList(bp[0], sameDiff.zerosLike(arg(3)), sameDiff.zerosLike(arg(2)), bp[1]);
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("dim", (long) dim);
    out.put("numSampled", (long) sampling.numSampled());
    out.put("sampler", (long) sampling.sampler().getNumber());
    out.put("alpha", (double) sampling.alpha());
    out.put("removeAccidentalHits", sampling.removeAccidentalHits());
    out.put("subtractLogQ", sampling.subtractLogQ());
    out.put("seed", sampling.seed());
    out.put("perExample", sampling.perExample());
    out.put("countPositives", sampling.countPositives());
    out.put("pool", (long) sampling.pool());
    out.put("implicitRowSteps", sampling.implicitRowSteps());
    out.put("sharedByRuns", sampling.sharedByRuns());
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    dim = in.integer("dim");
    sampling = new Sampling(in.integer("numSampled"), SamplerKind.forNumber(in.integer("sampler")),
        in.floatValue("alpha"), in.bool("removeAccidentalHits"), in.bool("subtractLogQ"),
        in.longValue("seed"), in.bool("perExample"), in.bool("countPositives"),
        in.integer("pool"), in.bool("implicitRowSteps"), in.bool("sharedByRuns"));
  }
}
