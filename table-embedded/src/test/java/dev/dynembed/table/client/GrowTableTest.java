package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.common.TableConfigs;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * {@link TableClient#growTable} in process: the grown table keeps every row's columns, takes
 * the new width, and trains at it (the loopback shards' case: table-tools'
 * {@code GrowTableCliTest}; the engine's: {@code TableGrowthTest}).
 */
class GrowTableTest {
  private static final String[] KEYS = {"a", "b", "мир", "d", "e"};

  @Test
  void aTableGrownInProcess_keepsItsColumns_andTrainsAtTheNewWidth() {
    try (TableClient c = TableClients.inProcess()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("w", 3)
          .setOptimizer(TableConfigs.sgd(1f)).build());
      float[] before = t.findOrInsert(KEYS);
      EmbeddingTable wide = c.growTable("w", 5);
      assertArrayEquals(before, t.find(KEYS).rows(), "opened at 3: the old columns");
      assertEquals(5, wide.dim());
      assertEquals(5, c.openTable("w").dim());
      float[] g = new float[KEYS.length * 5];
      Arrays.fill(g, 0.25f);
      float[] after = wide.find(KEYS).rows();
      wide.applyGradients(KEYS, g, 0f, 1);
      float[] trained = wide.find(KEYS).rows();
      for (int i = 0; i < KEYS.length; i++) {
        assertArrayEquals(Arrays.copyOfRange(before, i * 3, i * 3 + 3),
            Arrays.copyOfRange(after, i * 5, i * 5 + 3), KEYS[i]);
        for (int j = 0; j < 5; j++) {
          assertEquals(after[i * 5 + j] - 0.25f, trained[i * 5 + j], 1e-7f);
        }
      }
    }
  }

  /**
   * A caller that opened the table before it grew goes on at its width: its reads (rows, rows
   * with optimizer slots, pooled bags, sampled rows) are the old columns, and its gradients move
   * the old columns only (widened with zeros on the way: with Adagrad the new columns and their
   * accumulators stay as they were). An assign at the old width stays refused.
   */
  @Test
  void aCallerThatOpenedTheTableBeforeItGrew_trainsTheOldColumns() {
    try (TableClient c = TableClients.inProcess()) {
      EmbeddingTable old = c.createTable(TableConfigs.builder("w", 3)
          .setOptimizer(TableConfigs.adagrad(0.5f, 0.1f, 0f)).build());
      old.findOrInsert(KEYS);
      EmbeddingTable wide = c.growTable("w", 5);
      float[] was = wide.find(KEYS).rows();
      TableReads reads = new TableReads();
      java.util.concurrent.CompletableFuture<TableRows> state = reads.lookup(old, KEYS, false);
      java.util.concurrent.CompletableFuture<float[]> bags = reads.pooled(old, KEYS,
          dev.dynembed.table.common.KeyBags.of(new int[] {2, 3}, new int[] {0, 1, 2, 3, 4}, null,
              null, KEYS.length), false, false);
      reads.submit();
      TableRows withSlots = TableReads.join(state);
      float[] pooled = TableReads.join(bags);
      for (int j = 0; j < 3; j++) { // bag 0 = rows 0 + 1, bag 1 = rows 2 + 3 + 4 (sums)
        assertEquals(was[j] + was[5 + j], pooled[j], 1e-6f);
        assertEquals(was[10 + j] + was[15 + j] + was[20 + j], pooled[3 + j], 1e-6f);
      }
      assertEquals(KEYS.length * 3, withSlots.rows().length);
      assertEquals(KEYS.length * 3, withSlots.slots().length, "Adagrad's accumulator, 3 wide");
      float[] g = new float[KEYS.length * 3];
      for (int i = 0; i < g.length; i++) {
        g[i] = 0.1f * (i % 7 - 3);
      }
      old.applyGradients(KEYS, g, 0f, 1);
      float[] now = wide.find(KEYS).rows();
      for (int i = 0; i < KEYS.length; i++) {
        for (int j = 0; j < 3; j++) { // Adagrad: a = 0.1 + g^2, w -= 0.5 g / sqrt(a)
          float gi = g[i * 3 + j];
          float step = (float) (0.5 * gi / Math.sqrt(0.1f + gi * gi));
          assertEquals(was[i * 5 + j] - step, now[i * 5 + j], 1e-6f, KEYS[i] + " column " + j);
        }
        assertArrayEquals(Arrays.copyOfRange(was, i * 5 + 3, i * 5 + 5),
            Arrays.copyOfRange(now, i * 5 + 3, i * 5 + 5), KEYS[i] + ": new columns unmoved");
      }
      float[] oldCols = new float[KEYS.length * 3];
      for (int i = 0; i < KEYS.length; i++) {
        System.arraycopy(now, i * 5, oldCols, i * 3, 3);
      }
      assertArrayEquals(oldCols, old.find(KEYS).rows());
      org.junit.jupiter.api.Assertions.assertThrows(
          dev.dynembed.table.common.TableException.class,
          () -> old.assign(KEYS, new float[KEYS.length * 3], null, 2));
    }
  }
}
