package dev.dynembed.table.server;

import static dev.dynembed.table.server.HostileRequests.find;
import static dev.dynembed.table.server.HostileRequests.floats;
import static dev.dynembed.table.server.HostileRequests.keys;
import static dev.dynembed.table.server.HostileRequests.write;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.ShardLog;
import dev.dynembed.table.engine.ShardState;
import dev.dynembed.table.v1.FindResponse;
import dev.dynembed.table.v1.ReadResponse;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Calls that run off the event loop (here writes under {@code --fsync always}) hold their frame
 * until answered, and their requests alias its bytes: frames read behind them in the same buffer
 * must not move those bytes. Many pipelined writes of distinct keys in a few socket writes, each
 * applied to its own key exactly: keys came out garbled ("ey23k") when the connection compacted
 * its buffer under held frames.
 */
class DataPlaneOffloadTest {
  @TempDir Path dir;

  @Test
  void pipelinedWritesOffTheLoop_keepTheirKeysAndGradients() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    ShardState state = ShardState.recover(engine, dir.resolve("state"), ShardLog.Fsync.ALWAYS,
        1L << 40, e -> {});
    try (TableServer server = new TableServer(engine, "127.0.0.1", 0, 2, List.of(), null, 0);
        RawDataPlane c = RawDataPlane.open(server.dataPort(), null)) {
      engine.create(TableConfigs.builder("t", 2).setOptimizer(TableConfigs.sgd(1f))
          .setInitializer(TableConfigs.zeros()).build());
      int n = 3000;
      for (int i = 0; i < n; i++) { // a few socket writes of many frames each
        c.send(RawDataPlane.WRITE, 0, 0, i + 1, write("t", keys("key" + i), floats(i, -i), 0f,
            dev.dynembed.table.v1.CallId.newBuilder().setClient(77).setSeq(i + 1).setLowWater(1)
                .build()).toByteArray()); // off the loop they may run in any order
        if (i % 100 == 99) {
          c.flush();
        }
      }
      c.flush();
      for (int i = 0; i < n; i++) {
        RawDataPlane.Frame f = c.read();
        assertEquals(RawDataPlane.WRITE_OK, f.kind(), f.toString());
      }
      String[] all = new String[n];
      for (int i = 0; i < n; i++) {
        all[i] = "key" + i;
      }
      c.send(RawDataPlane.READ, n + 1, find("t", keys(all), 1).toByteArray());
      FindResponse rows = ReadResponse.parseFrom(c.read().body()).getResults(0).getRows();
      float[] v = floats(rows.getRows());
      for (int i = 0; i < n; i++) {
        assertEquals(-i, v[2 * i], 0f, "key" + i);
        assertEquals(i, v[2 * i + 1], 0f, "key" + i);
      }
      assertEquals(n, engine.get("t").size(), "no key was garbled into another");
    } finally {
      state.close();
    }
  }
}
