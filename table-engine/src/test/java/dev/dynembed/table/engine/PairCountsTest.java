package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.PackedKeys;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link PairCounts}: exact counts while an anchor's partners fit, Space-Saving's bounds past
 * that, and the sampler's draws against the exact distributions (chi-square) on a small corpus
 * with topics, by count and by positive PMI.
 */
class PairCountsTest {
  private static long h(String k) {
    return PackedKeys.of(k).hash(0);
  }

  /** 20,000 tokens over 120 words: Zipf-weighted, in sentences of one of three topics. */
  private static String[] corpus() {
    Random r = new Random(53);
    String[] tokens = new String[20_000];
    for (int i = 0; i < tokens.length; ) {
      int topic = r.nextInt(3);
      for (int j = 0; j < 12 && i < tokens.length; j++, i++) {
        boolean function = r.nextInt(3) == 0; // shared by every topic
        int rank = (int) Math.min(39, Math.floor(Math.exp(r.nextDouble() * Math.log(40))) - 1);
        tokens[i] = function ? "f" + rank : "t" + topic + "_" + rank;
      }
    }
    return tokens;
  }

  /** Every (anchor, partner) pair within 2 positions, counted exactly and into {@code pc}. */
  private static Map<String, Map<String, Long>> count(String[] t, PairCounts pc) {
    Map<String, Map<String, Long>> exact = new HashMap<>();
    for (int i = 0; i < t.length; i++) {
      for (int j = Math.max(0, i - 2); j <= Math.min(t.length - 1, i + 2); j++) {
        if (j != i) {
          exact.computeIfAbsent(t[i], k -> new HashMap<>()).merge(t[j], 1L, Long::sum);
          pc.add(h(t[i]), h(t[j]), t[j], 1);
        }
      }
    }
    return exact;
  }

  /** Each partner's count over all anchors. */
  private static Map<String, Long> marginals(Map<String, Map<String, Long>> exact) {
    Map<String, Long> marginal = new HashMap<>();
    for (Map<String, Long> m : exact.values()) {
      m.forEach((k, v) -> marginal.merge(k, v, Long::sum));
    }
    return marginal;
  }

  @Test
  void countsAreExactWhileThePartnersFit() {
    PairCounts pc = new PairCounts(256, 1000, 256);
    Map<String, Map<String, Long>> exact = count(corpus(), pc);
    Map<String, Long> marginal = marginals(exact);
    long total = marginal.values().stream().mapToLong(Long::longValue).sum();
    assertEquals(total, pc.total());
    assertEquals(exact.size(), pc.anchors());
    for (Map.Entry<String, Map<String, Long>> a : exact.entrySet()) {
      PairCounts.Partner[] kept = pc.partners(h(a.getKey()));
      assertEquals(a.getValue().size(), kept.length, a.getKey());
      for (PairCounts.Partner p : kept) {
        assertEquals(a.getValue().get(p.key()), p.count(), a.getKey() + "." + p.key());
        assertEquals(0, p.error());
        assertEquals(marginal.get(p.key()), p.marginal(), p.key());
      }
      assertEquals(a.getValue().values().stream().mapToLong(Long::longValue).sum(),
          pc.anchorTotal(h(a.getKey())));
    }
  }

  @Test
  void pastItsPartners_aSummaryKeepsSpaceSavingsBounds() {
    PairCounts pc = new PairCounts(8, 10, 16);
    Random r = new Random(7);
    Map<String, Long> exact = new HashMap<>();
    for (int i = 0; i < 50_000; i++) { // skewed over 500 partners (the first two above 1/8)
      String p = "p" + (int) Math.floor(Math.exp(r.nextDouble() * r.nextDouble()
          * Math.log(500)) - 1);
      exact.merge(p, 1L, Long::sum);
      pc.add(h("a"), h(p), p, 1);
    }
    PairCounts.Partner[] kept = pc.partners(h("a"));
    assertEquals(8, kept.length);
    Map<String, PairCounts.Partner> byKey = new HashMap<>();
    for (PairCounts.Partner p : kept) {
      long truth = exact.get(p.key());
      assertTrue(p.count() >= truth && p.count() - p.error() <= truth, p + " true " + truth);
      byKey.put(p.key(), p);
    }
    int heavy = 0;
    for (Map.Entry<String, Long> e : exact.entrySet()) {
      if (e.getValue() > 50_000 / 8) {
        heavy++;
        assertTrue(byKey.containsKey(e.getKey()), e.getKey() + " (" + e.getValue() + ") kept");
      }
    }
    assertTrue(heavy >= 2, "the stream has heavy partners: " + heavy);
    assertTrue(exact.size() > 100, "and many light ones: " + exact.size());
    assertTrue(pc.bytes() < 16 * 1024 + 2048, "bounded: " + pc.bytes());
  }

  @Test
  void drawsFollowTheCountsAndThePositivePmi_chiSquare() {
    String[] t = corpus();
    PairCounts pc = new PairCounts(256, 1000, 256);
    Map<String, Map<String, Long>> exact = count(t, pc);
    Map<String, Long> marginal = marginals(exact);
    long total = marginal.values().stream().mapToLong(Long::longValue).sum();
    for (String anchor : new String[] {"t1_0", "f0", "t2_5"}) {
      Map<String, Long> row = exact.get(anchor);
      long at = row.values().stream().mapToLong(Long::longValue).sum();
      for (PairCounts.Weight w : PairCounts.Weight.values()) {
        Map<String, Double> want = new HashMap<>();
        double sum = 0;
        for (Map.Entry<String, Long> e : row.entrySet()) {
          double x = w == PairCounts.Weight.COUNT ? e.getValue()
              : Math.max(0, Math.log((double) e.getValue() * total / ((double) at
                  * marginal.get(e.getKey()))));
          want.put(e.getKey(), x);
          sum += x;
        }
        int n = 200_000;
        PairCounts.Draws d = pc.sample(h(anchor), n, w, 99);
        Map<String, Integer> seen = new HashMap<>();
        for (int j = 0; j < n; j++) {
          seen.merge(d.keys()[j], 1, Integer::sum);
          assertEquals(want.get(d.keys()[j]) / sum, d.probability()[j], 1e-9, d.keys()[j]);
        }
        double chi2 = 0;
        int cells = 0;
        for (Map.Entry<String, Double> e : want.entrySet()) {
          double expected = n * e.getValue() / sum;
          if (expected == 0) {
            assertFalse(seen.containsKey(e.getKey()), e.getKey() + ": weight 0, never drawn");
            continue;
          }
          double o = seen.getOrDefault(e.getKey(), 0);
          chi2 += (o - expected) * (o - expected) / expected;
          cells++;
        }
        int df = cells - 1;
        // the 0.999 quantile of chi-square(df), Wilson-Hilferty
        double z = 3.09;
        double q = df * Math.pow(1 - 2.0 / (9 * df) + z * Math.sqrt(2.0 / (9 * df)), 3);
        assertTrue(df >= 10, anchor + " has partners: " + df);
        assertTrue(chi2 < q, anchor + " " + w + ": chi-square " + chi2 + " over " + df
            + " degrees of freedom (0.999 quantile " + q + ")");
      }
    }
    // PPMI prefers a topic word's own topic: its partners' PMI mass within the topic is larger
    PairCounts.Draws d = pc.sample(h("t1_0"), 20_000, PairCounts.Weight.PPMI, 5);
    long same = java.util.Arrays.stream(d.keys()).filter(k -> k.startsWith("t1_")).count();
    PairCounts.Draws c = pc.sample(h("t1_0"), 20_000, PairCounts.Weight.COUNT, 5);
    long sameByCount = java.util.Arrays.stream(c.keys()).filter(k -> k.startsWith("t1_")).count();
    assertTrue(same > sameByCount, "PPMI " + same + " vs count " + sameByCount);
  }

  /** An anchor's draws table is built again once anything was counted since (PPMI reads T). */
  @Test
  void drawsFollowTheCountsAsTheyChange() {
    PairCounts pc = new PairCounts(8, 10, 16);
    pc.add(h("a"), h("x"), "x", 1);
    pc.add(h("a"), h("y"), "y", 1);
    PairCounts.Draws d = pc.sample(h("a"), 100, PairCounts.Weight.COUNT, 1);
    for (double p : d.probability()) {
      assertEquals(0.5, p, 1e-12);
    }
    pc.add(h("a"), h("x"), "x", 2);
    d = pc.sample(h("a"), 100, PairCounts.Weight.COUNT, 1);
    for (int j = 0; j < 100; j++) {
      assertEquals(d.keys()[j].equals("x") ? 0.75 : 0.25, d.probability()[j], 1e-12);
    }
    // PPMI: x 3 of a's 4 pairs, m(x) = 3, T = 4: log(3*4/(4*3)) = 0, y: log(1*4/(4*1)) = 0
    assertEquals(0, pc.sample(h("a"), 10, PairCounts.Weight.PPMI, 1).keys().length);
    pc.add(h("b"), h("z"), "z", 4); // another anchor's pairs: T = 8, so both now have PMI log 2
    d = pc.sample(h("a"), 100, PairCounts.Weight.PPMI, 1);
    assertEquals(100, d.keys().length);
    for (double p : d.probability()) {
      assertEquals(0.5, p, 1e-12);
    }
  }

  @Test
  void boundsAndBadInput() {
    PairCounts pc = new PairCounts(4, 2, 4);
    assertTrue(pc.add(h("a"), h("x"), "x", 3));
    assertTrue(pc.add(h("b"), h("x"), "x", 1));
    assertFalse(pc.add(h("c"), h("x"), "x", 5), "a third anchor past max anchors");
    assertEquals(5, pc.dropped());
    assertEquals(4, pc.total());
    assertEquals(0, pc.sample(h("c"), 10, PairCounts.Weight.COUNT, 1).keys().length);
    assertEquals("a pair's count must be >= 1 but was 0", assertThrows(
        IllegalArgumentException.class, () -> pc.add(h("a"), h("y"), "y", 0)).getMessage());
    assertThrows(IllegalArgumentException.class, () -> new PairCounts(0, 1, 4));
    assertThrows(IllegalArgumentException.class, () -> new PairCounts(4, 0, 4));
    assertThrows(IllegalArgumentException.class,
        () -> pc.sample(h("a"), -1, PairCounts.Weight.COUNT, 1));
  }
}
