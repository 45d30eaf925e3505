package dev.dynembed.table.tools;

import static dev.dynembed.table.tools.ServiceOptionsParsing.parse;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.RowInitializer;
import dev.dynembed.table.tools.cli.TableServiceOptions;
import dev.dynembed.table.v1.TableConfig;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A grow (docs/design/0025) on 2 logged shard processes while one of them is SIGKILLed: the
 * supervisor restarts it from its log, the client's grow is resent to it (a shard that logged the
 * grow answers at once, one that had not grows then), and every row ends up at the new width
 * with its old columns exact and its new ones a fresh row's.
 */
@Tag("processes")
class GrowWithAKillTest {
  @TempDir Path dir;

  @Test
  void aShardKilledDuringAGrow_isRestartedFromItsLog_andTheGrowFinishes() throws Exception {
    TableServiceOptions o = parse("--shards", "2", "--shard-fsync", "always");
    int n = 100_000;
    String[] keys = new String[n];
    for (int i = 0; i < n; i++) {
      keys[i] = (i % 7 == 0 ? "мир" : "k") + i;
    }
    TableConfig config = TableConfigs.builder("g", 8)
        .setOptimizer(TableConfigs.adagrad(0.5f, 0f, 0f))
        .setInitializer(TableConfigs.uniform(-0.1f, 0.1f, 5)).build();
    try (LocalShardProcesses procs = o.start(dir, "");
        TableClient c = o.open(procs, ClientOptions.builder()
            .retryFor(java.time.Duration.ofSeconds(60)).build())) {
      EmbeddingTable t = c.createTable(config);
      for (int from = 0; from < n; from += 10_000) {
        String[] batch = Arrays.copyOfRange(keys, from, from + 10_000);
        t.findOrInsert(batch);
        float[] g = new float[batch.length * 8];
        Arrays.fill(g, 0.25f);
        t.applyGradients(batch, g, 0f, 1);
      }
      float[] before = t.find(keys).rows();
      long start = System.nanoTime();
      CompletableFuture<Long> grow = CompletableFuture.supplyAsync(() -> {
        c.growTable("g", 12);
        return System.nanoTime();
      });
      Thread.sleep(10); // the kill lands during the call (printed); the rows must hold either way
      long killed = System.nanoTime();
      procs.kill(1);
      long done = grow.get();
      System.err.printf("grow with a kill: killed at %.0f ms, the grow answered at %.0f ms%n",
          (killed - start) / 1e6, (done - start) / 1e6);
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (procs.restarts() < 1 && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertEquals(1, procs.restarts(), "the killed shard was restarted");
      EmbeddingTable wide = c.growTable("g", 12); // every shard answers: already that wide
      assertEquals(12, wide.dim());
      float[] after = wide.find(keys).rows();
      RowInitializer init = new RowInitializer(config.getInitializer());
      float[] fresh = new float[12];
      for (int i = 0; i < n; i++) {
        assertArrayEquals(Arrays.copyOfRange(before, i * 8, i * 8 + 8),
            Arrays.copyOfRange(after, i * 12, i * 12 + 8), keys[i]);
        init.fill(PackedKeys.of(keys[i]).hash(0), fresh, 0, 12);
        assertArrayEquals(Arrays.copyOfRange(fresh, 8, 12),
            Arrays.copyOfRange(after, i * 12 + 8, i * 12 + 12), keys[i] + ": new columns");
      }
      float[] g = new float[3 * 12];
      Arrays.fill(g, 0.25f);
      assertTrue(wide.applyGradients(Arrays.copyOf(keys, 3), g, 0f, 2) >= 0);
    }
  }
}
