package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.embedded.EmbeddedTables;
import dev.dynembed.table.engine.ShardEngine;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.io.TempDir;

/**
 * The in-process table and a shard answer Read and Write through one command path (the engine's
 * {@code ShardCommands}): what that path enforces holds in process exactly as on a shard, with
 * the same error.
 */
class CommandPathTest {
  @TempDir Path dir;

  private interface Body {
    void run(EmbeddingTable t, ShardEngine engine) throws Exception;
  }

  private void onBoth(int shards, Body body) throws Exception {
    if (shards == 0) {
      try (TableClient c = TableClients.inProcess(dir)) {
        body.run(c.createTable(TableConfigs.builder("emb", 16).build()),
            EmbeddedTables.engineOf(c));
      }
      return;
    }
    try (LoopbackCluster cluster = new LoopbackCluster(1, dir);
        TableClient c = cluster.client()) {
      body.run(c.createTable(TableConfigs.builder("emb", 16).build()), cluster.engine(0));
    }
  }

  private static String[] keys(String prefix, int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = prefix + i;
    }
    return k;
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 1})
  void memoryBudget_refusesReadsAndWritesThatMayGrow_changingNothing(int shards)
      throws Exception {
    onBoth(shards, (t, engine) -> {
      t.findOrInsert(keys("old", 100));
      // room for some hundred rows (a write counts its keys as new: the worst case), not 10,000
      engine.setMemoryBudget(engine.bytesInUse() + (64 << 10));
      TableException read = assertThrows(TableException.class,
          () -> t.findOrInsert(keys("new", 10_000)));
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, read.code());
      assertTrue(read.getMessage().contains("memory budget"), read.getMessage());
      TableException write = assertThrows(TableException.class,
          () -> t.applyGradients(keys("new", 10_000), new float[10_000 * 16], 0.1f, 1));
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, write.code());
      assertEquals(100, t.describe().getCounters().getKeys()); // nothing changed
      assertTrue(t.find(keys("old", 100)).found()[99]); // reads of existing rows go on
      assertEquals(100, t.applyGradients(keys("old", 100), new float[100 * 16], 0.1f, 2));
    });
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 1})
  void storesReplacedByRestores_whileWriting_runAgainOnTheNewStore(int shards) throws Exception {
    onBoth(shards, (t, engine) -> {
      String[] k = keys("k", 500);
      t.findOrInsert(k);
      t.save(dir.resolve("ckpt"), 0);
      AtomicReference<Throwable> failed = new AtomicReference<>();
      Thread restorer = new Thread(() -> {
        try {
          for (int i = 0; i < 40; i++) {
            t.restore(dir.resolve("ckpt"));
          }
        } catch (Throwable e) {
          failed.set(e);
        }
      });
      restorer.start();
      int step = 0;
      while (restorer.isAlive() && failed.get() == null) {
        t.findOrInsert(k);
        t.applyGradients(k, new float[k.length * 16], 0.1f, ++step);
      }
      restorer.join();
      if (failed.get() != null) {
        throw new AssertionError(failed.get());
      }
      assertEquals(500, t.describe().getCounters().getKeys());
      assertTrue(step > 0);
    });
  }
}
