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
      dev.dynembed.table.common.TableException old = org.junit.jupiter.api.Assertions
          .assertThrows(dev.dynembed.table.common.TableException.class, () -> t.find(KEYS));
      org.junit.jupiter.api.Assertions.assertTrue(old.getMessage().contains("opened here at dim"
          + " 3"), old.getMessage());
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
}
