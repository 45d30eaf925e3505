package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Admission by count (min_count): a key gets a row once counted min_count times. */
class AdmissionTest {
  @TempDir Path dir;

  static TableConfig config() {
    return TableConfigs.builder("adm", 8).setOptimizer(TableConfigs.sgd(0.5f))
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 3)).setMinCount(3).build();
  }

  private static TableClient client(int shards, Path dir, LoopbackCluster[] keep)
      throws Exception {
    if (shards == 0) {
      return TableClients.inProcess(dir);
    }
    keep[0] = new LoopbackCluster(shards, dir);
    return keep[0].client();
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void keyGetsItsRow_onlyAtMinCount_andNoCountIsLost(int shards) throws Exception {
    LoopbackCluster[] cluster = new LoopbackCluster[1];
    try (TableClient c = client(shards, dir, cluster)) {
      EmbeddingTable t = c.createTable(config());
      KeyCounts k = t.count(new String[] {"a", "b", "a"}, true);
      assertArrayEquals(new boolean[] {false, false, false}, k.admitted());
      assertArrayEquals(new long[] {2, 1, 2}, k.frequencies());
      assertEquals(0, t.describe().getCounters().getKeys());
      assertEquals(2, t.describe().getCounters().getPendingKeys());
      // not admitted: zero rows, no row created, gradients dropped, reporting counts nothing
      assertArrayEquals(new float[16], t.findOrInsert(new String[] {"a", "b"}, false));
      assertEquals(0, t.applyGradients(new String[] {"a"}, new float[8], 0f, 1));
      assertFalse(t.find("a").found()[0]);
      assertArrayEquals(new long[] {2}, t.count(new String[] {"a"}, false).frequencies());
      // the third occurrence admits "a" with frequency 3 and its initializer row
      k = t.count(new String[] {"a", "b"}, true);
      assertArrayEquals(new boolean[] {true, false}, k.admitted());
      assertArrayEquals(new long[] {3, 2}, k.frequencies());
      FindResult f = t.find("a");
      assertTrue(f.found()[0]);
      assertFalse(Arrays.equals(new float[8], f.rows()));
      assertEquals(3, t.describe().getCounters().getTotalFrequency()); // admitted keys only
      assertEquals(1, t.describe().getCounters().getPendingKeys());
      // findOrInsert counts toward admission too
      float[] rows = t.findOrInsert("b", "c");
      assertTrue(t.find("b").found()[0]);
      assertArrayEquals(t.find("b").rows(), Arrays.copyOfRange(rows, 0, 8));
      assertArrayEquals(new float[8], Arrays.copyOfRange(rows, 8, 16));
      assertEquals(1, t.applyGradients(new String[] {"b", "c"}, new float[16], 0f, 2));
    } finally {
      if (cluster[0] != null) {
        cluster[0].close();
      }
    }
  }

  @Test
  void concurrentCounting_admitsOnce_withExactCounts() throws Exception {
    try (TableClient c = TableClients.inProcess(dir)) {
      EmbeddingTable t = c.createTable(config());
      Thread[] threads = new Thread[4];
      for (int i = 0; i < threads.length; i++) {
        threads[i] = new Thread(() -> {
          for (int r = 0; r < 500; r++) {
            t.count(new String[] {"w" + (r % 50)}, true);
          }
        });
        threads[i].start();
      }
      for (Thread th : threads) {
        th.join();
      }
      KeyCounts k = t.count(java.util.stream.IntStream.range(0, 50).mapToObj(i -> "w" + i)
          .toArray(String[]::new), false);
      for (int i = 0; i < 50; i++) {
        assertTrue(k.admitted()[i]);
        assertEquals(40, k.frequencies()[i]);
      }
      assertEquals(2000, t.describe().getCounters().getTotalFrequency());
      assertEquals(0, t.describe().getCounters().getPendingKeys());
    }
  }

  @Test
  void checkpoint_keepsAdmissionCounts_acrossReSharding() throws Exception {
    Map<String, Integer> seen = new HashMap<>();
    Random rnd = new Random(5);
    try (LoopbackCluster two = new LoopbackCluster(2, dir); TableClient c = two.client()) {
      EmbeddingTable t = c.createTable(config());
      for (int i = 0; i < 400; i++) {
        String key = "k" + rnd.nextInt(120);
        t.count(new String[] {key}, true);
        seen.merge(key, 1, Integer::sum);
      }
      t.save(dir.resolve("ck"), 9);
    }
    try (LoopbackCluster three = new LoopbackCluster(3, dir); TableClient c = three.client();
        TableClient local = TableClients.inProcess(dir)) {
      for (EmbeddingTable t : new EmbeddingTable[] {c.createTable(config()),
          local.createTable(config())}) {
        t.restore(dir.resolve("ck"));
        String[] keys = seen.keySet().toArray(new String[0]);
        KeyCounts k = t.count(keys, false);
        for (int i = 0; i < keys.length; i++) {
          assertEquals((long) seen.get(keys[i]), k.frequencies()[i], keys[i]);
          assertEquals(seen.get(keys[i]) >= 3, k.admitted()[i], keys[i]);
        }
        // one more occurrence of a pending key with count 2 admits it
        String two = seen.entrySet().stream().filter(e -> e.getValue() == 2).findFirst()
            .orElseThrow().getKey();
        assertTrue(t.count(new String[] {two}, true).admitted()[0]);
      }
    }
  }
}
