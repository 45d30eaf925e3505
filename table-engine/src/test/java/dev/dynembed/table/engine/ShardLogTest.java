package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.UnsafeByteOperations;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.LogRecord;
import dev.dynembed.table.v1.WriteRequest;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The log's tail (replication) gets records that stay valid after the request's memory is reused. */
class ShardLogTest {
  @TempDir Path dir;

  @Test
  void tail_getsItsOwnCopy_ofARecordThatAliasesReusedMemory() throws Exception {
    // a write as the data plane parses it: its gradients alias the frame's direct memory
    ByteBuffer frame = ByteBuffer.allocateDirect(16);
    for (int i = 0; i < 16; i++) {
      frame.put(i, (byte) i);
    }
    LogRecord record = LogRecord.newBuilder().setWrite(WriteRequest.newBuilder()
        .addItems(ApplyGradientsRequest.newBuilder().setTable("t")
            .setKeys(PackedKeys.of(new String[] {"k"}).toProto())
            .setGradients(UnsafeByteOperations.unsafeWrap(frame.duplicate())))).build();
    LogRecord expected = LogRecord.parseFrom(record.toByteArray()); // owns its bytes
    List<byte[]> tailed = new ArrayList<>();
    ShardLog log = new ShardLog(dir, ShardLog.Fsync.NO, 1, e -> { });
    try {
      log.tail((bytes, lsn) -> tailed.add(bytes));
      assertEquals(1, log.append(record));
      for (int i = 0; i < 16; i++) {
        frame.put(i, (byte) 0x7F); // the call is answered: its frame's memory is reused
      }
    } finally {
      log.close();
    }
    assertEquals(1, tailed.size());
    assertEquals(expected, LogRecord.parseFrom(tailed.get(0)));
    List<LogRecord> replayed = new ArrayList<>();
    ShardLog.replay(dir, 1, (lsn, payload) -> replayed.add(LogRecord.parseFrom(payload)));
    assertEquals(List.of(expected), replayed);
  }
}
