package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pooled lookups and pooled gradients on 2 real loopback shards give what reading the rows,
 * pooling them here and sending per-key gradients gives (in process), step after step.
 */
class PooledLookupTest {
  @TempDir Path dir;

  private static final int DIM = 8;

  static TableConfig config() {
    return TableConfigs.builder("bag", DIM).setOptimizer(TableConfigs.adagrad(0.2f, 0.1f, 1e-8f))
        .setInitializer(TableConfigs.normal(0f, 0.3f, 5)).build();
  }

  /** A batch of bags: distinct keys and the bags over them (random weights, mean-like scales). */
  record Batch(String[] keys, KeyBags bags) {
    static Batch random(Random r, int bags) {
      Map<String, Integer> distinct = new LinkedHashMap<>();
      int[] sizes = new int[bags];
      List<Integer> index = new ArrayList<>();
      List<Float> weights = new ArrayList<>();
      float[] scales = new float[bags];
      for (int b = 0; b < bags; b++) {
        sizes[b] = r.nextInt(12); // some bags empty
        for (int e = 0; e < sizes[b]; e++) {
          String k = (r.nextInt(9) == 0 ? "слово-" : "w") + (int) Math.exp(r.nextDouble() * 6);
          index.add(distinct.computeIfAbsent(k, x -> distinct.size()));
          weights.add(0.5f + r.nextFloat());
        }
        scales[b] = 1f / Math.max(1, sizes[b]);
      }
      float[] w = new float[weights.size()];
      for (int i = 0; i < w.length; i++) {
        w[i] = weights.get(i);
      }
      return new Batch(distinct.keySet().toArray(new String[0]),
          KeyBags.of(sizes, index.stream().mapToInt(Integer::intValue).toArray(), w, scales,
              distinct.size()));
    }
  }

  @Test
  void pooledOnShards_tracksClientPooling_stepAfterStep() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient remote = cluster.client();
        TableClient local = TableClients.inProcess(dir.resolve("l"))) {
      EmbeddingTable pooledT = remote.createTable(config());
      EmbeddingTable plainT = local.createTable(config());
      Random r = new Random(7);
      for (int step = 1; step <= 30; step++) {
        Batch b = Batch.random(r, 16);
        float[] pooled = pooledT.pooled(b.keys(), b.bags(), true, true);
        float[] rows = plainT.findOrInsert(spreadKeys(b), true);
        float[] expected = b.bags().pool(firstRows(b, rows), DIM);
        assertArrayEquals(expected, pooled, 2e-5f, "pooled vectors of step " + step);
        float[] g = new float[b.bags().bags() * DIM];
        for (int i = 0; i < g.length; i++) {
          g[i] = 0.1f * pooled[i] + (float) r.nextGaussian() * 0.05f;
        }
        int updated = pooledT.applyPooledGradients(b.keys(), b.bags(), g, 0f, step);
        assertEquals(b.keys().length, updated);
        plainT.applyGradients(b.keys(), b.bags().spread(g, b.keys().length, DIM), 0f, step);
      }
      Batch probe = Batch.random(new Random(1), 40);
      FindResult a = pooledT.find(probe.keys());
      FindResult c = plainT.find(probe.keys());
      assertArrayEquals(c.found(), a.found());
      assertArrayEquals(c.rows(), a.rows(), 1e-4f);
      // every use counted once, as the plain reads of each key per entry did
      assertEquals(plainT.describe().getCounters().getTotalFrequency(),
          pooledT.describe().getCounters().getTotalFrequency());
      // an inference read pools existing rows and creates nothing
      long keys = pooledT.describe().getCounters().getKeys();
      float[] inference = pooledT.pooled(probe.keys(), probe.bags(), false, false);
      assertArrayEquals(probe.bags().pool(a.rows(), DIM), inference, 2e-5f);
      assertEquals(keys, pooledT.describe().getCounters().getKeys());
    }
  }

  /** Each key once per entry that uses it (what a client reading every use sends). */
  private static String[] spreadKeys(Batch b) {
    String[] out = new String[b.bags().entries()];
    for (int e = 0; e < out.length; e++) {
      out[e] = b.keys()[b.bags().keyIndex(e)];
    }
    return out;
  }

  private static float[] firstRows(Batch b, float[] entryRows) {
    float[] rows = new float[b.keys().length * DIM];
    for (int e = 0; e < b.bags().entries(); e++) {
      System.arraycopy(entryRows, e * DIM, rows, b.bags().keyIndex(e) * DIM, DIM);
    }
    return rows;
  }

  @Test
  void badPooledCalls_areRefused_andChangeNothing() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir.resolve("s"));
        TableClient remote = cluster.client()) {
      EmbeddingTable t = remote.createTable(config());
      String[] keys = {"a", "b", "c", "d"};
      KeyBags bags = KeyBags.of(new int[] {2, 2}, new int[] {0, 1, 2, 3}, null, null, 4);
      float[] before = t.findOrInsert(keys);
      TableException e = assertThrows(TableException.class,
          () -> t.applyPooledGradients(keys, bags, new float[3 * DIM], 0f, 1));
      assertTrue(e.getMessage().contains("2 bags x dim 8 = 16 floats but 24"), e.getMessage());
      float[] nan = new float[2 * DIM];
      nan[DIM + 3] = Float.NaN;
      e = assertThrows(TableException.class,
          () -> t.applyPooledGradients(keys, bags, nan, 0f, 1));
      assertTrue(e.getMessage().contains("bag 1 column 3 is NaN"), e.getMessage());
      KeyBags partial = KeyBags.of(new int[] {1, 2}, new int[] {0, 1, 3}, null, null, 4);
      e = assertThrows(TableException.class,
          () -> t.applyPooledGradients(keys, partial, new float[2 * DIM], 0f, 1));
      assertTrue(e.getMessage().contains("key 2 ('c') is in no bag"), e.getMessage());
      e = assertThrows(TableException.class,
          () -> t.pooled(new String[] {"a", "b"}, bags, true, true));
      assertTrue(e.getMessage().contains("bags built over 4 keys were sent with 2 keys"),
          e.getMessage());
      assertArrayEquals(before, t.find(keys).rows());
    }
  }
}
