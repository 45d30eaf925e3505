package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Remote failures arrive as typed exceptions naming table, shard and call; nothing changes. */
class ErrorsTest {
  @TempDir Path dir;

  @Test
  void unknownTable_isTableNotFoundNamingShardAndCall() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir); TableClient c = cluster.client()) {
      TableException e = assertThrows(TableException.TableNotFoundException.class,
          () -> c.openTable("missing"));
      assertEquals("missing", e.table());
      assertEquals(0, e.shard());
      assertEquals("describeTable", e.call());
      assertTrue(e.getMessage().contains("table 'missing' does not exist"), e.getMessage());
    }
  }

  @Test
  void shardDown_isShardUnavailableNamingTheShard() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient c = TableClients.connect(cluster.endpoints,
            ClientOptions.DEFAULTS.withDeadline(Duration.ofSeconds(5)).withRetryFor(Duration.ofSeconds(1)))) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      cluster.servers.get(1).close();
      String[] keys = java.util.stream.IntStream.range(0, 50).mapToObj(i -> "k" + i)
          .toArray(String[]::new);
      TableException e = assertThrows(TableException.ShardUnavailableException.class,
          () -> t.findOrInsert(keys));
      assertEquals(1, e.shard());
      assertEquals("findOrInsert", e.call());
      assertEquals("emb", e.table());
      assertTrue(e.getMessage().contains("did not answer"), e.getMessage());
    }
  }

  @Test
  void endpointsInWrongOrder_areRefused() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient good = cluster.client();
        TableClient swapped = TableClients.connect(
            List.of(cluster.endpoints.get(1), cluster.endpoints.get(0)))) {
      good.createTable(TableConfigs.builder("emb", 4).build());
      TableException e = assertThrows(TableException.class, () -> swapped.openTable("emb"));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertTrue(e.getMessage().contains("endpoint 0 serves shard 1 of 2"), e.getMessage());
    }
  }

  @Test
  void createWithTooFewEndpoints_isRefusedBeforeAnythingIsCreated() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir);
        TableClient partial = TableClients.connect(List.of(cluster.endpoints.get(0)))) {
      TableException e = assertThrows(TableException.class,
          () -> partial.createTable(TableConfigs.builder("emb", 4).build()));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertTrue(e.getMessage().contains("endpoint 0 serves shard 0 of 2"), e.getMessage());
      assertTrue(cluster.engine(0).tables().isEmpty());
    }
  }

  @Test
  void badGradients_remote_areInvalidAndRowsUnchanged() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir); TableClient c = cluster.client()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      String[] keys = {"a", "b", "c", "d", "e"};
      float[] before = t.findOrInsert(keys);
      float[] g = new float[20];
      g[13] = Float.NaN;
      TableException e = assertThrows(TableException.InvalidRequestException.class,
          () -> t.applyGradients(keys, g, 0f, 1));
      assertTrue(e.getMessage().contains("column 1 is NaN"), e.getMessage());
      assertThrows(TableException.InvalidRequestException.class,
          () -> t.applyGradients(keys, new float[19], 0f, 1));
      assertThrows(TableException.InvalidRequestException.class,
          () -> t.applyGradients(new String[] {"a", "k".repeat(300)}, new float[8], 0f, 1));
      assertThrows(TableException.InvalidRequestException.class, () -> t.findOrInsert("ok", ""));
      assertArrayEquals(before, t.find(keys).rows());
      assertEquals(5, t.describe().getCounters().getKeys());
    }
  }

  @Test
  void restoreOfCorruptCheckpoint_isRefusedOnEveryShardAndTableUnchanged() throws Exception {
    try (LoopbackCluster cluster = new LoopbackCluster(2, dir); TableClient c = cluster.client()) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("emb", 4).build());
      String[] keys = java.util.stream.IntStream.range(0, 200).mapToObj(i -> "k" + i)
          .toArray(String[]::new);
      t.findOrInsert(keys);
      t.save(dir.resolve("ckpt"), 1);
      t.applyGradients(keys, new float[800], 0f, 2);
      t.findOrInsert("only-live");
      float[] live = t.find(keys).rows();
      Path victim;
      try (var files = Files.list(dir.resolve("ckpt"))) {
        victim = files.filter(p -> p.toString().endsWith(".ckpt")).findFirst().orElseThrow();
      }
      byte[] b = Files.readAllBytes(victim);
      b[b.length - 30] ^= 1;
      Files.write(victim, b);
      TableException e = assertThrows(TableException.CheckpointCorruptException.class,
          () -> t.restore(dir.resolve("ckpt")));
      assertTrue(e.getMessage().contains("corrupt"), e.getMessage());
      assertArrayEquals(live, t.find(keys).rows());
      assertTrue(t.find("only-live").found()[0]);
      TableException missing = assertThrows(TableException.CheckpointCorruptException.class,
          () -> t.restore(dir.resolve("nowhere")));
      assertTrue(missing.getMessage().contains("no checkpoint manifest"), missing.getMessage());
    }
  }

  @Test
  void inProcess_unknownTable_namesCall() throws IOException {
    try (TableClient c = TableClients.inProcess(dir)) {
      TableException e = assertThrows(TableException.TableNotFoundException.class,
          () -> c.openTable("missing"));
      assertEquals("describeTable", e.call());
    }
  }
}
