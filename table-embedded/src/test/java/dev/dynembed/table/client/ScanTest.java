package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.EvictionPolicy;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** A scan returns every row once, with its values, frequency and step; in pages; per store. */
class ScanTest {
  @TempDir Path dir;

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void scan_returnsEveryRowOnce_andNoticesARebuiltStore(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    TableClient c;
    if (shards == 0) {
      c = TableClients.inProcess(dir);
    } else {
      LoopbackCluster cluster = new LoopbackCluster(shards, dir);
      keep.add(cluster);
      c = cluster.client();
    }
    try (c) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("scan", 5)
          .setOptimizer(TableConfigs.sgd(0.1f)).build());
      String[] keys = new String[3000];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (i % 3 == 0 ? "ключ" : "k") + i;
      }
      t.findOrInsert(keys);
      t.findOrInsert("k1", "k1");
      t.applyGradients(new String[] {"k2"}, new float[] {1, 1, 1, 1, 1}, 0f, 7);
      Map<String, float[]> seen = new HashMap<>();
      Map<String, long[]> meta = new HashMap<>();
      int[] pages = {0};
      t.scan(777, p -> {
        pages[0]++;
        assertTrue(p.keys().length <= 777);
        for (int i = 0; i < p.keys().length; i++) {
          float[] row = java.util.Arrays.copyOfRange(p.rows(), i * 5, i * 5 + 5);
          assertEquals(null, seen.put(p.keys()[i], row), "returned twice: " + p.keys()[i]);
          meta.put(p.keys()[i], new long[] {p.frequencies()[i], p.steps()[i]});
        }
      });
      assertEquals(keys.length, seen.size());
      assertTrue(pages[0] >= 4, pages[0] + " pages");
      float[] rows = t.find(keys).rows();
      for (int i = 0; i < keys.length; i++) {
        assertArrayEquals(java.util.Arrays.copyOfRange(rows, i * 5, i * 5 + 5), seen.get(keys[i]));
      }
      assertArrayEquals(new long[] {3, 0}, meta.get("k1"));
      assertArrayEquals(new long[] {1, 7}, meta.get("k2"));
      // a store replaced mid-scan (an eviction) fails the next page: the scan starts over
      TableException e = assertThrows(TableException.class, () -> t.scan(100, p -> {
        t.evict(0, 0, 2000, EvictionPolicy.LFU);
      }));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code(), e.getMessage());
      assertTrue(e.getMessage().contains("start the scan again"), e.getMessage());
      int[] after = {0};
      t.scan(4096, p -> after[0] += p.keys().length);
      assertEquals(t.describe().getCounters().getKeys(), after[0]);
      assertThrows(TableException.class, () -> t.scan(1 << 20, p -> { }));
    } finally {
      for (AutoCloseable a : keep) {
        a.close();
      }
    }
  }
}
