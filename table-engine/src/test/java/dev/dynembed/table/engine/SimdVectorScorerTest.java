package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.lucene.codecs.hnsw.DefaultFlatVectorScorer;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.util.hnsw.RandomAccessVectorValues;
import org.apache.lucene.util.hnsw.RandomVectorScorer;
import org.junit.jupiter.api.Test;

/** The index's SIMD scorer gives Lucene's own scores (the graph it builds is Lucene's graph). */
class SimdVectorScorerTest {
  private static List<float[]> vectors(int n, int dim, boolean unit, Random r) {
    List<float[]> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      float[] v = new float[dim];
      double norm = 0;
      for (int j = 0; j < dim; j++) {
        v[j] = (float) r.nextGaussian();
        norm += v[j] * v[j];
      }
      if (unit) {
        for (int j = 0; j < dim; j++) {
          v[j] /= (float) Math.sqrt(norm);
        }
      }
      out.add(v);
    }
    return out;
  }

  @Test
  void scoresAreLucenes_forBothSimilaritiesTheIndexUses() throws Exception {
    Random r = new Random(5);
    for (int dim : new int[] {1, 7, 8, 33, 100, 129}) { // tails past the SIMD width too
      for (VectorSimilarityFunction sim : new VectorSimilarityFunction[] {
          VectorSimilarityFunction.DOT_PRODUCT, VectorSimilarityFunction.MAXIMUM_INNER_PRODUCT}) {
        List<float[]> vs = vectors(50, dim, sim == VectorSimilarityFunction.DOT_PRODUCT, r);
        RandomAccessVectorValues.Floats values = RandomAccessVectorValues.fromFloats(vs, dim);
        var mine = SimdVectorScorer.supplier(sim, values);
        var lucene = DefaultFlatVectorScorer.INSTANCE.getRandomVectorScorerSupplier(sim, values);
        float[] query = vectors(1, dim, sim == VectorSimilarityFunction.DOT_PRODUCT, r).get(0);
        RandomVectorScorer q = SimdVectorScorer.of(sim, values, query);
        RandomVectorScorer lq = DefaultFlatVectorScorer.INSTANCE.getRandomVectorScorer(sim,
            values, query);
        assertEquals(lq.maxOrd(), q.maxOrd());
        for (int a = 0; a < vs.size(); a++) {
          RandomVectorScorer s = mine.scorer(a);
          RandomVectorScorer l = lucene.scorer(a);
          for (int b = 0; b < vs.size(); b++) {
            assertEquals(l.score(b), s.score(b), 1e-5f * Math.max(1f, Math.abs(l.score(b))),
                sim + " dim " + dim + " rows " + a + ", " + b);
          }
          assertEquals(lq.score(a), q.score(a), 1e-5f * Math.max(1f, Math.abs(lq.score(a))));
        }
      }
    }
  }

  @Test
  void otherSimilarities_areRefusedNamingThem() {
    var values = RandomAccessVectorValues.fromFloats(List.of(new float[] {1f}), 1);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> SimdVectorScorer.supplier(VectorSimilarityFunction.EUCLIDEAN, values));
    assertEquals("no SIMD scorer for EUCLIDEAN", e.getMessage());
  }
}
