package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.TableConfigs;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import dev.dynembed.table.tools.LocalShardProcesses;

/** The one-command cluster behind word2vec's {@code --shards N}: real processes on loopback. */
@Tag("processes")
class LocalShardProcessesTest {
  @TempDir
  Path dir;

  @Test
  void startsEveryShard_servesARoutedTable_andStopsThemOnClose() throws Exception {
    List<ProcessHandle> children;
    try (LocalShardProcesses procs = new LocalShardProcesses(2, 0, dir, "256m", "")) {
      List<String> endpoints = procs.endpoints();
      assertEquals(2, endpoints.size());
      assertNotEquals(endpoints.get(0), endpoints.get(1));
      children = ProcessHandle.current().children().toList();
      assertTrue(children.size() >= 2, "shard processes are children of this JVM");
      try (TableClient c = TableClients.connect(endpoints)) {
        assertEquals(2, c.numShards());
        EmbeddingTable t = c.createTable(TableConfigs.builder("procs", 4)
            .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.uniform(-1, 1, 7))
            .build());
        String[] keys = new String[64];
        for (int i = 0; i < keys.length; i++) {
          keys[i] = "key" + i;
        }
        float[] first = t.findOrInsert(keys, false);
        assertArrayEquals(first, t.findOrInsert(keys, false));
        // both shards hold part of the keys
        assertEquals(2, c.stats().stream().filter(s -> s.getTables(0).getCounters().getKeys() > 0)
            .count());
        assertTrue(procs.peakRssBytes() > 0);
      }
    }
    for (ProcessHandle h : children) {
      assertFalse(h.isAlive(), "shard process " + h.pid() + " still runs after close");
    }
  }

  @Test
  void aShardThatCannotStart_isReportedWithItsOutput_andNoneIsLeftRunning() {
    long before = ProcessHandle.current().children().filter(ProcessHandle::isAlive).count();
    IOException e = assertThrows(IOException.class,
        () -> new LocalShardProcesses(2, 0, dir, "not-a-size", ""));
    assertTrue(e.getMessage().contains("did not start"), e.getMessage());
    assertTrue(e.getMessage().contains("not-a-size"), "the JVM's own complaint is included: "
        + e.getMessage());
    assertEquals(before, ProcessHandle.current().children().filter(ProcessHandle::isAlive).count());
  }

  @Test
  void shards_neverOutliveAKilledParent_andKeepTheirOutputInALog() throws Exception {
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process parent = new ProcessBuilder(javaBin, "-cp", System.getProperty("java.class.path"),
        ShardParentMain.class.getName(), dir.toString()).redirectErrorStream(true).start();
    java.io.BufferedReader out = new java.io.BufferedReader(new java.io.InputStreamReader(
        parent.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
    long shardPid = -1;
    String line;
    StringBuilder seen = new StringBuilder();
    while ((line = out.readLine()) != null && !line.startsWith("ready")) {
      seen.append(line).append('\n');
      if (line.startsWith("shard pid ")) {
        shardPid = Long.parseLong(line.substring("shard pid ".length()));
      }
    }
    assertTrue(shardPid > 0 && line != null, "helper output: " + seen);
    ProcessHandle shard = ProcessHandle.of(shardPid).orElseThrow();
    assertTrue(shard.isAlive());
    parent.destroyForcibly(); // SIGKILL: no shutdown hook of the parent runs
    parent.waitFor();
    long deadline = System.nanoTime() + 15_000_000_000L;
    while (shard.isAlive() && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    assertFalse(shard.isAlive(), "shard " + shardPid + " outlived its killed parent");
    String log = java.nio.file.Files.readString(dir.resolve("shard-0.log"));
    assertTrue(log.contains("listening on"), log);
    assertTrue(log.contains("is gone; exiting"), log);
  }
}
