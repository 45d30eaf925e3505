package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

  /**
   * A live log read back for a rejoining follower: records from..to across a rotation, exactly
   * those, while appends go on; a record a deletion took is an IOException; the bytes after an
   * LSN are those of its records (to one mark of {@code MARK_EVERY} records).
   */
  @Test
  void aLiveLogIsReadBackFromAnyRecord_andItsBytesAfterOneAreCounted() throws Exception {
    ShardLog log = new ShardLog(dir, ShardLog.Fsync.NO, 1, e -> { });
    try {
      long[] sizeOf = new long[401];
      for (int i = 1; i <= 200; i++) {
        assertEquals(i, log.append(record(i)));
        sizeOf[i] = 16 + record(i).getSerializedSize();
      }
      assertEquals(201, log.rotate());
      for (int i = 201; i <= 400; i++) {
        assertEquals(i, log.append(record(i)));
        sizeOf[i] = 16 + record(i).getSerializedSize();
      }
      List<Long> lsns = new ArrayList<>();
      ShardLog.read(dir, 150, 330, (lsn, payload) -> {
        assertEquals(record((int) lsn), LogRecord.parseFrom(payload));
        lsns.add(lsn);
      });
      assertEquals(181, lsns.size());
      assertEquals(150L, lsns.get(0));
      assertEquals(330L, lsns.get(lsns.size() - 1));
      // in the current segment: exact at a mark (every 64th record from its start), at most
      // 63 records more elsewhere; before it, the older segments count whole
      long after264 = 0;
      for (int i = 265; i <= 400; i++) {
        after264 += sizeOf[i];
      }
      assertEquals(after264, log.bytesAfter(264)); // record 265 = 201 + 64: a mark
      long after270 = after264 - sizeOf[265] - sizeOf[266] - sizeOf[267] - sizeOf[268]
          - sizeOf[269] - sizeOf[270];
      assertTrue(log.bytesAfter(270) >= after270 && log.bytesAfter(270) <= after264);
      assertEquals(0, log.bytesAfter(400));
      long all = 0;
      for (int i = 1; i <= 400; i++) {
        all += sizeOf[i];
      }
      assertEquals(all, log.bytesAfter(10));
      log.deleteBefore(201);
      org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
          () -> ShardLog.read(dir, 150, 210, (lsn, payload) -> { }));
    } finally {
      log.close();
    }
  }

  /**
   * A deposed primary's tail is cut (docs/design/0023): after record 250 of three segments, the
   * third segment goes, the second ends at 250, the replay stops there and the next append is
   * 251; a cut the log cannot make (a record it does not hold) changes nothing.
   */
  @Test
  void aClosedLogIsCutAfterARecord_andGoesOnFromThere() throws Exception {
    ShardLog log = new ShardLog(dir, ShardLog.Fsync.NO, 1, e -> { });
    for (int i = 1; i <= 400; i++) {
      log.append(record(i));
      if (i == 200 || i == 300) {
        log.rotate();
      }
    }
    log.close();
    assertEquals(List.of(1L, 201L, 301L), ShardLog.segmentStarts(dir));
    assertTrue(!ShardLog.cutAfter(dir, 401), "no record 401: nothing cut");
    assertTrue(!ShardLog.cutAfter(dir, 0));
    assertEquals(401, ShardLog.replay(dir, 1, (lsn, payload) -> { }));
    assertTrue(ShardLog.cutAfter(dir, 250));
    assertEquals(List.of(1L, 201L), ShardLog.segmentStarts(dir));
    List<Long> lsns = new ArrayList<>();
    assertEquals(251, ShardLog.replay(dir, 1, (lsn, payload) -> {
      assertEquals(record((int) lsn), LogRecord.parseFrom(payload));
      lsns.add(lsn);
    }));
    assertEquals(250, lsns.size());
    ShardLog again = new ShardLog(dir, ShardLog.Fsync.NO, 251, e -> { });
    assertEquals(251, again.append(record(251)));
    again.close();
    assertEquals(252, ShardLog.replay(dir, 1, (lsn, payload) -> { }));
    assertTrue(ShardLog.cutAfter(dir, 200), "at a segment's last record: the later ones go");
    assertEquals(List.of(1L), ShardLog.segmentStarts(dir));
    assertEquals(201, ShardLog.replay(dir, 1, (lsn, payload) -> { }));
  }

  private static LogRecord record(int i) {
    return LogRecord.newBuilder().setWrite(WriteRequest.newBuilder()
        .addItems(ApplyGradientsRequest.newBuilder().setTable("t")
            .setKeys(PackedKeys.of(new String[] {"k" + i}).toProto()))).build();
  }

  /**
   * The segment file is allocated ahead in zeros (a record's write then cannot meet a full disk);
   * a closed or rotated segment holds only its records, and a crashed one's zeros are cut by the
   * replay, every record kept.
   */
  @Test
  void segments_areAllocatedAhead_closedOnesHoldOnlyTheirRecords_crashedOnesReplayWhole()
      throws Exception {
    ShardLog log = new ShardLog(dir, ShardLog.Fsync.ALWAYS, 1, e -> { });
    long bytes = 0;
    for (int i = 1; i <= 10; i++) {
      assertEquals(i, log.append(record(i)));
      bytes += 16 + record(i).getSerializedSize();
    }
    Path first = dir.resolve(ShardLog.segmentName(1));
    assertEquals(ShardLog.PREALLOCATE, java.nio.file.Files.size(first));
    assertEquals(11, log.rotate());
    assertEquals(bytes, java.nio.file.Files.size(first), "a rotated segment keeps no zeros");
    long r = log.reserve(100);
    log.release(r);
    for (int i = 11; i <= 15; i++) {
      long res = log.reserve(record(i).getSerializedSize());
      assertEquals(i, log.append(record(i), res));
    }
    Path second = dir.resolve(ShardLog.segmentName(11));
    assertEquals(ShardLog.PREALLOCATE, java.nio.file.Files.size(second));
    log.abandon(); // a crash: the zeros stay
    List<Long> lsns = new ArrayList<>();
    assertEquals(16, ShardLog.replay(dir, 1, (lsn, payload) -> {
      assertEquals(record((int) lsn), LogRecord.parseFrom(payload));
      lsns.add(lsn);
    }));
    assertEquals(15, lsns.size());
    assertTrue(java.nio.file.Files.size(second) < 1000, "the replay cut the zeros");
    ShardLog again = new ShardLog(dir, ShardLog.Fsync.NO, 16, e -> { });
    assertEquals(16, again.append(record(16)));
    again.close();
    assertEquals(16 + record(16).getSerializedSize(),
        java.nio.file.Files.size(dir.resolve(ShardLog.segmentName(16))));
  }

  /** A reservation larger than one allocation chunk grows the file to hold it. */
  @Test
  void aReservationBeyondTheChunk_growsTheFile() throws Exception {
    ShardLog log = new ShardLog(dir, ShardLog.Fsync.NO, 1, e -> { });
    try {
      long r = log.reserve(ShardLog.PREALLOCATE + 10);
      assertEquals(2 * ShardLog.PREALLOCATE,
          java.nio.file.Files.size(dir.resolve(ShardLog.segmentName(1))));
      assertEquals(1, log.append(record(1), r));
    } finally {
      log.close();
    }
  }
}
