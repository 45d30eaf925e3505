package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The SIMD kernels against double-precision references, at lengths around the lane counts. */
class FloatKernelsTest {
  @org.junit.jupiter.api.Test
  void vectorModule_isUsedInTests() {
    // surefire passes --add-modules jdk.incubator.vector: the tests below check the SIMD path
    assertTrue(FloatKernels.VECTOR, "the vector kernels are not in use");
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 3, 7, 8, 15, 16, 17, 31, 64, 100, 333})
  void dotAndAxpy_matchReference_atOffsets(int n) {
    Random r = new Random(n);
    float[] x = random(r, n + 5);
    float[] y = random(r, n + 9);
    double want = 0;
    for (int j = 0; j < n; j++) {
      want += (double) x[3 + j] * y[7 + j];
    }
    assertEquals(want, FloatKernels.dot(x, 3, y, 7, n), 1e-5 * (1 + n));
    assertEquals(FloatKernels.scalarDot(x, 3, y, 7, n), FloatKernels.dot(x, 3, y, 7, n),
        1e-5 * (1 + n));

    float[] z = y.clone();
    FloatKernels.axpy(-0.75f, x, 3, z, 7, n);
    for (int j = 0; j < y.length; j++) {
      boolean inside = j >= 7 && j < 7 + n;
      float expect = inside ? y[j] + -0.75f * x[j - 4] : y[j];
      assertEquals(expect, z[j], 1e-6f, "element " + j);
    }
  }

  /** m dot products at once equal m calls of dot exactly, for every group size (4, 2+1, ...). */
  @ParameterizedTest
  @ValueSource(ints = {1, 7, 16, 17, 100, 129})
  void dots_equalDotExactly(int n) {
    Random r = new Random(n);
    float[] x = random(r, n + 3);
    float[] rowsA = random(r, 6 * n + 1);
    float[] rowsB = random(r, 3 * n);
    for (int m = 0; m <= 9; m++) {
      float[][] rows = new float[m][];
      int[] offs = new int[m];
      for (int c = 0; c < m; c++) {
        rows[c] = c % 3 == 1 ? rowsB : rowsA;
        offs[c] = c % 3 == 1 ? r.nextInt(2 * n + 1) : r.nextInt(5 * n + 2);
      }
      float[] got = new float[m];
      FloatKernels.dots(x, 3, n, m, rows, offs, got);
      for (int c = 0; c < m; c++) {
        assertEquals(FloatKernels.dot(x, 3, rows[c], offs[c], n), got[c], 0f,
            "row " + c + " of " + m);
      }
    }
  }

  /**
   * The fused backward of m dot products equals m pairs of axpy calls exactly (same operations in
   * the same order per element), on both paths, with two candidates sharing a row-gradient range
   * (a key drawn twice) and candidates in two row arrays.
   */
  @ParameterizedTest
  @ValueSource(ints = {1, 7, 16, 17, 100, 129})
  void dotBackward_equalsAxpyPairsExactly(int n) {
    Random r = new Random(n);
    float[] x = random(r, 3 * n + 2);
    float[] xGrad = random(r, 2 * n + 1);
    float[] rowsA = random(r, 4 * n);
    float[] rowsB = random(r, 2 * n + 3);
    float[] rowGrad = random(r, 5 * n);
    int m = 5;
    float[] g = {0.5f, -1.25f, 0.003f, 2f, -0.7f};
    float[][] rows = {rowsA, rowsB, rowsA, rowsB, rowsA};
    int[] rowOffs = {0, 3, 2 * n, n + 3, 3 * n};
    int[] rowGradOffs = {n, 0, 3 * n, n, 4 * n}; // candidates 0 and 3 share a range

    float[] wantX = xGrad.clone();
    float[] wantRows = rowGrad.clone();
    for (int c = 0; c < m; c++) {
      FloatKernels.axpy(g[c], rows[c], rowOffs[c], wantX, 1, n);
      FloatKernels.axpy(g[c], x, 2, wantRows, rowGradOffs[c], n);
    }
    float[] gotX = xGrad.clone();
    float[] gotRows = rowGrad.clone();
    FloatKernels.dotBackward(x, 2, gotX, 1, n, m, g, rows, rowOffs, gotRows, rowGradOffs);
    assertArrayEquals(wantX, gotX, "activation gradient");
    assertArrayEquals(wantRows, gotRows, "row gradients");

    float[] scalarX = xGrad.clone();
    float[] scalarRows = rowGrad.clone();
    FloatKernels.scalarDotBackward(x, 2, scalarX, 1, n, m, g, rows, rowOffs, scalarRows,
        rowGradOffs, 0);
    assertArrayEquals(wantX, scalarX, "activation gradient, scalar loop");
    assertArrayEquals(wantRows, scalarRows, "row gradients, scalar loop");
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 7, 16, 100, 129})
  void adagrad_equalsTheScalarUpdateExactly(int n) {
    Random r = new Random(n);
    float[] p = random(r, 2 * n + 4);
    for (int j = 0; j < n; j++) {
      p[2 + n + j] = Math.abs(p[2 + n + j]) + 0.1f; // accumulators are positive
    }
    float[] g = random(r, n + 1);
    float[] scalar = p.clone();
    FloatKernels.scalarAdagrad(scalar, 2, scalar, 2 + n, g, 1, n, 0.3f, 1e-8f, 0);
    float[] kernel = p.clone();
    FloatKernels.adagrad(kernel, 2, 2 + n, g, 1, n, 0.3f, 1e-8f);
    // every lane computes the same IEEE operations (sqrt and division are correctly rounded)
    assertArrayEquals(scalar, kernel);
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 7, 16, 17, 100, 333})
  void firstNonFinite_findsTheFirstNaNOrInfinity_atEveryPosition(int n) {
    Random r = new Random(n);
    float[] x = random(r, n + 3);
    x[0] = Float.NaN; // outside the checked range
    assertEquals(-1, FloatKernels.firstNonFinite(x, 1, n));
    float[] bad = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY};
    for (int at = 0; at < n; at++) {
      float[] y = x.clone();
      y[1 + at] = bad[at % 3];
      if (at + 1 < n) {
        y[2 + at] = Float.NaN; // a later one is not reported
      }
      assertEquals(at, FloatKernels.firstNonFinite(y, 1, n), "bad value at " + at);
    }
    // the largest finite values times zero stay zero
    float[] big = new float[n];
    java.util.Arrays.fill(big, -Float.MAX_VALUE);
    assertEquals(-1, FloatKernels.firstNonFinite(big, 0, n));
  }

  private static float[] random(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = r.nextFloat() * 2 - 1;
    }
    return v;
  }
}
