package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.benmanes.caffeine.cache.Ticker;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The serving cache over 2 real loopback shards: hits, bounded age, bounded size, read-only. */
class ServingTableTest {
  @TempDir Path dir;

  private static final int DIM = 8;

  private static String[] keys(String prefix, int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = prefix + i;
    }
    return k;
  }

  @Test
  void servesTheBackingRows_fromCache_untilTheyAreOlderThanMaxAge() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir); TableClient c = cluster.client()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("serve", DIM)
          .setOptimizer(TableConfigs.sgd(1f)).build());
      String[] known = keys("w", 50);
      t.findOrInsert(known);
      AtomicLong nanos = new AtomicLong();
      Ticker clock = nanos::get;
      ServingTable s = new ServingTable(t, 1 << 20, Duration.ofMinutes(5), clock);
      String[] ask = {"w1", "w2", "w1", "unknown", "w3"};
      FindResult first = s.find(ask);
      FindResult direct = t.find(ask);
      assertArrayEquals(direct.rows(), first.rows());
      assertArrayEquals(new boolean[] {true, true, true, false, true}, first.found());
      assertEquals(4, s.keysRead(), "each distinct missing key read once from the shards");
      assertEquals(4, s.stats().missCount());
      FindResult again = s.find(ask);
      assertArrayEquals(first.rows(), again.rows());
      assertEquals(4, s.stats().hitCount(), "unknown keys are cached as not found too");
      assertEquals(4, s.keysRead());
      // the table moves on; the cache serves the old rows until they are 5 minutes old
      float[] g = new float[3 * DIM];
      java.util.Arrays.fill(g, 0.5f);
      t.applyGradients(new String[] {"w1", "w2", "w3"}, g, 0f, 1);
      nanos.addAndGet(Duration.ofMinutes(4).toNanos());
      assertArrayEquals(first.rows(), s.find(ask).rows());
      nanos.addAndGet(Duration.ofMinutes(2).toNanos());
      assertArrayEquals(t.find(ask).rows(), s.find(ask).rows());
      assertFalse(java.util.Arrays.equals(first.rows(), s.find(ask).rows()));
      // an inference read of the pooled kind goes through the cache as well
      var bags = dev.dynembed.table.common.KeyBags.of(new int[] {2}, new int[] {0, 1}, null,
          new float[] {0.5f}, 2);
      assertArrayEquals(t.pooled(new String[] {"w1", "w7"}, bags, false, false),
          s.pooled(new String[] {"w1", "w7"}, bags, false, false), 1e-6f);
      assertEquals(50, t.describe().getCounters().getKeys(), "serving created no row");
    }
  }

  @Test
  void sizeIsBoundedByBytes_andWritesAreRefused() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir); TableClient c = cluster.client()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("bounded", DIM).build());
      String[] many = keys("key-", 2000);
      t.findOrInsert(many);
      long perEntry = ServingTable.ENTRY_OVERHEAD_BYTES + 2 * "key-1000".length() + 4 * DIM;
      ServingTable s = new ServingTable(t, 100 * perEntry, Duration.ofHours(1));
      for (int i = 0; i < many.length; i += 100) {
        s.find(java.util.Arrays.copyOfRange(many, i, i + 100));
      }
      assertTrue(s.cachedKeys() <= 100, "cached " + s.cachedKeys() + " rows of ~" + perEntry
          + " bytes under a bound of 100 rows' bytes");
      assertTrue(s.stats().evictionCount() >= 1800, "evictions " + s.stats().evictionCount());
      TableException e = assertThrows(TableException.class,
          () -> s.applyGradients(new String[] {"key-1"}, new float[DIM], 0f, 1));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertTrue(e.getMessage().contains("serving table is read-only"), e.getMessage());
      assertThrows(TableException.class, () -> s.save(dir.resolve("x"), 1));
      assertThrows(IllegalArgumentException.class,
          () -> new ServingTable(t, 0, Duration.ofSeconds(1)));
    }
  }
}
