package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * word2vec with remote shards checks before training that they can write the model's
 * checkpoints (inside their data directory), instead of failing at the end of the run.
 */
class RemoteCheckpointPreflightTest {
  @TempDir Path dir;

  @Test
  void aModelOutsideTheShardsDataDir_failsBeforeTraining_andLeavesNothing() throws Exception {
    Path corpus = Files.writeString(dir.resolve("c.txt"), "a b c a b c a b c\n");
    ShardEngine engine = new ShardEngine(0, 1, Files.createDirectories(dir.resolve("shard-data")));
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2)) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = Word2VecCli.run(new String[] {"train", "--input", corpus.toString(), "--model",
          dir.resolve("elsewhere/model").toString(), "--endpoints", "127.0.0.1:" + server.port()},
          new PrintStream(new ByteArrayOutputStream()), new PrintStream(err, true,
          StandardCharsets.UTF_8));
      String msg = err.toString(StandardCharsets.UTF_8);
      assertEquals(2, code, msg);
      assertTrue(msg.contains("the shards cannot write this model's checkpoints under"), msg);
      assertTrue(msg.contains("--data-dir that contains the model directory"), msg);
      assertTrue(engine.tables().isEmpty(), "the probe table was dropped");
      assertFalse(msg.contains("epoch"), "no training started");
    }
  }

  @Test
  void aModelInsideTheShardsDataDir_passes() throws Exception {
    Path data = Files.createDirectories(dir.resolve("shared"));
    ShardEngine engine = new ShardEngine(0, 1, data);
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2);
        TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()))) {
      Path model = Files.createDirectories(data.resolve("runs/m"));
      Word2VecCli.checkShardsCanCheckpoint(c, model);
      assertTrue(engine.tables().isEmpty());
      try (var files = Files.list(model)) {
        assertEquals(0, files.count(), "the probe checkpoint was deleted");
      }
    }
  }
}
