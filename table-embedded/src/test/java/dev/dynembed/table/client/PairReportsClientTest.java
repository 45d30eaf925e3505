package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.Cooccurrence;
import dev.dynembed.table.v1.PartnerWeight;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link EmbeddingTable#reportPairs} and {@link EmbeddingTable#partners} in process and through
 * loopback shards (design 0026): each anchor's pairs reach its owner and are counted exactly
 * while its partners fit; draws by count are the same whatever the layout; a resharding moves
 * the summaries with their anchors.
 */
class PairReportsClientTest {
  @TempDir Path dir;

  private static final int ANCHORS = 60;

  private static TableConfig config() {
    return TableConfigs.builder("c", 8).setOptimizer(TableConfigs.sgd(1f))
        .setCooccurrence(Cooccurrence.newBuilder().setPartnersPerKey(64).setMaxAnchors(10_000)
            .setSketchKib(16)).build();
  }

  /** Anchors in three topics; each anchor's partners are 20 words of its topic. */
  private static List<String[][]> stream(int calls, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    List<String[][]> out = new ArrayList<>();
    for (int c = 0; c < calls; c++) {
      String[] a = new String[100];
      String[] p = new String[100];
      for (int i = 0; i < a.length; i++) {
        int anchor = r.nextInt(ANCHORS);
        a[i] = "a" + anchor + (anchor % 5 == 0 ? "·é" : "");
        p[i] = "t" + anchor % 3 + "w" + r.nextInt(20);
      }
      out.add(new String[][] {a, p});
    }
    return out;
  }

  private static String[] anchors() {
    String[] a = new String[ANCHORS];
    for (int i = 0; i < ANCHORS; i++) {
      a[i] = "a" + i + (i % 5 == 0 ? "·é" : "");
    }
    return a;
  }

  /** Exact pair counts of the stream, by anchor then partner. */
  private static Map<String, Map<String, Integer>> exact(List<String[][]> s) {
    Map<String, Map<String, Integer>> m = new HashMap<>();
    for (String[][] c : s) {
      for (int i = 0; i < c[0].length; i++) {
        m.computeIfAbsent(c[0][i], k -> new HashMap<>()).merge(c[1][i], 2, Integer::sum);
      }
    }
    return m;
  }

  private static void report(EmbeddingTable t, List<String[][]> s) {
    int step = 0;
    for (String[][] c : s) {
      int[] twice = new int[c[0].length];
      java.util.Arrays.fill(twice, 2);
      assertEquals(c[0].length, t.reportPairs(c[0], c[1], twice, step++));
    }
  }

  @Test
  void pairsReachTheirAnchorsShards_andDrawsByCountDoNotDependOnTheLayout() throws Exception {
    List<String[][]> s = stream(60, 3);
    Map<String, Map<String, Integer>> truth = exact(s);
    String[] anchors = anchors();
    EmbeddingTable.PartnerDraws[] byLayout = new EmbeddingTable.PartnerDraws[2];
    for (int layout = 0; layout < 2; layout++) {
      List<AutoCloseable> keep = new ArrayList<>();
      try (TableClient c = LoopbackCluster.client(layout == 0 ? 0 : 2,
          dir.resolve("l" + layout), keep)) {
        EmbeddingTable t = c.createTable(config());
        report(t, s);
        assertEquals(60 * 100 * 2L, t.describe().getCounters().getPairsCounted());
        assertEquals(ANCHORS, t.describe().getCounters().getPairAnchors());
        EmbeddingTable.PartnerDraws d = t.partners(anchors, 400, PartnerWeight.COUNT_WEIGHT, 5);
        int[] at = d.offsets();
        for (int i = 0; i < ANCHORS; i++) {
          assertEquals(400, d.counts()[i], anchors[i]);
          Map<String, Integer> mine = truth.get(anchors[i]);
          int sum = mine.values().stream().mapToInt(Integer::intValue).sum();
          Map<String, Integer> drawn = new HashMap<>();
          for (int j = at[i]; j < at[i + 1]; j++) {
            assertTrue(mine.containsKey(d.keys()[j]), anchors[i] + " drew " + d.keys()[j]);
            assertEquals((float) mine.get(d.keys()[j]) / sum, d.probability()[j], 1e-6f,
                "a draw's probability is its exact share of the anchor's pairs");
            drawn.merge(d.keys()[j], 1, Integer::sum);
          }
          assertTrue(drawn.size() > mine.size() / 2, anchors[i] + " drew " + drawn.size()
              + " of its " + mine.size() + " partners");
        }
        byLayout[layout] = d;
        // PPMI draws stay within the anchor's partners
        EmbeddingTable.PartnerDraws p = t.partners(anchors, 20, PartnerWeight.PPMI_WEIGHT, 6);
        int[] po = p.offsets();
        for (int i = 0; i < ANCHORS; i++) {
          for (int j = po[i]; j < po[i + 1]; j++) {
            assertTrue(truth.get(anchors[i]).containsKey(p.keys()[j]));
          }
        }
      } finally {
        for (AutoCloseable k : keep) {
          k.close();
        }
      }
    }
    assertArrayEquals(byLayout[0].keys(), byLayout[1].keys(), "in process = 2 shards");
    assertArrayEquals(byLayout[0].probability(), byLayout[1].probability());
  }

  @Test
  void aReshardingMovesTheSummariesWithTheirAnchors() throws Exception {
    List<String[][]> s = stream(40, 9);
    String[] anchors = anchors();
    try (LoopbackCluster cluster = new LoopbackCluster(3, dir.resolve("shards"))) {
      SlotMap two = SlotMap.implicit(2).extended(3, 1);
      for (int i = 0; i < 3; i++) {
        cluster.engine(i).installSlotMap(two);
      }
      try (TableClient admin = cluster.client()) {
        EmbeddingTable t = admin.createTable(config());
        report(t, s);
        EmbeddingTable.PartnerDraws before = t.partners(anchors, 50, PartnerWeight.COUNT_WEIGHT,
            8);
        Resharding.Result grown = Resharding.rebalance(admin, 3, x -> { });
        assertTrue(grown.map().slotsOf(2) > 2700);
        Set<Integer> owners = new HashSet<>();
        for (String a : anchors) {
          owners.add(grown.map().ownerOf(dev.dynembed.table.common.KeyHashing.hash(a)));
        }
        assertEquals(3, owners.size(), "anchors on every shard");
        EmbeddingTable t3 = admin.openTable("c");
        EmbeddingTable.PartnerDraws after = t3.partners(anchors, 50, PartnerWeight.COUNT_WEIGHT,
            8);
        assertArrayEquals(before.keys(), after.keys(), "the same counts on the new owners");
        assertArrayEquals(before.probability(), after.probability());
        assertEquals(ANCHORS, t3.describe().getCounters().getPairAnchors(),
            "each summary once: the sources dropped what they gave away");
        t3.reportPairs(new String[] {anchors[1]}, new String[] {"new"}, null, 99);
        EmbeddingTable.PartnerDraws one = t3.partners(new String[] {anchors[1]}, 2000,
            PartnerWeight.COUNT_WEIGHT, 1);
        assertTrue(java.util.Arrays.asList(one.keys()).contains("new"), "counted on its owner");
      }
    }
  }

  @Test
  void aTableWithoutCooccurrence_refusesByName() {
    try (TableClient c = TableClients.inProcess()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("plain", 4).build());
      TableException e = assertThrows(TableException.class,
          () -> t.reportPairs(new String[] {"a"}, new String[] {"b"}, null, 0));
      assertTrue(e.getMessage().contains("keeps no co-occurrence counts"), e.getMessage());
      e = assertThrows(TableException.class, () -> c.openTable("plain").partners(
          new String[] {"a"}, 1, PartnerWeight.PPMI_WEIGHT, 0));
      assertTrue(e.getMessage().contains("keeps no co-occurrence counts"), e.getMessage());
      EmbeddingTable p = c.createTable(config());
      e = assertThrows(TableException.class,
          () -> p.reportPairs(new String[] {"a", "b"}, new String[] {"b"}, null, 0));
      assertTrue(e.getMessage().contains("2 anchors need as many partners"), e.getMessage());
    }
  }
}
