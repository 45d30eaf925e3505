package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.Metric;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class TopKTest {
  @ParameterizedTest
  @CsvSource({"DOT,false", "COSINE,false", "DOT,true"})
  void topK_randomTable_matchesBruteForce(Metric metric, boolean bias) {
    int dim = 9;
    TableStore t = new TableStore(Fixtures.config("t", dim, TableConfigs.sgd(1f)), 0, 1);
    int n = 3000;
    String[] keys = IntStream.range(0, n).mapToObj(i -> "w" + i).toArray(String[]::new);
    float[] rows = Fixtures.rows(t, keys);
    int width = bias ? dim - 1 : dim;
    int q = 3;
    int k = 7;
    Random rnd = new Random(3);
    float[] queries = new float[q * width];
    for (int i = 0; i < queries.length; i++) {
      queries[i] = (float) rnd.nextGaussian();
    }
    List<String> excluded = List.of("w0", "w1", "w2");
    TopKHits hits = TopK.run(t, queries, q, k, bias, metric, PackedKeys.of("w0", "w1", "w2"));
    for (int a = 0; a < q; a++) {
      final int qa = a;
      double[] score = new double[n];
      for (int r = 0; r < n; r++) {
        double dot = 0;
        double rn = 0;
        double qn = 0;
        for (int j = 0; j < width; j++) {
          dot += rows[r * dim + j] * queries[qa * width + j];
          rn += rows[r * dim + j] * rows[r * dim + j];
          qn += queries[qa * width + j] * queries[qa * width + j];
        }
        if (bias) {
          dot += rows[r * dim + width];
        }
        score[r] = metric == Metric.COSINE ? dot / Math.sqrt(rn * qn) : dot;
      }
      String[] expected = IntStream.range(0, n).boxed()
          .filter(r -> !excluded.contains(keys[r]))
          .sorted(Comparator.comparingDouble(r -> -score[r]))
          .limit(k).map(r -> keys[r]).toArray(String[]::new);
      assertEquals(k, hits.counts()[a]);
      String[] got = new String[k];
      for (int j = 0; j < k; j++) {
        got[j] = hits.keys().key(a * k + j);
        int r = Integer.parseInt(got[j].substring(1));
        assertEquals(score[r], hits.scores()[a * k + j], 1e-4);
      }
      assertArrayEquals(expected, got, "query " + a);
    }
  }

  @ParameterizedTest
  @CsvSource({"1", "5"})
  void topK_fewerRowsThanK_returnsAllRows(int k) {
    TableStore t = new TableStore(Fixtures.config("t", 2, TableConfigs.sgd(1f)), 0, 1);
    Fixtures.rows(t, "a", "b");
    TopKHits hits = TopK.run(t, new float[] {1, 0}, 1, k, false, Metric.DOT, PackedKeys.of());
    assertEquals(Math.min(k, 2), hits.counts()[0]);
  }
}
