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

  int next(SplittableRandom rnd) {
    int i = Arrays.binarySearch(cdf, rnd.nextDouble());
    return i >= 0 ? i : Math.min(-i - 1, cdf.length - 1);
  }
}
