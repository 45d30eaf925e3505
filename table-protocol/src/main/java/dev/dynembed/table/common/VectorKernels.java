package dev.dynembed.table.common;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link FloatKernels} on the JDK's vector API. Loaded only when the vector module is present:
 * {@link FloatKernels} never touches this class otherwise. Multiply then add, not {@code fma}:
 * JDK 17's C2 ran {@code fma} through the API's scalar fallback here (async-profiler showed
 * {@code FloatVector.lanewiseTemplate} under it), and mul + add measured faster.
 */
final class VectorKernels {
  private VectorKernels() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

  static int lanes() {
    return S.length();
  }

  static float dot(float[] x, int xo, float[] y, int yo, int n) {
    FloatVector acc = FloatVector.zero(S);
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      acc = acc.add(FloatVector.fromArray(S, x, xo + j).mul(FloatVector.fromArray(S, y, yo + j)));
    }
    float s = acc.reduceLanes(VectorOperators.ADD);
    for (; j < n; j++) {
      s += x[xo + j] * y[yo + j];
    }
    return s;
  }

  /** Whether every value is finite: x * 0 is 0 for finite x and NaN otherwise. */
  static boolean allFinite(float[] x, int xo, int n) {
    FloatVector acc = FloatVector.zero(S);
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      acc = acc.add(FloatVector.fromArray(S, x, xo + j).mul(0f));
    }
    float s = acc.reduceLanes(VectorOperators.ADD);
    for (; j < n; j++) {
      s += x[xo + j] * 0f;
    }
    return s == 0f;
  }

  /** The largest |x|, or NaN if a value is NaN (lanewise max propagates NaN). */
  static float maxAbs(float[] x, int xo, int n) {
    FloatVector acc = FloatVector.zero(S);
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      acc = acc.max(FloatVector.fromArray(S, x, xo + j).abs());
    }
    float m = acc.reduceLanes(VectorOperators.MAX);
    for (; j < n; j++) {
      m = Math.max(m, Math.abs(x[xo + j]));
    }
    return m;
  }

  static void axpy(float a, float[] x, int xo, float[] y, int yo, int n) {
    FloatVector av = FloatVector.broadcast(S, a);
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      FloatVector.fromArray(S, x, xo + j).mul(av).add(FloatVector.fromArray(S, y, yo + j))
          .intoArray(y, yo + j);
    }
    for (; j < n; j++) {
      y[yo + j] += a * x[xo + j];
    }
  }

  static void dots(float[] x, int xo, int n, int m, float[][] rows, int[] rowOffs, float[] out) {
    int c = 0;
    for (; c + 3 < m; c += 4) {
      float[] r0 = rows[c];
      float[] r1 = rows[c + 1];
      float[] r2 = rows[c + 2];
      float[] r3 = rows[c + 3];
      int o0 = rowOffs[c];
      int o1 = rowOffs[c + 1];
      int o2 = rowOffs[c + 2];
      int o3 = rowOffs[c + 3];
      FloatVector a0 = FloatVector.zero(S);
      FloatVector a1 = FloatVector.zero(S);
      FloatVector a2 = FloatVector.zero(S);
      FloatVector a3 = FloatVector.zero(S);
      int j = 0;
      for (int up = S.loopBound(n); j < up; j += S.length()) {
        FloatVector xv = FloatVector.fromArray(S, x, xo + j);
        a0 = a0.add(xv.mul(FloatVector.fromArray(S, r0, o0 + j)));
        a1 = a1.add(xv.mul(FloatVector.fromArray(S, r1, o1 + j)));
        a2 = a2.add(xv.mul(FloatVector.fromArray(S, r2, o2 + j)));
        a3 = a3.add(xv.mul(FloatVector.fromArray(S, r3, o3 + j)));
      }
      float s0 = a0.reduceLanes(VectorOperators.ADD);
      float s1 = a1.reduceLanes(VectorOperators.ADD);
      float s2 = a2.reduceLanes(VectorOperators.ADD);
      float s3 = a3.reduceLanes(VectorOperators.ADD);
      for (; j < n; j++) {
        float xj = x[xo + j];
        s0 += xj * r0[o0 + j];
        s1 += xj * r1[o1 + j];
        s2 += xj * r2[o2 + j];
        s3 += xj * r3[o3 + j];
      }
      out[c] = s0;
      out[c + 1] = s1;
      out[c + 2] = s2;
      out[c + 3] = s3;
    }
    for (; c < m; c++) {
      out[c] = dot(x, xo, rows[c], rowOffs[c], n);
    }
  }

  static void dotBackward(float[] x, int xo, float[] xGrad, int xgo, int n, int m, float[] g,
      float[][] rows, int[] rowOffs, float[] rowGrad, int[] rowGradOffs) {
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      FloatVector xv = FloatVector.fromArray(S, x, xo + j);
      FloatVector s = FloatVector.fromArray(S, xGrad, xgo + j);
      for (int c = 0; c < m; c++) {
        float gc = g[c];
        s = FloatVector.fromArray(S, rows[c], rowOffs[c] + j).mul(gc).add(s);
        int r = rowGradOffs[c] + j;
        xv.mul(gc).add(FloatVector.fromArray(S, rowGrad, r)).intoArray(rowGrad, r);
      }
      s.intoArray(xGrad, xgo + j);
    }
    FloatKernels.scalarDotBackward(x, xo, xGrad, xgo, n, m, g, rows, rowOffs, rowGrad,
        rowGradOffs, j);
  }

  static void adagrad(float[] wa, int w, float[] aa, int acc, float[] g, int go, int n,
      float lr, float eps) {
    int j = 0;
    for (int up = S.loopBound(n); j < up; j += S.length()) {
      FloatVector gv = FloatVector.fromArray(S, g, go + j);
      FloatVector av = FloatVector.fromArray(S, aa, acc + j).add(gv.mul(gv));
      av.intoArray(aa, acc + j);
      FloatVector step = gv.mul(lr).div(av.lanewise(VectorOperators.SQRT).add(eps));
      FloatVector.fromArray(S, wa, w + j).sub(step).intoArray(wa, w + j);
    }
    FloatKernels.scalarAdagrad(wa, w, aa, acc, g, go, n, lr, eps, j);
  }
}
