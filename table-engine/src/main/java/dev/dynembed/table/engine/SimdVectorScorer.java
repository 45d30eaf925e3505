package dev.dynembed.table.engine;

import dev.dynembed.table.common.FloatKernels;
import java.io.IOException;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.util.VectorUtil;
import org.apache.lucene.util.hnsw.RandomAccessVectorValues;
import org.apache.lucene.util.hnsw.RandomVectorScorer;
import org.apache.lucene.util.hnsw.RandomVectorScorerSupplier;

/**
 * Lucene's vector scores computed with the table's SIMD dot product ({@link FloatKernels}).
 * Lucene 9.12 vectorizes its own only on Java 20+; on Java 17, where this project runs, its
 * {@code DefaultFlatVectorScorer} is a scalar loop, and scoring is most of an HNSW build's and
 * search's time (measured: docs/benchmarks.md, issue 32). Scores are Lucene's, transform for
 * transform: {@code (1 + dot) / 2} floored at 0 for {@code DOT_PRODUCT} (unit vectors),
 * {@link VectorUtil#scaleMaxInnerProductScore} for {@code MAXIMUM_INNER_PRODUCT}.
 */
public final class SimdVectorScorer {
  private SimdVectorScorer() {}

  /** Scorers between stored vectors, for the graph's build. */
  public static RandomVectorScorerSupplier supplier(VectorSimilarityFunction sim,
      RandomAccessVectorValues.Floats values) {
    check(sim);
    return new RandomVectorScorerSupplier() {
      @Override
      public RandomVectorScorer scorer(int ord) throws IOException {
        return of(sim, values, values.vectorValue(ord));
      }

      @Override
      public RandomVectorScorerSupplier copy() {
        return this; // reads only: fromFloats' values share nothing mutable
      }
    };
  }

  /** A query's scores against the stored vectors, for a search. */
  public static RandomVectorScorer of(VectorSimilarityFunction sim,
      RandomAccessVectorValues.Floats values, float[] query) {
    check(sim);
    int dim = values.dimension();
    boolean unit = sim == VectorSimilarityFunction.DOT_PRODUCT;
    return new RandomVectorScorer.AbstractRandomVectorScorer(values) {
      @Override
      public float score(int node) throws IOException {
        float dot = FloatKernels.dot(query, 0, values.vectorValue(node), 0, dim);
        return unit ? Math.max((1 + dot) / 2, 0) : VectorUtil.scaleMaxInnerProductScore(dot);
      }
    };
  }

  private static void check(VectorSimilarityFunction sim) {
    if (sim != VectorSimilarityFunction.DOT_PRODUCT
        && sim != VectorSimilarityFunction.MAXIMUM_INNER_PRODUCT) {
      throw new IllegalArgumentException("no SIMD scorer for " + sim);
    }
  }
}
