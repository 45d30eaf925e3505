package dev.dynembed.table.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --shards-in-one-process}: N shards in one JVM answer as N shard processes do (each its
 * own port and keys, routed by {@code xxh3 mod n}), and a crash of the process restarts all of
 * them from their logs with every acknowledged write.
 */
class ShardsInOneProcessTest {
  @TempDir Path dir;

  @Test
  void shardsInOneProcess_ownTheirKeys_andRecoverTogetherAfterACrash() throws Exception {
    try (LocalShardProcesses procs = LocalShardProcesses.inOneProcess(3, dir, "128m", "",
            List.of(), List.of());
        TableClient c = TableClients.connect(procs.endpoints())) {
      assertEquals(3, procs.endpoints().size());
      assertEquals(3, procs.endpoints().stream().distinct().count(), "a port per shard");
      assertEquals("3 shards in one process", procs.describe());
      EmbeddingTable t = c.createTable(TableConfigs.builder("t", 4)
          .setOptimizer(TableConfigs.sgd(1f)).build());
      String[] keys = new String[300];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "k" + i;
      }
      float[] before = t.findOrInsert(keys);
      float[] grad = new float[before.length];
      java.util.Arrays.fill(grad, 0.25f);
      t.applyGradients(keys, grad, 0f, 1);
      // each shard checks that it owns the keys it is sent: a port that answered for another
      // shard index would have refused its part of the batch
      assertEquals(keys.length, t.describe().getCounters().getKeys());
      procs.kill(1); // the one process: every shard goes down
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (procs.restarts() < 1 && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
      assertEquals(1, procs.restarts(), "one process, restarted once");
      float[] after = t.find(keys).rows(); // resent until the shards are back
      for (int i = 0; i < before.length; i++) {
        assertEquals(before[i] - 0.25f, after[i], 0f, "row value " + i);
      }
    }
  }

  @Test
  void heapIsMultipliedAndBadSizesRefused() {
    assertEquals("6g", LocalShardProcesses.times("2g", 3));
    assertEquals("512m", LocalShardProcesses.times("256m", 2));
    assertEquals("2048", LocalShardProcesses.times("1024", 2));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LocalShardProcesses.times("2 GB", 2));
    assertTrue(e.getMessage().contains("'2 GB'"), e.getMessage());
  }
}
