package dev.dynembed.ops;

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
 * Backward of {@link SampledLogits}: {@code (activations, handle, dL/d(logits)) ->
 * (dL/d(activations), dL/d(handle) = 0)}, and the candidate rows' gradients go to the table.
 */
@JavaOp.Name(SampledLogitsBp.OP_NAME)
public final class SampledLogitsBp extends JavaOp {
  static final String OP_NAME = "dynembed_sampled_logits_bp";

  private String table;
  private String forward;
  /** The activations variable: with implicit row steps its rows' curvature is published. */
  private String activations;

  public SampledLogitsBp() {}

  SampledLogitsBp(SameDiff sd, SDVariable activations, SDVariable handle, SDVariable gradLogits,
      String table, String forward, String activationsName) {
    super(sd, activations, handle, gradLogits);
    this.table = table;
    this.forward = forward;
    this.activations = activationsName;
  }

  @Override
  void exec(OpContext oc, GraphTables graph) {
    SampledLogits.Forward f = graph.step().takeForward(forward, SampledLogits.Forward.class);
    INDArray act = oc.getInputArray(0);
    Activations a = f.activations(); // the forward's copy: the same array in the same step
    double[] g = NdArrays.doubles(oc.getInputArray(2));
    int b = f.b();
    int p = f.p();
    int s = f.s();
    int d = f.d();
    int np = f.uniq().length;
    int u = f.sampled().length;
    // one gradient row per distinct key: the positives', then the sampled keys' (a key both
    // positive and sampled appears twice; the table sums duplicates)
    float[] rowGrads = new float[(np + u) * d];
    double[] mask = f.mask();
    int[] posIdx = f.posIdx();
    float[] posRows = f.posRows();
    float[] sampRows = f.sampRows();
    int[] sampIdx = f.sampIdx();
    boolean[] hit = f.hit();
    Curvature curv = f.logits() != null ? new Curvature(a, f, np) : null; // implicit steps
    // each example's live logits (the forward's candidates) in one pass over its activation row
    double[] cg = new double[p + s];
    float[][] cRows = new float[p + s][];
    int[] cOff = new int[p + s];
    int[] cSlot = new int[p + s];
    int[] cGradOff = new int[p + s];
    for (int e = 0; e < b; e++) {
      int m = SampledLogits.candidates(e, mask, posIdx, posRows, sampIdx, sampRows, hit, p, s, d,
          cRows, cOff, cSlot);
      for (int c = 0; c < m; c++) {
        cg[c] = g[e * (p + s) + cSlot[c]];
        cGradOff[c] = cSlot[c] < p ? cOff[c] : np * d + cOff[c]; // sampled rows follow positives
      }
      if (curv != null) {
        curv.add(e, m, cg, cSlot);
      }
      a.backward(e, m, cg, cRows, cOff, rowGrads, cGradOff);
    }
    String[] keys = new String[np + u];
    System.arraycopy(f.uniq(), 0, keys, 0, np);
    System.arraycopy(f.sampled(), 0, keys, np, u);
    if (curv != null) {
      float lr = ImplicitSteps.rate(graph.step().learningRate(), graph.table(table));
      ImplicitSteps.scale(rowGrads, d, curv.factors(keys, rowGrads, lr));
      graph.step().putCurvature(activations, curv);
    }
    if (keys.length > 0) {
      graph.step().applyGradients(graph.table(table), keys, rowGrads);
    }
    a.gradient(oc, 0, act.dataType());
    oc.setOutputArray(1, Nd4j.zeros(oc.getInputArray(1).dataType()));
  }

  @Override
  List<LongShapeDescriptor> outputShapes(OpContext oc) {
    INDArray act = oc.getInputArray(0);
    return List.of(LongShapeDescriptor.fromShape(act.shape(), act.dataType()),
        LongShapeDescriptor.fromShape(new long[0], oc.getInputArray(1).dataType()));
  }

  @Override
  List<DataType> outputTypes(List<DataType> inputs) {
    return List.of(inputs.get(0), inputs.get(1));
  }

  @Override
  public int getNumOutputs() {
    return 2;
  }

  @Override
  void properties(Map<String, Object> out) {
    out.put("table", table);
    out.put("forward", forward);
    out.put("activations", activations);
  }

  @Override
  void readProperties(Props in) {
    table = in.string("table");
    forward = in.string("forward");
    activations = in.string("activations");
  }

  /**
   * The logistic curvature of a step's terms ({@link ImplicitSteps}). Each live candidate
   * (example e, row r) is a term {@code L(h_e . u_r)} with second derivative {@code L''}; the
   * curvature of the step's loss along a direction x of row r is {@code sum L'' (h_e . x)^2}
   * over r's terms, and along a direction x of activation row e, {@code sum L'' (u_r . x)^2}
   * over e's candidates. Row steps are damped by the curvature along their own gradient.
   */
  private static final class Curvature implements ImplicitSteps.RowCurvature {
    private final Activations a;
    private final SampledLogits.Forward f;
    private final int np;
    private final int d;
    private final int p;
    private final int width;
    /** L'' of each live (example, slot), at e * (p + s) + slot. */
    private final double[] second;
    private final float[][] cRows;
    private final int[] cOff;
    private final int[] cSlot;
    private final float[] dots;

    Curvature(Activations a, SampledLogits.Forward f, int np) {
      this.a = a;
      this.f = f;
      this.np = np;
      this.d = f.d();
      this.p = f.p();
      this.width = f.p() + f.s();
      this.second = new double[f.b() * width];
      this.cRows = new float[width][];
      this.cOff = new int[width];
      this.cSlot = new int[width];
      this.dots = new float[width];
    }

    /** Example e's m live candidates: gradients g[c], slots slot[c] (positives below p). */
    void add(int e, int m, double[] g, int[] slot) {
      for (int c = 0; c < m; c++) {
        int at = e * width + slot[c];
        second[at] = ImplicitSteps.logisticCurvature(f.logits()[at], slot[c] < p, g[c]);
      }
    }

    private int candidates(int e) {
      return SampledLogits.candidates(e, f.mask(), f.posIdx(), f.posRows(), f.sampIdx(),
          f.sampRows(), f.hit(), p, f.s(), d, cRows, cOff, cSlot);
    }

    /**
     * The factor of each gradient row of {@code keys} (positives, then sampled keys). A key both
     * positive and sampled has two rows that the table sums: both take the curvature of all its
     * terms along their sum.
     */
    float[] factors(String[] keys, float[] rowGrads, float lr) {
      int rows = keys.length;
      int[] dir = new int[rows]; // the row holding each row's direction (its key's sum)
      float[] grads = rowGrads;
      for (int r = 0; r < rows; r++) {
        dir[r] = r;
      }
      if (np > 0 && rows > np) {
        StringIndex positive = new StringIndex(np); // ids 0..np-1: the positives' rows
        for (int r = 0; r < np; r++) {
          positive.add(keys[r]);
        }
        for (int r = np; r < rows; r++) {
          int q = positive.indexOf(keys[r]);
          if (q >= 0) {
            if (grads == rowGrads) {
              grads = rowGrads.clone();
            }
            dev.dynembed.table.common.FloatKernels.axpy(1f, rowGrads, r * d, grads, q * d, d);
            dir[r] = q;
          }
        }
      }
      double[] along = new double[rows];
      float[][] gRows = new float[width][];
      java.util.Arrays.fill(gRows, grads);
      int[] gOff = new int[width];
      double[] t = new double[width];
      for (int e = 0; e < f.b(); e++) {
        int m = candidates(e);
        for (int c = 0; c < m; c++) {
          gOff[c] = dir[cSlot[c] < p ? cOff[c] / d : np + cOff[c] / d] * d;
        }
        a.dots(e, m, gRows, gOff, t); // h_e . G of each candidate's key, in one pass over h_e
        for (int c = 0; c < m; c++) {
          along[gOff[c] / d] += second[e * width + cSlot[c]] * t[c] * t[c];
        }
      }
      float[] out = new float[rows];
      for (int r = 0; r < rows; r++) {
        int q = dir[r];
        out[r] = ImplicitSteps.factor(lr, along[q],
            dev.dynembed.table.common.FloatKernels.dot(grads, q * d, grads, q * d, d));
      }
      return out;
    }

    @Override
    public int rows() {
      return f.b();
    }

    @Override
    public double along(int e, float[] x, int off) {
      int m = candidates(e);
      // x . u of each candidate, in one pass over x
      dev.dynembed.table.common.FloatKernels.dots(x, off, d, m, cRows, cOff, dots);
      double sum = 0;
      for (int c = 0; c < m; c++) {
        sum += second[e * width + cSlot[c]] * dots[c] * dots[c];
      }
      return sum;
    }
  }
}
