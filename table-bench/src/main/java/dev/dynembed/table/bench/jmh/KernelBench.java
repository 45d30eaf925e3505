package dev.dynembed.table.bench.jmh;

import dev.dynembed.table.common.FloatKernels;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * {@link FloatKernels}' SIMD loops against the plain ones, in word2vec's access pattern: one
 * step's 8,192 examples x 6 candidates, each candidate a random row of a 10,000-row table
 * (forward: a dot product per candidate; backward: two axpy per candidate), and Adagrad on 5,000
 * rows. Score = milliseconds per step's worth of calls.
 *
 * <pre>
 *   java -cp table-bench/target/table-bench-0.1.0-SNAPSHOT-all.jar org.openjdk.jmh.Main KernelBench</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgs = {"-Xmx2g", "--add-modules", "jdk.incubator.vector"})
public class KernelBench {
  @Param({"100"})
  int dim;

  static final int EXAMPLES = 8192;
  static final int CANDIDATES = 6;
  static final int ROWS = 10_000;
  static final int UPDATED = 5_000;

  float[] act;
  float[] rows;
  float[] grads;
  float[] actGrad;
  int[] candidate;
  float[] adagradRows; // [w | acc] per row

  @Setup
  public void setUp() {
    if (!FloatKernels.VECTOR) {
      throw new IllegalStateException("the vector kernels are off: run with --add-modules"
          + " jdk.incubator.vector");
    }
    SplittableRandom r = new SplittableRandom(1);
    act = random(r, EXAMPLES * dim);
    rows = random(r, ROWS * dim);
    grads = new float[ROWS * dim];
    actGrad = new float[EXAMPLES * dim];
    candidate = new int[EXAMPLES * CANDIDATES];
    for (int i = 0; i < candidate.length; i++) {
      candidate[i] = r.nextInt(ROWS);
    }
    adagradRows = random(r, UPDATED * 2 * dim);
    for (int i = 0; i < UPDATED; i++) {
      for (int j = 0; j < dim; j++) {
        adagradRows[i * 2 * dim + dim + j] = 0.1f + Math.abs(adagradRows[i * 2 * dim + dim + j]);
      }
    }
  }

  private static float[] random(SplittableRandom r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (float) (r.nextDouble() - 0.5);
    }
    return v;
  }

  @Benchmark
  public void dotVector(Blackhole bh) {
    for (int i = 0; i < candidate.length; i++) {
      bh.consume(FloatKernels.dot(act, (i / CANDIDATES) * dim, rows, candidate[i] * dim, dim));
    }
  }

  @Benchmark
  public void dotScalar(Blackhole bh) {
    for (int i = 0; i < candidate.length; i++) {
      bh.consume(FloatKernels.scalarDot(act, (i / CANDIDATES) * dim, rows, candidate[i] * dim,
          dim));
    }
  }

  @Benchmark
  public float[] backwardVector() {
    for (int i = 0; i < candidate.length; i++) {
      int e = (i / CANDIDATES) * dim;
      FloatKernels.axpy(1e-3f, rows, candidate[i] * dim, actGrad, e, dim);
      FloatKernels.axpy(1e-3f, act, e, grads, candidate[i] * dim, dim);
    }
    return grads;
  }

  @Benchmark
  public float[] backwardScalar() {
    for (int i = 0; i < candidate.length; i++) {
      int e = (i / CANDIDATES) * dim;
      FloatKernels.scalarAxpy(1e-3f, rows, candidate[i] * dim, actGrad, e, dim);
      FloatKernels.scalarAxpy(1e-3f, act, e, grads, candidate[i] * dim, dim);
    }
    return grads;
  }

  @Benchmark
  public float[] adagradVector() {
    for (int i = 0; i < UPDATED; i++) {
      FloatKernels.adagrad(adagradRows, i * 2 * dim, i * 2 * dim + dim, rows, i * dim, dim,
          1e-6f, 1e-8f);
    }
    return adagradRows;
  }

  @Benchmark
  public float[] adagradScalar() {
    for (int i = 0; i < UPDATED; i++) {
      FloatKernels.scalarAdagrad(adagradRows, i * 2 * dim, adagradRows, i * 2 * dim + dim, rows,
          i * dim, dim,
          1e-6f, 1e-8f, 0);
    }
    return adagradRows;
  }
}
