package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.SamplerKind;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class SamplerTest {
  /** Keys k0..k9 with frequency 1, 2, 4, ..., 512. */
  private static TableStore table() {
    TableStore t = new TableStore(Fixtures.config("t", 2, TableConfigs.sgd(1f)), 0, 1);
    for (int i = 0; i < 10; i++) {
      t.findOrInsert(PackedKeys.of("k" + i), new int[] {1 << i}, new float[2]);
    }
    return t;
  }

  private static double expected(SamplerKind kind, int i, double alpha) {
    return switch (kind) {
      case UNIFORM_SAMPLER -> 0.1;
      case UNIGRAM_SAMPLER -> {
        double sum = 0;
        for (int j = 0; j < 10; j++) {
          sum += Math.pow(1 << j, alpha);
        }
        yield Math.pow(1 << i, alpha) / sum;
      }
      default -> { // rank 0 = k9 (most frequent)
        int rank = 9 - i;
        yield Math.log((rank + 2.0) / (rank + 1.0)) / Math.log(11.0);
      }
    };
  }

  @ParameterizedTest
  @EnumSource(value = SamplerKind.class, names = {"UNIFORM_SAMPLER", "LOG_UNIFORM_SAMPLER", "UNIGRAM_SAMPLER"})
  void sample_manyDraws_followTheRequestedDistribution(SamplerKind kind) {
    TableStore t = table();
    int draws = 200_000;
    SampleCandidates r = t.samplers().sample(PackedKeys.of(), draws, kind, 0.75f, 5);
    Map<String, Integer> counts = new HashMap<>();
    Map<String, Double> probs = new HashMap<>();
    for (int i = 0; i < draws; i++) {
      counts.merge(r.keys().key(i), 1, Integer::sum);
      probs.put(r.keys().key(i), r.probability()[i]);
    }
    for (int i = 0; i < 10; i++) {
      double p = expected(kind, i, 0.75);
      int c = counts.getOrDefault("k" + i, 0);
      double sd = Math.sqrt(draws * p * (1 - p));
      assertTrue(Math.abs(c - draws * p) < 5 * sd + 1, kind + " k" + i + ": " + c + " vs " + draws * p);
      assertEquals(p, probs.get("k" + i), 1e-9, "reported probability of k" + i);
    }
  }

  @Test
  void sample_positives_comeFirstWithTheirProbability() {
    TableStore t = table();
    SampleCandidates r = t.samplers().sample(PackedKeys.of("k9", "unknown"), 5,
        SamplerKind.UNIGRAM_SAMPLER, 1f, 1);
    assertEquals(7, r.keys().size());
    assertTrue(r.positive()[0] && r.positive()[1] && !r.positive()[2]);
    assertEquals("k9", r.keys().key(0));
    assertEquals(512.0 / 1023.0, r.probability()[0], 1e-12);
    assertEquals(0.0, r.probability()[1]);
    assertEquals(1023.0, r.mass(), 1e-9);
  }

  @Test
  void sample_sameSeed_sameDraws() {
    TableStore t = table();
    SampleCandidates a = t.samplers().sample(PackedKeys.of(), 50, SamplerKind.UNIGRAM_SAMPLER, 0f, 9);
    SampleCandidates b = t.samplers().sample(PackedKeys.of(), 50, SamplerKind.UNIGRAM_SAMPLER, 0f, 9);
    assertEquals(java.util.List.of(a.keys().toStrings()), java.util.List.of(b.keys().toStrings()));
  }

  @Test
  void sample_countsGrow_snapshotIsRebuilt() {
    TableStore t = table();
    t.samplers().sample(PackedKeys.of(), 1, SamplerKind.UNIGRAM_SAMPLER, 1f, 1);
    t.findOrInsert(PackedKeys.of("k0"), new int[] {10_000}, new float[2]);
    SampleCandidates r = t.samplers().sample(PackedKeys.of("k0"), 0, SamplerKind.UNIGRAM_SAMPLER, 1f, 1);
    assertEquals(10_001.0 / 11_023.0, r.probability()[0], 1e-9);
  }
}
