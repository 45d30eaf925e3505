package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.Cooccurrence;
import dev.dynembed.table.v1.PairReport;
import dev.dynembed.table.v1.PartnerWeight;
import dev.dynembed.table.v1.PartnersRequest;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.WriteRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pair reports on a shard (TableConfig.cooccurrence, design 0026): written as write items,
 * counted in the order the shard logs them, so that a follower, a replay and a snapshot hold
 * exactly the primary's Space-Saving summaries; checkpoints carry them to another layout; bad
 * reports and configs are refused by name.
 */
class PairReportsTest {
  @TempDir Path dir;

  private static final int ANCHORS = 40;

  private static TableConfig config(int partners, int maxAnchors) {
    return TableConfigs.normalize(TableConfigs.builder("c", 4).setOptimizer(TableConfigs.sgd(1f))
        .setCooccurrence(Cooccurrence.newBuilder().setPartnersPerKey(partners)
            .setMaxAnchors(maxAnchors).setSketchKib(4)).build());
  }

  /** Calls of {@code call} pairs: anchors a0..a39, partners Zipf over {@code vocab} words. */
  private static List<String[][]> stream(int calls, int call, int vocab, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    List<String[][]> out = new ArrayList<>();
    for (int c = 0; c < calls; c++) {
      String[] a = new String[call];
      String[] p = new String[call];
      for (int i = 0; i < call; i++) {
        int anchor = (int) Math.floor(Math.pow(ANCHORS + 1, r.nextDouble())) - 1;
        a[i] = "a" + anchor;
        p[i] = "w" + ((int) Math.floor(Math.pow(vocab + 1, r.nextDouble())) - 1 + anchor) % vocab;
      }
      out.add(new String[][] {a, p});
    }
    return out;
  }

  private static void report(ShardEngine e, String[] anchors, String[] partners, int[] counts) {
    PairReport.Builder p = PairReport.newBuilder().setPartners(PackedKeys.of(partners).toProto());
    for (int i = 0; counts != null && i < counts.length; i++) {
      p.addCounts(counts[i]);
    }
    e.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder().setTable("c")
        .setKeys(PackedKeys.of(anchors).toProto()).setPairs(p)).build(), ShardState::checkWrite);
  }

  /** Every anchor's summary in its own order, and the shard's totals. */
  private static Map<String, Object> counts(ShardEngine e) {
    PairCounts pc = e.get("c").pairs();
    Map<String, Object> m = new HashMap<>();
    for (int a = 0; a < ANCHORS; a++) {
      long h = KeyHashing.hash("a" + a);
      m.put("a" + a, List.of(pc.partners(h)));
      m.put("a" + a + "/total", pc.anchorTotal(h));
    }
    m.put("total", pc.total());
    m.put("dropped", pc.dropped());
    m.put("anchors", pc.anchors());
    return m;
  }

  /** Equal counts; else names the entries that differ (the whole maps are long). */
  private static void assertSame(Map<String, Object> want, Map<String, Object> got, String what) {
    List<String> differ = new ArrayList<>();
    for (String k : want.keySet()) {
      if (!want.get(k).equals(got.get(k))) {
        differ.add(k);
      }
    }
    if (!differ.isEmpty()) {
      String first = differ.get(0);
      throw new AssertionError(what + ": " + differ.size() + " entries differ, " + differ
          + "; " + first + " is " + got.get(first) + " instead of " + want.get(first));
    }
  }

  /**
   * Two threads report concurrently into a table whose summaries overflow (8 partners kept of
   * 300) and whose anchors overflow (30 of 40): the counts depend on the order the reports met.
   * A follower applying the log, a restart from the log and the snapshot it takes hold exactly
   * the primary's summaries, errors and totals.
   */
  @Test
  void reportsAreCountedInLogOrder_soAFollowerAReplayAndASnapshotAgree() throws Exception {
    Fixtures.Logged shard = Fixtures.logged(dir, ShardLog.Fsync.NO);
    ShardEngine e = shard.engine();
    e.create(config(8, 30));
    List<Fixtures.Work> work = new ArrayList<>();
    for (int w = 0; w < 2; w++) {
      List<String[][]> calls = stream(400, 48, 300, 17 + w);
      work.add(() -> {
        for (String[][] c : calls) {
          report(e, c[0], c[1], null);
        }
      });
    }
    Fixtures.concurrently(work);
    Map<String, Object> live = counts(e);
    PairCounts pc = e.get("c").pairs();
    assertEquals(2 * 400 * 48L, pc.total() + pc.dropped());
    assertTrue(pc.dropped() > 0, "anchors overflowed");
    assertEquals(30, pc.anchors());
    var info = e.info(e.get("c")).getCounters();
    assertEquals(pc.total(), info.getPairsCounted());
    assertEquals(30, info.getPairAnchors());

    Fixtures.recoveries(dir, shard, (how, got) -> assertSame(live, counts(got), how));
    // and the snapshot goes on counting as the primary would
    List<String[][]> more = stream(20, 48, 300, 99);
    ShardEngine fourth = new ShardEngine(0, 1, dir);
    ShardState s4 = ShardState.recover(fourth, shard.states(), ShardLog.Fsync.NO, 1L << 30, x -> { });
    for (String[][] c : more) {
      report(fourth, c[0], c[1], null);
    }
    PairCounts expect = e.get("c").pairs();
    for (String[][] c : more) { // the primary, had it gone on
      for (int i = 0; i < c[0].length; i++) {
        expect.add(KeyHashing.hash(c[0][i]), KeyHashing.hash(c[1][i]), c[1][i], 1);
      }
    }
    assertSame(counts(e), counts(fourth), "restored, then counting on");
    s4.close(false);
  }

  /**
   * A checkpoint of one shard restored on two: each anchor's summary goes to its owner, exact
   * (counts, errors, order); the totals add up; draws by count are the same on the owner as on
   * the single shard (a function of the counts, the anchor and the seed).
   */
  @Test
  void aCheckpoint_carriesTheSummariesToAnotherLayout() throws Exception {
    Files.createDirectories(dir.resolve("one"));
    Files.createDirectories(dir.resolve("two"));
    ShardEngine one = new ShardEngine(0, 1, dir.resolve("one"));
    one.create(config(16, 1000));
    for (String[][] c : stream(200, 64, 60, 5)) {
      int[] counts = new int[c[0].length];
      java.util.Arrays.fill(counts, 3);
      report(one, c[0], c[1], counts);
    }
    CheckpointFile f = one.save("c", "ckpt", 7);
    PairCounts src = one.get("c").pairs();
    long total = 0;
    for (int s = 0; s < 2; s++) {
      ShardEngine part = new ShardEngine(s, 2, dir.resolve("two"));
      Path ck = dir.resolve("two").resolve("ckpt");
      Files.createDirectories(ck);
      Files.copy(dir.resolve("one").resolve("ckpt").resolve(f.getName()), ck.resolve(f.getName()),
          java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      part.restore("c", "ckpt", List.of(f));
      PairCounts got = part.get("c").pairs();
      total += got.total();
      for (int a = 0; a < ANCHORS; a++) {
        long h = KeyHashing.hash("a" + a);
        if (KeyHashing.shardOf(h, 2) != s) {
          assertEquals(0, got.partners(h).length, "a" + a + " is not shard " + s + "'s");
          continue;
        }
        PairCounts.Partner[] want = src.partners(h);
        PairCounts.Partner[] have = got.partners(h);
        assertEquals(want.length, have.length);
        for (int i = 0; i < want.length; i++) {
          assertEquals(want[i].key(), have[i].key());
          assertEquals(want[i].count(), have[i].count());
          assertEquals(want[i].error(), have[i].error());
        }
        var req = PartnersRequest.newBuilder().setTable("c").setNumDraws(50)
            .setWeight(PartnerWeight.COUNT_WEIGHT).setSeed(3)
            .setAnchors(PackedKeys.of("a" + a).toProto()).build();
        assertEquals(ProtoItems.partners(one, req), ProtoItems.partners(part, req));
      }
    }
    assertEquals(src.total(), total);
  }

  @Test
  void badReportsAndConfigs_areRefusedByName() {
    ShardEngine e = new ShardEngine(0, 1, dir);
    e.create(config(4, 10));
    e.create(TableConfigs.normalize(TableConfigs.builder("plain", 4).build()));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "keeps no co-occurrence counts",
        () -> e.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
            .setTable("plain").setKeys(PackedKeys.of("a").toProto()).setPairs(
                PairReport.newBuilder().setPartners(PackedKeys.of("b").toProto()))).build(),
            ShardState::checkWrite));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "2 anchors but 1 partners",
        () -> report(e, new String[] {"a", "b"}, new String[] {"x"}, null));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "pair 1 has count 0",
        () -> report(e, new String[] {"a", "b"}, new String[] {"x", "y"}, new int[] {1, 0}));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "2 pair counts",
        () -> report(e, new String[] {"a"}, new String[] {"x"}, new int[] {1, 1}));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "pair report carries anchors and partners",
        () -> e.write(WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
            .setTable("c").setKeys(PackedKeys.of("a").toProto())
            .setGradients(dev.dynembed.table.common.Rows.encode(new float[4]))
            .setPairs(PairReport.newBuilder().setPartners(PackedKeys.of("b").toProto())))
            .build(), ShardState::checkWrite));
    assertEquals(0, e.get("c").pairs().total(), "nothing counted by a refused call");
    var draws = PartnersRequest.newBuilder().setTable("c").setAnchors(PackedKeys.of("a").toProto());
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "num_draws must be in [1, 4096]",
        () -> ProtoItems.partners(e, draws.setNumDraws(0).build()));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "keeps no co-occurrence counts",
        () -> ProtoItems.partners(e, draws.setTable("plain").setNumDraws(1).build()));
    report(e, new String[] {"a", "a"}, new String[] {"x", "y"}, new int[] {2, 1});
    var got = ProtoItems.partners(e, draws.setTable("c").setNumDraws(3)
        .setWeight(PartnerWeight.COUNT_WEIGHT).build());
    assertEquals(List.of(3), got.getCountsList());
    // a's partners occur with a alone: PMI log(c(a,b) T / (c(a) m(b))) = 0, no positive weight
    assertEquals(List.of(0), ProtoItems.partners(e, draws.setWeight(PartnerWeight.PPMI_WEIGHT)
        .build()).getCountsList());
    var none = ProtoItems.partners(e, PartnersRequest.newBuilder().setTable("c").setNumDraws(3)
        .setAnchors(PackedKeys.of("never").toProto()).build());
    assertEquals(List.of(0), none.getCountsList(), "an anchor without partners draws none");
    for (int[] bad : new int[][] {{0, 10, 4}, {2000, 10, 4}, {4, 0, 4}, {4, 10, 0}}) {
      TableConfig c = TableConfigs.builder("x", 4).setCooccurrence(Cooccurrence.newBuilder()
          .setPartnersPerKey(bad[0]).setMaxAnchors(bad[1]).setSketchKib(bad[2])).build();
      Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "cooccurrence.",
          () -> TableConfigs.normalize(c));
    }
  }

  /** The same seed draws the same partners for an anchor wherever it stands in the batch. */
  @Test
  void drawsDependOnTheAnchorNotItsPlaceInTheBatch() {
    ShardEngine e = new ShardEngine(0, 1, dir);
    e.create(config(16, 100));
    for (String[][] c : stream(50, 64, 30, 9)) {
      report(e, c[0], c[1], null);
    }
    var first = ProtoItems.partners(e, PartnersRequest.newBuilder().setTable("c").setNumDraws(5)
        .setSeed(11).setAnchors(PackedKeys.of("a1", "a2", "a1").toProto()).build());
    var moved = ProtoItems.partners(e, PartnersRequest.newBuilder().setTable("c").setNumDraws(5)
        .setSeed(11).setAnchors(PackedKeys.of("a2", "a1", "a3", "a1").toProto()).build());
    String[] f = PackedKeys.fromProto(first.getKeys(), 256, "k").toStrings();
    String[] m = PackedKeys.fromProto(moved.getKeys(), 256, "k").toStrings();
    assertArrayEquals(java.util.Arrays.copyOfRange(f, 0, 5), java.util.Arrays.copyOfRange(m, 5, 10),
        "a1's first draws");
    assertArrayEquals(java.util.Arrays.copyOfRange(f, 5, 10), java.util.Arrays.copyOfRange(m, 0, 5),
        "a2's");
    assertArrayEquals(java.util.Arrays.copyOfRange(f, 10, 15),
        java.util.Arrays.copyOfRange(m, 15, 20), "a1's second draws");
    assertTrue(!java.util.Arrays.equals(java.util.Arrays.copyOfRange(f, 0, 5),
        java.util.Arrays.copyOfRange(f, 10, 15)), "a repeated anchor draws anew");
  }
}
