package dev.dynembed.table.engine;

import static dev.dynembed.table.engine.Fixtures.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.WriteRequest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An fsync that fails (issue 50; docs/design/0023-faults.md): no block device here fails on
 * demand, so the log's force is replaced by one that throws as a failing disk's fsync does (EIO).
 * A shard whose fsync failed must not answer the write that waited for it, must take no write
 * after it (the page cache cannot be trusted after a failed fsync: PostgreSQL's "fsyncgate"),
 * must tell its process once (which exits), and a restart must hold every answered write exactly
 * once; the write that was not answered may or may not be there.
 */
class FsyncFailureTest {
  private static final int DIM = 4;

  @TempDir Path dir;

  @AfterEach
  void restoreForce() {
    ShardLog.force = java.nio.channels.FileChannel::force;
  }

  @Test
  void aFailedFsync_answersNothingAfterIt_andARestartHoldsEveryAnsweredWrite() throws Exception {
    List<IOException> told = new ArrayList<>();
    ShardEngine e = new ShardEngine(0, 1, dir);
    ShardState s = durable(e, told);
    e.create(TableConfigs.normalize(TableConfigs.builder("t", DIM)
        .setOptimizer(TableConfigs.sgd(1f)).build()));
    List<String> keys = List.of("a", "b", "c", "d", "e");
    for (int seq = 1; seq <= 20; seq++) { // answered: each forced to the disk first
      e.write(write(seq, keys.subList(seq % 3, seq % 3 + 2)), ShardState::checkWrite);
    }
    Map<String, TableStore.Record> answered = Fixtures.snapshot(e.get("t"));

    ShardLog.force = (c, meta) -> {
      throw new IOException("Input/output error (an injected fsync failure)");
    };
    assertError(ErrorCode.UNAVAILABLE, "write-ahead log failed",
        () -> e.write(write(21, keys), ShardState::checkWrite));
    Map<String, TableStore.Record> unanswered = Fixtures.snapshot(e.get("t"));
    assertNotEquals(answered, unanswered, "the write is applied in memory before its fsync");
    assertEquals(1, told.size(), "the process is told once (it exits and restarts)");

    ShardLog.force = java.nio.channels.FileChannel::force; // the disk works again: no matter
    assertError(ErrorCode.UNAVAILABLE, "takes no more writes until it is restarted",
        () -> e.write(write(22, keys), ShardState::checkWrite));
    assertEquals(unanswered, Fixtures.snapshot(e.get("t")), "a refused write changed nothing");
    assertEquals(1, told.size());
    s.close(false); // the process exits (nothing more is forced: the log has failed)

    ShardEngine again = new ShardEngine(0, 1, dir);
    ShardState s2 = durable(again, told);
    Map<String, TableStore.Record> recovered = Fixtures.snapshot(again.get("t"));
    assertTrue(recovered.equals(answered) || recovered.equals(unanswered),
        "a restart holds every answered write once, and the unanswered one at most once");
    // and it takes writes again: the resend of the unanswered call is answered once
    again.write(write(21, keys), ShardState::checkWrite);
    assertEquals(unanswered, Fixtures.snapshot(again.get("t")));
    s2.close(false);
    assertEquals(1, told.size(), "the restarted log failed nothing");
  }

  private ShardState durable(ShardEngine e, List<IOException> told) throws IOException {
    Path states = dir.resolve("state");
    Files.createDirectories(ShardState.root(states, 0));
    return ShardState.recover(e, states, ShardLog.Fsync.ALWAYS, 1L << 30, told::add);
  }

  /** Gradient 0.5 in every column for each key, as call {@code seq} of client 7. */
  private static WriteRequest write(long seq, List<String> keys) {
    float[] g = new float[keys.size() * DIM];
    java.util.Arrays.fill(g, 0.5f);
    ApplyGradientsRequest item = ApplyGradientsRequest.newBuilder().setTable("t")
        .setKeys(PackedKeys.of(keys.toArray(String[]::new)).toProto())
        .setGradients(Rows.encode(g)).build();
    return WriteRequest.newBuilder().addItems(item)
        .setCallId(CallId.newBuilder().setClient(7).setSeq(seq)).build();
  }
}
