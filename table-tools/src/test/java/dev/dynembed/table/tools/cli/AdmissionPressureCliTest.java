package dev.dynembed.table.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code table-cli create --admission-pressure FROM:MAX_COUNT} on 2 loopback shards with a
 * memory budget: the shards raise the count a key needs as their memory fills, answer every
 * call, and describe shows the count and the pressure; bad values are refused by name.
 */
class AdmissionPressureCliTest {
  @TempDir Path dir;

  @Test
  void aPressuredTable_fromTheCli_tightensAsItsShardsFill_andRefusesNoCall() throws Exception {
    List<ShardEngine> engines = new ArrayList<>();
    List<TableServer> shards = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      ShardEngine e = new ShardEngine(i, 2, dir.resolve("s"));
      e.setMemoryBudget(1 << 20); // 1 MiB each: about 3,000 rows of dim 32 with the sketch
      engines.add(e);
      shards.add(new TableServer(e, "127.0.0.1", 0, 2));
    }
    String endpoints = "127.0.0.1:" + shards.get(0).port() + ",127.0.0.1:" + shards.get(1).port();
    try {
      CliRun bad = CliRun.of("create", "--endpoints", endpoints, "--table", "w",
          "--dim", "32", "--admission-sketch-kib", "64", "--admission-pressure", "0.8");
      assertEquals(1, bad.exit());
      assertTrue(bad.err().contains("--admission-pressure must be FROM:MAX_COUNT"), bad.err());
      CliRun low = CliRun.of("create", "--endpoints", endpoints, "--table", "w",
          "--dim", "32", "--admission-sketch-kib", "64", "--admission-pressure", "0.8:1");
      assertEquals(1, low.exit());
      assertTrue(low.err().contains("admission_pressure.max_count"), low.err());
      CliRun noSketch = CliRun.of("create", "--endpoints", endpoints, "--table", "w",
          "--dim", "32", "--admission-pressure", "0.5:32");
      assertEquals(1, noSketch.exit());
      assertTrue(noSketch.err().contains("admission_sketch_kib"), noSketch.err());

      CliRun made = CliRun.of("create", "--endpoints", endpoints, "--table", "w",
          "--dim", "32", "--admission-sketch-kib", "64", "--admission-pressure", "0.5:32");
      assertEquals(0, made.exit(), made.err());
      assertTrue(made.out().contains("\"maxCount\": 32"), made.out());
      assertTrue(made.out().contains("\"admissionCount\": 1"), made.out());
      try (TableClient c = TableClients.connect(List.of(endpoints.split(",")))) {
        EmbeddingTable t = c.openTable("w");
        Random r = new Random(5);
        int admittedLate = 0;
        for (int call = 0; call < 120; call++) { // 120 x 512 draws over 100,000 keys, Zipf-like
          String[] keys = new String[512];
          for (int i = 0; i < keys.length; i++) {
            keys[i] = "k" + (int) Math.floor(Math.pow(100_000, r.nextDouble()));
          }
          KeyCounts kc = t.count(keys, true); // never refused
          if (call >= 100) {
            for (boolean a : kc.admitted()) {
              admittedLate += a ? 1 : 0;
            }
          }
        }
        TableCounters counters = t.describe().getCounters();
        assertTrue(counters.getAdmissionCount() == 0 || counters.getAdmissionCount() > 2,
            counters.toString());
        assertTrue(counters.getMemoryPressure() > 0.5, counters.toString());
        assertTrue(admittedLate > 0, "the recurring keys still have rows");
        for (ShardEngine e : engines) {
          assertTrue(e.bytesInUse() <= e.memoryBudget(), e.bytesInUse() + " bytes");
        }
        CliRun described = CliRun.of("describe", "--endpoints", endpoints, "--table", "w");
        assertTrue(described.out().contains("\"memoryPressure\""), described.out());
      }
    } finally {
      shards.forEach(TableServer::close);
    }
  }
}
