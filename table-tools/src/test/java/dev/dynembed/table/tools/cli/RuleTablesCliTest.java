package dev.dynembed.table.tools.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import dev.dynembed.table.v1.OptimizerKind;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A table whose rule is a shipped reaction, made with {@code table-cli create --optimizer
 * moving_average --rule-param}, on 2 loopback shards: the shards apply the rule, describe shows
 * its parameters, a checkpoint restores into fresh shards with the rule, and a rule the shards
 * lack is refused by name.
 */
class RuleTablesCliTest {
  @TempDir Path dir;

  private static List<TableServer> shards(Path d) throws Exception {
    List<TableServer> s = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      s.add(new TableServer(new ShardEngine(i, 2, d), "127.0.0.1", 0, 2));
    }
    return s;
  }

  private static String endpoints(List<TableServer> s) {
    return "127.0.0.1:" + s.get(0).port() + ",127.0.0.1:" + s.get(1).port();
  }

  private static void copyTree(Path from, Path to) throws java.io.IOException {
    java.nio.file.Files.createDirectories(to.getParent());
    try (var files = java.nio.file.Files.walk(from)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        java.nio.file.Files.copy(p, to.resolve(from.relativize(p).toString()));
      }
    }
  }

  @Test
  void aMovingAverageTable_fromTheCli_appliesItsRule_andRestoresWithIt() throws Exception {
    List<TableServer> a = shards(dir.resolve("a"));
    List<TableServer> b = shards(dir.resolve("b"));
    try {
      CliRun made = CliRun.of("create", "--endpoints", endpoints(a), "--table", "avg", "--dim", "3",
          "--optimizer", "moving_average", "--rule-param", "rate=0.25", "--init", "zeros");
      assertEquals(0, made.exit(), made.err());
      assertTrue(made.out().contains("\"rule\": \"moving_average\"")
          && made.out().contains("\"rate\": 0.25"), made.out());
      String[] keys = {"x", "y", "мир"};
      float[] target = {4, 8, -4, 1, 2, 3, 0, 0, 8};
      try (TableClient c = TableClients.connect(List.of(endpoints(a).split(",")))) {
        EmbeddingTable t = c.openTable("avg");
        assertEquals(OptimizerKind.RULE, t.config().getOptimizer().getKind());
        t.applyGradients(keys, target, 0f, 1);
        t.applyGradients(keys, target, 0f, 2);
        float[] expected = new float[target.length]; // 0 -> t/4 -> t/4 + (t - t/4)/4
        for (int i = 0; i < expected.length; i++) {
          float w = 0.25f * target[i];
          expected[i] = w + 0.25f * (target[i] - w);
        }
        assertArrayEquals(expected, t.find(keys).rows());
        java.nio.file.Files.createDirectories(dir.resolve("a/ckpt"));
        t.save(dir.resolve("a/ckpt"), 2); // inside the shards' data directory
        copyTree(dir.resolve("a/ckpt"), dir.resolve("b/ckpt"));
        try (TableClient fresh = TableClients.connect(List.of(endpoints(b).split(",")))) {
          CliRun restored = CliRun.of("restore", "--endpoints", endpoints(b), "--table", "avg",
              "--dir", dir.resolve("b/ckpt").toString());
          assertEquals(0, restored.exit(), restored.err() + restored.out());
          EmbeddingTable r = fresh.openTable("avg");
          assertEquals(Map.of("rate", 0.25), r.config().getOptimizer().getParamsMap());
          assertArrayEquals(expected, r.find(keys).rows());
          r.applyGradients(keys, target, 0f, 3);
          t.applyGradients(keys, target, 0f, 3);
          assertArrayEquals(t.find(keys).rows(), r.find(keys).rows());
        }
      }
      CliRun missing = CliRun.of("create", "--endpoints", endpoints(a), "--table", "other",
          "--dim", "3", "--optimizer", "no_such_rule");
      assertEquals(1, missing.exit());
      assertTrue(missing.err().contains("optimizer rule 'no_such_rule' is not installed"),
          missing.err());
      CliRun misplaced = CliRun.of("create", "--endpoints", endpoints(a), "--table", "other",
          "--dim", "3", "--optimizer", "adagrad", "--rule-param", "rate=0.5");
      assertEquals(1, misplaced.exit());
      assertTrue(misplaced.err().contains("--rule-param is for a row-update rule"),
          misplaced.err());
    } finally {
      a.forEach(TableServer::close);
      b.forEach(TableServer::close);
    }
  }
}
