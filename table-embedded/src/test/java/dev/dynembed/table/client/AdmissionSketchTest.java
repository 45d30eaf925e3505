package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bounded admission (admission_sketch_kib): a key is admitted no later than exact counting would
 * admit it, the memory of pending counts is fixed, few keys are admitted early, and the sketch
 * survives checkpoints (exactly on the same shards, as an upper bound after re-sharding).
 */
class AdmissionSketchTest {
  @TempDir Path dir;

  private static final int MIN_COUNT = 5;
  private static final int KIB = 1024;

  static TableConfig config(int kib) {
    return TableConfigs.builder("skt", 8).setOptimizer(TableConfigs.sgd(0.5f))
        .setMinCount(MIN_COUNT).setAdmissionSketchKib(kib).build();
  }

  /** Zipf-like keys: a head of frequent keys, a long tail seen once or twice. */
  private static String key(Random r) {
    return "k" + (int) Math.exp(r.nextDouble() * Math.log(200_000));
  }

  @Test
  void neverLaterThanExact_fixedMemory_fewEarlyAdmissions() throws Exception {
    try (TableClient c = TableClients.inProcess(dir)) {
      EmbeddingTable exact = c.createTable(config(0).toBuilder().setName("exact").build());
      EmbeddingTable sk = c.createTable(config(KIB));
      Map<String, Integer> truth = new HashMap<>();
      Random r = new Random(1);
      for (int step = 0; step < 100; step++) {
        String[] batch = new String[1000];
        for (int i = 0; i < batch.length; i++) {
          batch[i] = key(r);
          truth.merge(batch[i], 1, Integer::sum);
        }
        exact.count(batch, true);
        sk.count(batch, true);
      }
      String[] keys = truth.keySet().toArray(new String[0]);
      KeyCounts e = exact.count(keys, false);
      KeyCounts s = sk.count(keys, false);
      int early = 0;
      int below = 0;
      for (int i = 0; i < keys.length; i++) {
        long t = truth.get(keys[i]);
        assertEquals(t >= MIN_COUNT, e.admitted()[i], keys[i]);
        if (e.admitted()[i]) {
          assertTrue(s.admitted()[i], keys[i] + " admitted late by the sketch");
        } else {
          below++;
          early += s.admitted()[i] ? 1 : 0;
          assertTrue(s.frequencies()[i] >= t, keys[i] + " undercounted");
        }
      }
      // 100,000 occurrences, ~28k keys below min_count; 1 MiB of counters (65,536 per row)
      double rate = (double) early / below;
      assertTrue(rate < 0.05, "over-admission " + early + " of " + below + " = " + rate);
      var counters = sk.describe().getCounters();
      assertEquals(0, counters.getPendingKeys());
      var exactCounters = exact.describe().getCounters();
      assertEquals(below, exactCounters.getPendingKeys());
      assertTrue(counters.getBytesUsed() < exactCounters.getBytesUsed(),
          counters.getBytesUsed() + " vs " + exactCounters.getBytesUsed());
    }
  }

  @Test
  void sketch_survivesCheckpoints_exactlyOrAsAnUpperBound() throws Exception {
    Map<String, Integer> truth = new HashMap<>();
    Random r = new Random(2);
    try (LoopbackCluster two = new LoopbackCluster(2, dir); TableClient c = two.client()) {
      EmbeddingTable t = c.createTable(config(4));
      for (int i = 0; i < 3000; i++) {
        String k = key(r);
        t.count(new String[] {k}, true);
        truth.merge(k, 1, Integer::sum);
      }
      t.save(dir.resolve("ck"), 3);
      String[] keys = truth.keySet().toArray(new String[0]);
      KeyCounts before = t.count(keys, false);
      try (LoopbackCluster same = new LoopbackCluster(2, dir);
          TableClient c2 = same.client();
          LoopbackCluster three = new LoopbackCluster(3, dir);
          TableClient c3 = three.client()) {
        EmbeddingTable back = c2.createTable(config(4));
        back.restore(dir.resolve("ck"));
        KeyCounts after = back.count(keys, false);
        EmbeddingTable resharded = c3.createTable(config(4));
        resharded.restore(dir.resolve("ck"));
        KeyCounts r3 = resharded.count(keys, false);
        for (int i = 0; i < keys.length; i++) {
          assertEquals(before.admitted()[i], after.admitted()[i], keys[i]);
          assertEquals(before.frequencies()[i], after.frequencies()[i], keys[i]);
          assertTrue(r3.frequencies()[i] >= truth.get(keys[i]), keys[i]);
          assertTrue(r3.admitted()[i] || truth.get(keys[i]) < MIN_COUNT, keys[i]);
        }
      }
    }
  }

  @Test
  void badSketchSettings_areRefused() {
    try (TableClient c = TableClients.inProcess(dir)) {
      TableException e = assertThrows(TableException.class,
          () -> c.createTable(config(64).toBuilder().setMinCount(0).build()));
      assertTrue(e.getMessage().contains("needs min_count > 1"), e.getMessage());
      e = assertThrows(TableException.class, () -> c.createTable(config(1 << 21)));
      assertTrue(e.getMessage().contains("admission_sketch_kib must be in [0, 1048576]"),
          e.getMessage());
    }
  }
}
