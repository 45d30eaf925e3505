package dev.dynembed.table.bench;

import java.util.Arrays;
import java.util.SplittableRandom;

/** Zipf-distributed ranks 0..n-1 (rank r has weight 1/(r+1)^s), by inverse CDF. */
final class Zipf {
  private final double[] cdf;

  Zipf(int n, double s) {
    cdf = new double[n];
    double sum = 0;
    for (int r = 0; r < n; r++) {
      sum += 1.0 / Math.pow(r + 1, s);
      cdf[r] = sum;
    }
    for (int r = 0; r < n; r++) {
      cdf[r] /= sum;
    }
  }

  /** The benchmarks' keys: "key:0" .. "key:(n-1)". */
  static String[] keys(int n) {
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = "key:" + i;
    }
    return keys;
  }

  /** {@code count} batches of {@code batch} keys, drawn Zipf(s) by rank (seed 42). */
  static java.util.List<String[]> batches(String[] keys, int count, int batch, double s) {
    Zipf z = new Zipf(keys.length, s);
    SplittableRandom rnd = new SplittableRandom(42);
    java.util.List<String[]> out = new java.util.ArrayList<>(count);
    for (int b = 0; b < count; b++) {
      String[] k = new String[batch];
      for (int i = 0; i < batch; i++) {
        k[i] = keys[z.next(rnd)];
      }
      out.add(k);
    }
    return out;
  }

  int next(SplittableRandom rnd) {
    int i = Arrays.binarySearch(cdf, rnd.nextDouble());
    return i >= 0 ? i : Math.min(-i - 1, cdf.length - 1);
  }
}
