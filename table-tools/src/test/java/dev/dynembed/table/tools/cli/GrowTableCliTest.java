package dev.dynembed.table.tools.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code table-cli grow} on 2 loopback shards: rows keep their columns and take new ones, a
 * client at the old width trains the old columns on and one opened again the new width, an
 * interrupted grow (one shard grown) is finished by running it again, a smaller dim is refused,
 * {@code --new-columns zeros} keeps the held rows' values.
 */
class GrowTableCliTest {
  @TempDir Path dir;

  private static final String[] KEYS = {"a", "b", "мир", "d", "e"};

  private static int cli(StringBuilder err, String... args) {
    CliRun r = CliRun.of(args);
    err.append(r.err());
    return r.exit();
  }


  private static float[] gradients(int n, int dim, float v) {
    float[] g = new float[n * dim];
    Arrays.fill(g, v);
    return g;
  }

  @Test
  void growOnTwoShards_keepsColumns_trainsTheOldWidthOn_andFinishesAnInterruptedGrow()
      throws Exception {
    List<TableServer> servers = new ArrayList<>();
    List<ShardEngine> engines = new ArrayList<>();
    try {
      for (int i = 0; i < 2; i++) {
        ShardEngine e = new ShardEngine(i, 2, dir);
        engines.add(e);
        servers.add(new TableServer(e, "127.0.0.1", 0, 2));
      }
      String endpoints = "127.0.0.1:" + servers.get(0).port() + ",127.0.0.1:"
          + servers.get(1).port();
      try (TableClient c = TableClients.connect(List.of(endpoints.split(",")))) {
        EmbeddingTable t = c.createTable(TableConfigs.builder("w", 4)
            .setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f)).build());
        t.findOrInsert(KEYS);
        t.applyGradients(KEYS, gradients(KEYS.length, 4, 0.5f), 0f, 1);
        float[] before = t.find(KEYS).rows();
        engines.get(0).grow("w", 6); // an interrupted grow: one shard done
        StringBuilder err = new StringBuilder();
        assertEquals(0, cli(err, "grow", "--endpoints", endpoints, "--table", "w", "--dim", "6"),
            err.toString());
        EmbeddingTable wide = c.openTable("w");
        assertEquals(6, wide.dim());
        float[] after = wide.find(KEYS).rows();
        for (int i = 0; i < KEYS.length; i++) {
          assertArrayEquals(Arrays.copyOfRange(before, i * 4, i * 4 + 4),
              Arrays.copyOfRange(after, i * 6, i * 6 + 4), KEYS[i]);
        }
        // a caller that opened the table at 4 goes on: its step moves the old columns only
        t.applyGradients(KEYS, gradients(KEYS.length, 4, 0.5f), 0f, 2);
        float[] stepped = wide.find(KEYS).rows();
        float[] oldColumns = new float[KEYS.length * 4];
        for (int i = 0; i < KEYS.length; i++) {
          assertArrayEquals(Arrays.copyOfRange(after, i * 6 + 4, i * 6 + 6),
              Arrays.copyOfRange(stepped, i * 6 + 4, i * 6 + 6), KEYS[i] + ": new columns");
          assertTrue(stepped[i * 6] != after[i * 6], KEYS[i] + ": old columns stepped");
          System.arraycopy(stepped, i * 6, oldColumns, i * 4, 4);
        }
        assertArrayEquals(oldColumns, t.find(KEYS).rows(), "the old width reads its columns");
        wide.applyGradients(KEYS, gradients(KEYS.length, 6, 0.5f), 0f, 3);
        // the counters start again with the grown store, as with a restore
        assertEquals(2 * KEYS.length, wide.describe().getCounters().getUpdates());
        StringBuilder smaller = new StringBuilder();
        assertEquals(1, cli(smaller, "grow", "--endpoints", endpoints, "--table", "w", "--dim",
            "5"));
        assertTrue(smaller.toString().contains("it can grow to a dim in [6, 4096], not 5"),
            smaller.toString());
        // --new-columns zeros: the held rows keep their values (a uniform initializer's would
        // not be zero); a value it does not know is refused by name, nothing grown
        StringBuilder unknown = new StringBuilder();
        assertEquals(1, cli(unknown, "grow", "--endpoints", endpoints, "--table", "w", "--dim",
            "8", "--new-columns", "ones"));
        assertTrue(unknown.toString().contains("--new-columns must be initializer or zeros but"
            + " was 'ones'"), unknown.toString());
        assertEquals(6, c.openTable("w").dim());
        float[] six = wide.find(KEYS).rows();
        StringBuilder zeros = new StringBuilder();
        assertEquals(0, cli(zeros, "grow", "--endpoints", endpoints, "--table", "w", "--dim", "8",
            "--new-columns", "zeros"), zeros.toString());
        float[] eight = c.openTable("w").find(KEYS).rows();
        for (int i = 0; i < KEYS.length; i++) {
          float[] want = Arrays.copyOf(Arrays.copyOfRange(six, i * 6, i * 6 + 6), 8);
          assertArrayEquals(want, Arrays.copyOfRange(eight, i * 8, i * 8 + 8), KEYS[i]);
        }
        assertTrue(Arrays.stream(new int[] {4, 5}).anyMatch(j -> after[j] != 0),
            "the default grow's new columns are the initializer's");
      }
    } finally {
      servers.forEach(TableServer::close);
    }
  }
}
