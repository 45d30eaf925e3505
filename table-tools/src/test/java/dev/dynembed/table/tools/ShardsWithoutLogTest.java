package dev.dynembed.table.tools;

import static dev.dynembed.table.tools.ServiceOptionsParsing.parse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.cli.TableServiceOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --shard-wal off}: the shards {@code --shards N} starts keep their rows in memory only, so
 * they write no log, and one that dies is left down (a restart would answer with fresh rows)
 * instead of being restarted as a logged shard is.
 */
@Tag("processes")
class ShardsWithoutLogTest {
  @TempDir Path dir;

  @Test
  void badValuesAreRefusedByName() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> parse("--shards", "2", "--shard-wal", "maybe").check());
    assertTrue(e.getMessage().contains("--shard-wal must be on or off"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> parse("--shards", "2", "--shard-fsync", "often").check());
    assertTrue(e.getMessage().contains("--shard-fsync must be always, everysec or no"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> parse("--shards", "1", "--replicas", "1", "--shard-wal", "off").check());
    assertTrue(e.getMessage().contains("need --shard-wal on"), e.getMessage());
    parse("--shards", "2", "--shard-wal", "off", "--shard-fsync", "no").check();
  }

  @Test
  void shardsWithoutLogWriteNoneAndAreNotRestarted() throws Exception {
    TableServiceOptions o = parse("--shards", "2", "--shard-wal", "off");
    try (LocalShardProcesses procs = o.start(dir, "");
        TableClient c = o.open(procs, ClientOptions.builder()
            .retryFor(java.time.Duration.ofSeconds(2)).build())) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("t", 4)
          .setOptimizer(TableConfigs.sgd(1f)).build());
      String[] keys = {"a", "b", "c", "d", "e", "f"};
      float[] before = t.findOrInsert(keys);
      float[] grad = new float[before.length];
      java.util.Arrays.fill(grad, 1f);
      t.applyGradients(keys, grad, 0f, 1);
      float[] after = t.find(keys).rows();
      for (int i = 0; i < before.length; i++) {
        assertEquals(before[i] - 1f, after[i], 1e-6f);
      }
      try (Stream<Path> files = Files.walk(dir)) {
        assertFalse(files.anyMatch(p -> p.getFileName().toString().startsWith("wal-")),
            "a shard without its log wrote one under " + dir);
      }
      procs.kill(0);
      long deadline = System.nanoTime() + 30_000_000_000L;
      while (procs.exitsHandled() < 1 && System.nanoTime() < deadline) {
        Thread.sleep(20); // the supervisor sees the exit and decides: restart or leave down
      }
      assertEquals(1, procs.exitsHandled(), "the supervisor did not see the shard exit");
      assertEquals(0, procs.restarts(), "a shard without its log was restarted");
      assertThrows(RuntimeException.class, () -> t.find(keys),
          "a read of the dead shard's keys was answered");
    }
  }
}
