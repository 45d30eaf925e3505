package dev.dynembed.table.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code table-cli create --cooccurrence PARTNERS:ANCHORS:SKETCH_KIB} on 2 loopback shards: the
 * table keeps the pairs a client reports, describe sums them over the shards, and bad values are
 * refused by name.
 */
class CooccurrenceCliTest {
  @TempDir Path dir;

  @Test
  void aTableCreatedWithCooccurrence_countsReportedPairs_andDescribeShowsThem() throws Exception {
    List<TableServer> shards = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      shards.add(new TableServer(new ShardEngine(i, 2, dir.resolve("s")), "127.0.0.1", 0, 2));
    }
    String endpoints = "127.0.0.1:" + shards.get(0).port() + ",127.0.0.1:" + shards.get(1).port();
    try {
      CliRun bad = CliRun.of("create", "--endpoints", endpoints, "--table", "w", "--dim", "8",
          "--cooccurrence", "8:1000");
      assertEquals(1, bad.exit());
      assertTrue(bad.err().contains("--cooccurrence must be PARTNERS:ANCHORS:SKETCH_KIB"),
          bad.err());
      CliRun zero = CliRun.of("create", "--endpoints", endpoints, "--table", "w", "--dim", "8",
          "--cooccurrence", "0:1000:16");
      assertEquals(1, zero.exit());
      assertTrue(zero.err().contains("cooccurrence.partners_per_key"), zero.err());
      CliRun made = CliRun.of("create", "--endpoints", endpoints, "--table", "w", "--dim", "8",
          "--cooccurrence", "8:1000:16");
      assertEquals(0, made.exit(), made.err());
      assertTrue(made.out().contains("\"partnersPerKey\": 8"), made.out());
      try (TableClient c = TableClients.connect(List.of(endpoints.split(",")))) {
        EmbeddingTable t = c.openTable("w");
        String[] anchors = new String[200];
        String[] partners = new String[200];
        for (int i = 0; i < anchors.length; i++) {
          anchors[i] = "a" + i % 50;
          partners[i] = "p" + i % 7;
        }
        assertEquals(200, t.reportPairs(anchors, partners, null, 1));
      }
      CliRun shown = CliRun.of("describe", "--endpoints", endpoints, "--table", "w");
      assertEquals(0, shown.exit(), shown.err());
      assertTrue(shown.out().contains("\"pairsCounted\": \"200\""), shown.out());
      assertTrue(shown.out().contains("\"pairAnchors\": \"50\""), shown.out());
    } finally {
      for (TableServer s : shards) {
        s.close();
      }
    }
  }
}
