package dev.dynembed.table.engine;

import dev.dynembed.table.common.Durable;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import java.util.zip.CRC32C;

/**
 * A shard's write-ahead log (docs/design/0008-durability.md): records numbered 1, 2, ... (the
 * log sequence number, LSN) in segment files {@code wal-<first LSN>.log}. A record is
 * {@code [int length][int CRC32C of body][body = long LSN, payload]}, little-endian.
 *
 * <p>{@link #append} writes the record to the file (a {@code write} system call) before it
 * returns, so a record survives a crash of this process in every policy; {@link Fsync} decides
 * when the operating system is made to put it on the disk (what a power loss can take). A new
 * segment starts at every {@link #rotate} (a snapshot's start); segments wholly before a durable
 * snapshot are deleted.
 *
 * <p>An I/O error is final: the log refuses every later append and tells its failure handler
 * (the shard process exits: crash-only, its restart replays what the disk holds).
 */
public final class ShardLog implements AutoCloseable {
  private static final Logger log = Logger.getLogger(ShardLog.class.getName());
  private static final Pattern SEGMENT = Pattern.compile("wal-(\\d{20})\\.log");
  /** Largest record body: a 64 MiB gRPC message plus framing. */
  static final int MAX_BODY = (64 << 20) + 4096;

  /** When appended records are forced to the disk (Redis's {@code appendfsync}). */
  public enum Fsync {
    /** Before the call is answered (group commit): a power loss loses no answered write. */
    ALWAYS,
    /** Once a second from a background thread: a power loss loses up to ~1 s of writes. */
    EVERYSEC,
    /** When the operating system decides (typically within 30 s). */
    NO
  }

  private final Path dir;
  private final Fsync policy;
  private final Consumer<IOException> onFailure;
  private final Object lock = new Object();
  private FileChannel channel;
  /** Where the segment's next record goes (guarded by lock). */
  private long position;
  /** Bytes of the segment file allocated so far: zeros past {@link #position} (guarded by lock). */
  private long allocated;
  /** Bytes promised to changes being applied whose records are not appended yet (lock). */
  private long reserved;
  private long nextLsn;
  private long bytesSinceRotate;
  private long segmentStart;
  private volatile IOException failure;

  /**
   * Guards the fsync state. Lock order: {@code lock} first, then {@code syncMonitor} (rotate and
   * flush hold both); never take {@code lock} while holding {@code syncMonitor}. (Reading {@link
   * #lastLsn} inside it once deadlocked a shard: the fsync thread against a snapshot's rotate.)
   */
  private final Object syncMonitor = new Object();
  private boolean syncing;
  private long syncedLsn;
  private final Thread everySec;

  private ByteBuffer out; // guarded by lock
  /** Told of every appended record, in LSN order, under the append lock (replication). */
  private volatile java.util.function.ObjLongConsumer<byte[]> tail;
  private final CRC32C crc = new CRC32C();

  /**
   * Opens the log for appending at {@code nextLsn} in a new segment (the replay that found
   * {@code nextLsn} has already cut any torn tail).
   *
   * @param onFailure told once, on the first I/O error
   */
  ShardLog(Path dir, Fsync policy, long nextLsn, Consumer<IOException> onFailure)
      throws IOException {
    this.dir = dir;
    this.policy = policy;
    this.onFailure = onFailure;
    this.nextLsn = nextLsn;
    this.syncedLsn = nextLsn - 1;
    Files.createDirectories(dir);
    openSegment();
    if (policy == Fsync.EVERYSEC) {
      everySec = new Thread(this::syncEverySecond, "wal-fsync");
      everySec.setDaemon(true);
      everySec.start();
    } else {
      everySec = null;
    }
  }

  /** How the log forces a segment to the disk. */
  interface Force {
    void force(FileChannel c, boolean metaData) throws IOException;
  }

  /**
   * {@link FileChannel#force}; a test puts one that fails as a failing disk's fsync does (EIO:
   * no block device here fails on demand, docs/design/0023-faults.md), so that what the log does
   * after a failed fsync is checked: it takes nothing more and answers nothing it did not force.
   */
  static volatile Force force = FileChannel::force;

  private void openSegment() throws IOException {
    Path p = dir.resolve(segmentName(nextLsn));
    channel = FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING);
    segmentStart = nextLsn;
    position = 0;
    allocated = 0;
    marks = 0;
    Durable.fsyncDirectory(dir);
  }

  /** Every {@value #MARK_EVERY}th record's position in the current segment, from its start. */
  private static final int MARK_EVERY = 64;
  private long[] markAt = new long[256];
  private int marks;

  /** Bytes the segment file grows by at a time (etcd preallocates its 64 MB segments alike). */
  static final long PREALLOCATE = 4L << 20;
  private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(1 << 16);

  /**
   * Grows the segment file with zeros to hold {@code end} bytes, a {@link #PREALLOCATE} chunk at
   * least: once allocated, a record's write cannot meet a full disk (on file systems that
   * overwrite in place: ext4, xfs, tmpfs; not copy-on-write ones). The caller holds lock.
   *
   * @throws TableException RESOURCE_EXHAUSTED naming the directory when the disk is full (the
   *     file is cut back: nothing was written, the log stays healthy), UNAVAILABLE for another
   *     I/O error
   */
  private void allocate(long end) {
    if (end <= allocated) {
      return;
    }
    long target = Math.max(end, allocated + PREALLOCATE);
    target = (target + PREALLOCATE - 1) / PREALLOCATE * PREALLOCATE;
    try {
      for (long p = allocated; p < target; ) {
        ByteBuffer z = ZEROS.duplicate();
        z.limit((int) Math.min(z.capacity(), target - p));
        p += channel.write(z, p);
      }
      allocated = target;
    } catch (IOException e) {
      try {
        channel.truncate(Math.max(allocated, position)); // give back what the failed growth took
      } catch (IOException ignored) {
        // the zeros past the last record are cut at the next start
      }
      throw noSpace(e, end - position);
    }
  }

  /** Whether an I/O error says the disk (or the user's quota) is full: ENOSPC, EDQUOT. */
  static boolean diskFull(IOException e) {
    String why = String.valueOf(e.getMessage());
    return why.contains("No space left") || why.contains("quota");
  }

  private TableException noSpace(IOException e, long bytes) {
    String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    return new TableException(diskFull(e) ? ErrorCode.RESOURCE_EXHAUSTED : ErrorCode.UNAVAILABLE,
        String.format("the write-ahead log's directory %s has no room for %d more bytes (%s):"
            + " nothing was applied; free space there and resend", dir, bytes, why));
  }

  /**
   * Reserves room in the log for a record of at most {@code bytes} before the change it stands
   * for is applied, so that a full disk refuses the call before anything changed, instead of
   * after (a change applied but not logged). Give it back with {@link #append(
   * com.google.protobuf.MessageLite, long)} or {@link #release}.
   *
   * @return the reservation
   * @throws TableException RESOURCE_EXHAUSTED naming the directory when the disk is full
   */
  long reserve(long bytes) {
    long need = 16 + bytes;
    synchronized (lock) {
      checkHealthy();
      allocate(position + reserved + need);
      reserved += need;
      return need;
    }
  }

  /** Gives back a reservation whose record will not be appended (the call failed). */
  void release(long reservation) {
    if (reservation > 0) {
      synchronized (lock) {
        reserved -= reservation;
      }
    }
  }

  public static String segmentName(long firstLsn) {
    return String.format("wal-%020d.log", firstLsn);
  }

  Fsync policy() {
    return policy;
  }

  /**
   * Appends one record and returns its LSN; the bytes are in the file (not yet necessarily on
   * the disk: {@link #awaitDurable}) when this returns. The message is serialized straight into
   * a reused direct buffer, the one the write system call reads: no per-record heap copy (a
   * step's gradients are megabytes).
   */
  long append(com.google.protobuf.MessageLite record) {
    return append(record, 0);
  }

  /**
   * As {@link #append(com.google.protobuf.MessageLite)}, in the room {@code reservation} holds
   * ({@link #reserve}; 0 for none). Without one, a full disk refuses the record with nothing
   * written (RESOURCE_EXHAUSTED) and the log stays healthy: for records logged before their
   * change is applied. With one, the record's change is applied already: a record larger than
   * its reservation that meets a full disk fails the log, as any other write error does.
   */
  long append(com.google.protobuf.MessageLite record, long reservation) {
    int size = record.getSerializedSize();
    if (size + 8 > MAX_BODY) {
      release(reservation);
      throw TableException.exhausted("a log record of %d bytes exceeds the limit of %d",
          size, MAX_BODY - 8);
    }
    synchronized (lock) {
      reserved -= reservation;
      checkHealthy();
      try {
        allocate(position + reserved + 16 + size);
      } catch (TableException e) {
        if (reservation > 0) { // applied, and it cannot be logged: the log stops here
          IOException io = new IOException(e.getMessage());
          fail(io);
          throw unavailable(io);
        }
        throw e;
      }
      long lsn = nextLsn;
      ByteBuffer b = buffer(16 + size);
      b.putLong(8, lsn);
      try {
        com.google.protobuf.CodedOutputStream out =
            com.google.protobuf.CodedOutputStream.newInstance(b.position(16).limit(16 + size));
        record.writeTo(out);
        out.flush();
      } catch (IOException e) {
        throw new IllegalStateException("serializing a log record failed", e);
      }
      crc.reset();
      crc.update(b.position(8).limit(16 + size));
      b.putInt(0, size + 8).putInt(4, (int) crc.getValue());
      b.position(0).limit(16 + size);
      if ((lsn - segmentStart) % MARK_EVERY == 0) {
        if (marks == markAt.length) {
          markAt = java.util.Arrays.copyOf(markAt, marks * 2);
        }
        markAt[marks++] = position;
      }
      try {
        long at = position;
        while (b.hasRemaining()) {
          at += channel.write(b, at);
        }
      } catch (IOException e) {
        fail(e);
        throw unavailable(e);
      }
      position += 16L + size;
      nextLsn = lsn + 1;
      bytesSinceRotate += 16L + size;
      java.util.function.ObjLongConsumer<byte[]> t = tail;
      if (t != null) {
        // a copy of the serialized record, not the record: a record may alias the memory of the
        // request it came from (a data-plane frame parsed in place), which is reused once the
        // call is answered, while the tail keeps what it is given
        byte[] copy = new byte[size];
        b.get(16, copy);
        t.accept(copy, lsn); // in LSN order: appends are serialized here
      }
      return lsn;
    }
  }

  /** The append buffer, grown to at least {@code n} bytes (little-endian, direct). */
  private ByteBuffer buffer(int n) {
    if (out == null || out.capacity() < n) {
      out = ByteBuffer.allocateDirect(Math.max(1 << 16, Integer.highestOneBit(n - 1) << 1))
          .order(ByteOrder.LITTLE_ENDIAN);
    }
    out.clear();
    return out;
  }

  /**
   * Tells {@code t} of every record appended from now on (a copy of its serialized bytes), in LSN
   * order, while the append lock is held (so it must only queue); null stops.
   */
  void tail(java.util.function.ObjLongConsumer<byte[]> t) {
    synchronized (lock) {
      this.tail = t;
    }
  }

  /** Returns once record {@code lsn} is on the disk if the policy is ALWAYS (group commit). */
  void awaitDurable(long lsn) {
    if (policy != Fsync.ALWAYS) {
      return;
    }
    forceThrough(lsn);
  }

  /** Returns once record {@code lsn} is on the disk, whatever the policy. */
  void forceThrough(long lsn) {
    while (true) {
      synchronized (syncMonitor) {
        if (syncedLsn >= lsn) {
          return;
        }
        checkHealthy();
        if (syncing) {
          try {
            syncMonitor.wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TableException(ErrorCode.UNAVAILABLE, "interrupted waiting for the log");
          }
          continue;
        }
        syncing = true;
      }
      syncOnce(); // the leader forces everything written so far: one fsync for every waiter
    }
  }

  private void syncOnce() {
    long target;
    FileChannel c;
    synchronized (lock) {
      target = nextLsn - 1;
      c = channel;
    }
    try {
      force.force(c, false);
    } catch (ClosedChannelException e) {
      // rotated meanwhile: rotate forced the old segment and advanced syncedLsn itself
    } catch (IOException e) {
      fail(e);
    } finally {
      synchronized (syncMonitor) {
        syncing = false;
        syncedLsn = Math.max(syncedLsn, failure == null ? target : syncedLsn);
        syncMonitor.notifyAll();
      }
    }
  }

  private void syncEverySecond() {
    while (failure == null) {
      try {
        Thread.sleep(1000);
      } catch (InterruptedException e) {
        return;
      }
      long last = lastLsn(); // read before syncMonitor: the lock order is lock, then syncMonitor
      synchronized (syncMonitor) {
        if (syncing || syncedLsn >= last) {
          continue;
        }
        syncing = true;
      }
      syncOnce();
    }
  }

  /** The LSN of the last record appended (0 before any). */
  long lastLsn() {
    synchronized (lock) {
      return nextLsn - 1;
    }
  }

  /** Bytes appended since the last {@link #rotate} (what the next recovery would replay). */
  long bytesSinceRotate() {
    synchronized (lock) {
      return bytesSinceRotate;
    }
  }

  /**
   * Forces the current segment and starts a new one; returns the new segment's first LSN: every
   * record before it is on the disk.
   */
  long rotate() throws IOException {
    synchronized (lock) {
      checkHealthy();
      try {
        channel.truncate(position); // the preallocated zeros go: only the last segment has any
        force.force(channel, true);
        channel.close();
        synchronized (syncMonitor) {
          syncedLsn = Math.max(syncedLsn, nextLsn - 1);
        }
        openSegment();
      } catch (IOException e) {
        fail(e);
        throw e;
      }
      bytesSinceRotate = 0;
      return nextLsn;
    }
  }

  /** Deletes the segments that hold only records before {@code lsn} (a durable snapshot's). */
  void deleteBefore(long lsn) throws IOException {
    long current;
    synchronized (lock) {
      current = segmentStart;
    }
    List<Long> starts = segmentStarts(dir);
    for (int i = 0; i < starts.size(); i++) {
      long next = i + 1 < starts.size() ? starts.get(i + 1) : Long.MAX_VALUE;
      if (starts.get(i) < current && next <= lsn) {
        Files.deleteIfExists(dir.resolve(segmentName(starts.get(i))));
      }
    }
    Durable.fsyncDirectory(dir);
  }

  /**
   * About how many bytes of log hold the records after {@code lsn} (at most {@value
   * #MARK_EVERY} records more in the current segment; earlier segments count whole): what a
   * rejoin from the log would send, to weigh against a snapshot.
   */
  long bytesAfter(long lsn) throws IOException {
    long current;
    long written;
    synchronized (lock) {
      current = segmentStart;
      written = position;
      if (lsn + 1 >= nextLsn) {
        return 0; // nothing after it
      }
      if (lsn + 1 >= current) {
        int mark = (int) Math.min((lsn + 1 - current) / MARK_EVERY, marks - 1);
        return mark < 0 ? 0 : written - markAt[mark];
      }
    }
    List<Long> starts = segmentStarts(dir);
    long bytes = 0;
    for (int i = 0; i < starts.size(); i++) {
      long next = i + 1 < starts.size() ? starts.get(i + 1) : Long.MAX_VALUE;
      if (next <= lsn + 1) {
        continue; // wholly before it
      }
      long start = starts.get(i);
      if (start == current) {
        bytes += written;
      } else if (start < current) {
        bytes += Files.size(dir.resolve(segmentName(start)));
      }
    }
    return bytes;
  }

  /** Forces what was appended to the disk (shutdown). */
  void flush() throws IOException {
    synchronized (lock) {
      if (failure == null && channel.isOpen()) {
        force.force(channel, false);
        synchronized (syncMonitor) {
          syncedLsn = Math.max(syncedLsn, nextLsn - 1);
        }
      }
    }
  }

  @Override
  public void close() throws IOException {
    if (everySec != null) {
      everySec.interrupt();
    }
    synchronized (lock) {
      try {
        if (failure == null && channel.isOpen()) {
          channel.truncate(position);
        }
        flush();
      } finally {
        channel.close();
      }
    }
  }

  /** Closes the file without forcing anything (a crash, in tests). */
  void abandon() throws IOException {
    if (everySec != null) {
      everySec.interrupt();
    }
    synchronized (lock) {
      channel.close();
    }
  }

  private void checkHealthy() {
    IOException f = failure;
    if (f != null) {
      throw unavailable(f);
    }
  }

  private TableException unavailable(IOException e) {
    return new TableException(ErrorCode.UNAVAILABLE,
        "the shard's write-ahead log failed (" + e.getMessage() + "); it takes no more writes"
            + " until it is restarted");
  }

  private void fail(IOException e) {
    boolean first;
    synchronized (syncMonitor) {
      first = failure == null;
      if (first) {
        failure = e;
      }
      syncMonitor.notifyAll();
    }
    if (first) {
      onFailure.accept(e);
    }
  }

  // ---------------------------------------------------------------- reading

  /** First LSNs of the segments in {@code dir}, ascending. */
  public static List<Long> segmentStarts(Path dir) throws IOException {
    List<Long> out = new ArrayList<>();
    if (!Files.isDirectory(dir)) {
      return out;
    }
    try (Stream<Path> s = Files.list(dir)) {
      s.forEach(p -> {
        Matcher m = SEGMENT.matcher(p.getFileName().toString());
        if (m.matches()) {
          out.add(Long.parseLong(m.group(1)));
        }
      });
    }
    out.sort(null);
    return out;
  }

  /** Receives replayed records. */
  interface RecordSink {
    void accept(long lsn, byte[] payload) throws IOException;
  }

  /**
   * Replays every record with LSN &gt;= {@code fromLsn}, in order, and returns the LSN the next
   * append gets. The end of the last segment may hold what a crash leaves of the last write (a
   * record cut short, or zeros after a power loss): it was never answered, and the file is cut
   * there with a warning that says how many bytes went (Redis's {@code aof-load-truncated}).
   * Any other damage (a checksum mismatch with records after it, damage in an earlier segment,
   * a gap in the numbering) is DATA_LOSS: recovery stops rather than continue from a log with a
   * hole.
   */
  static long replay(Path dir, long fromLsn, RecordSink sink) throws IOException {
    List<Long> starts = segmentStarts(dir);
    long expected = fromLsn;
    boolean first = true;
    for (int s = 0; s < starts.size(); s++) {
      long start = starts.get(s);
      long next = s + 1 < starts.size() ? starts.get(s + 1) : Long.MAX_VALUE;
      if (next <= fromLsn) {
        continue; // wholly before the snapshot: left over from a truncation a crash cut short
      }
      if (first ? start > fromLsn : start != expected) {
        throw TableException.dataLoss("the write-ahead log in %s lacks records %d..%d (segment"
            + " %s starts at %d)", dir.getFileName(), expected, start - 1, segmentName(start),
            start);
      }
      if (first) {
        expected = start;
        first = false;
      }
      expected = replaySegment(dir.resolve(segmentName(start)), expected, fromLsn, sink,
          s == starts.size() - 1);
    }
    return expected;
  }

  /**
   * Reads records {@code fromLsn..toLsn} of a live log, in order, changing nothing (a primary
   * sending a rejoining follower the records it lacks: docs/design/0023). Every record up to
   * {@code toLsn} must be whole in the files (appended before the call); segments written
   * meanwhile are found as it goes. A record missing (its segment deleted by a snapshot) or
   * damaged is an IOException: the caller falls back to a snapshot.
   */
  static void read(Path dir, long fromLsn, long toLsn, RecordSink sink) throws IOException {
    long next = fromLsn;
    while (next <= toLsn) {
      List<Long> starts = segmentStarts(dir);
      int s = starts.size() - 1;
      while (s >= 0 && starts.get(s) > next) {
        s--;
      }
      if (s < 0) {
        throw new IOException("the log in " + dir.getFileName() + " no longer holds record "
            + next);
      }
      long read = next;
      try (FileChannel ch = FileChannel.open(dir.resolve(segmentName(starts.get(s))),
          StandardOpenOption.READ)) {
        ByteBuffer head = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        CRC32C crc = new CRC32C();
        long pos = 0;
        long lsn = starts.get(s);
        long size = ch.size();
        while (lsn <= toLsn && pos + 8 <= size) {
          RecordAt r = recordAt(ch, pos, size, head, crc);
          if (r.damage() == Damage.ZEROS) {
            break; // room allocated ahead: the records go on in the next segment
          }
          if (r.damage() != null || r.lsn() != lsn) {
            throw new IOException("record " + lsn + " of " + segmentName(starts.get(s)) + " is "
                + (r.damage() != null ? r.damage().what : "record " + r.lsn()));
          }
          if (lsn >= next) {
            sink.accept(lsn, r.payload());
            read = lsn + 1;
          }
          lsn++;
          pos += 8 + r.body().length;
        }
      }
      if (read == next) {
        throw new IOException("the log in " + dir.getFileName() + " does not hold record "
            + next + " where it should (segment " + segmentName(starts.get(s)) + ")");
      }
      next = read;
    }
  }

  /**
   * Cuts a closed log after record {@code lsn}: the records after it go (a deposed primary's
   * tail that its successor's log does not hold, docs/design/0023), and the next open appends
   * {@code lsn + 1}. The later segments are deleted first and the one that holds {@code lsn}
   * truncated last, so that a crash in between leaves a log that is whole, only longer (the cut
   * is made again). Returns false, changing nothing, when the log does not hold record {@code
   * lsn} whole.
   */
  static boolean cutAfter(Path dir, long lsn) throws IOException {
    List<Long> starts = segmentStarts(dir);
    int s = starts.size() - 1;
    while (s >= 0 && starts.get(s) > lsn) {
      s--;
    }
    if (lsn < 1 || s < 0) {
      return false;
    }
    Path segment = dir.resolve(segmentName(starts.get(s)));
    long end = -1;
    try (FileChannel ch = FileChannel.open(segment, StandardOpenOption.READ)) {
      ByteBuffer head = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      CRC32C crc = new CRC32C();
      long size = ch.size();
      long pos = 0;
      for (long at = starts.get(s); at <= lsn && pos + 8 <= size; at++) {
        RecordAt r = recordAt(ch, pos, size, head, crc);
        if (r.damage() != null || r.lsn() != at) {
          return false;
        }
        pos += 8 + r.body().length;
        if (at == lsn) {
          end = pos;
        }
      }
    }
    if (end < 0) {
      return false;
    }
    for (int i = starts.size() - 1; i > s; i--) {
      Files.deleteIfExists(dir.resolve(segmentName(starts.get(i))));
    }
    Durable.fsyncDirectory(dir);
    try (FileChannel ch = FileChannel.open(segment, StandardOpenOption.WRITE)) {
      ch.truncate(end);
      ch.force(true);
    }
    return true;
  }

  /** Damage found where a record should start. */
  private enum Damage {
    PARTIAL_HEADER("a partial record header"),
    ZEROS("zeros"),
    CUT_SHORT("a record cut short"),
    IMPOSSIBLE_LENGTH("a record of impossible length"),
    CHECKSUM("a record whose checksum does not match");

    final String what;

    Damage(String what) {
      this.what = what;
    }
  }

  /**
   * What a segment holds at {@code pos}: a record whose checksum matches ({@code body} = LSN and
   * payload), or the damage found there ({@code body} still read for a checksum mismatch).
   */
  private record RecordAt(byte[] body, Damage damage) {
    long lsn() {
      return ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    }

    byte[] payload() {
      return java.util.Arrays.copyOfRange(body, 8, body.length);
    }
  }

  /** Reads the record at {@code pos} of a segment of {@code size} bytes, checking it whole. */
  private static RecordAt recordAt(FileChannel ch, long pos, long size, ByteBuffer head,
      CRC32C crc) throws IOException {
    if (size - pos < 8) {
      return new RecordAt(null, Damage.PARTIAL_HEADER);
    }
    head.clear();
    readFully(ch, head, pos);
    int len = head.getInt(0);
    if (len == 0) {
      return new RecordAt(null, Damage.ZEROS);
    }
    if (len < 8 || len > MAX_BODY) {
      return new RecordAt(null, Damage.IMPOSSIBLE_LENGTH);
    }
    if (pos + 8 + len > size) {
      return new RecordAt(null, Damage.CUT_SHORT);
    }
    byte[] body = new byte[len];
    readFully(ch, ByteBuffer.wrap(body), pos + 8);
    crc.reset();
    crc.update(body, 0, len);
    return new RecordAt(body, (int) crc.getValue() == head.getInt(4) ? null : Damage.CHECKSUM);
  }

  private static long replaySegment(Path p, long expected, long fromLsn, RecordSink sink,
      boolean last) throws IOException {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ,
        StandardOpenOption.WRITE)) {
      long size = ch.size();
      long pos = 0;
      ByteBuffer head = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      CRC32C crc = new CRC32C();
      while (pos < size) {
        RecordAt r = recordAt(ch, pos, size, head, crc);
        if (r.damage() != null) {
          // damage a crash can leave (the end of the last write): a partial header, a record cut
          // short, zeros to the end (room allocated ahead, or a power loss), a record whose
          // blocks never reached the disk with nothing but zeros after it
          boolean torn = switch (r.damage()) {
            case PARTIAL_HEADER, CUT_SHORT -> true;
            case ZEROS -> zerosFrom(ch, pos, size);
            case CHECKSUM -> zerosFrom(ch, pos + 8 + r.body().length, size);
            case IMPOSSIBLE_LENGTH -> false;
          };
          String damage = r.damage() == Damage.IMPOSSIBLE_LENGTH
              ? r.damage().what + " " + Integer.toUnsignedLong(head.getInt(0)) : r.damage().what;
          if (!last || !torn) {
            throw TableException.dataLoss("write-ahead log segment %s is damaged at byte %d (%s)"
                + "%s; the shard does not start on a log with a hole. To start without the"
                + " records from there on, cut the file at that byte (losing them)",
                p.getFileName(), pos, damage, last ? " and records follow" : " and later"
                    + " segments exist");
          }
          if (r.damage() == Damage.ZEROS) { // room allocated ahead, or a power loss's
            log.info(String.format("write-ahead log %s ends in %d bytes of zeros at byte %d"
                + " (space allocated ahead of the records): cut there", p.getFileName(),
                size - pos, pos));
          } else {
            log.warning(String.format("write-ahead log %s ends in %s at byte %d: cutting the %d"
                + " bytes from there (a write the crash interrupted; it was never answered)",
                p.getFileName(), damage, pos, size - pos));
          }
          ch.truncate(pos);
          ch.force(true);
          return expected;
        }
        long lsn = r.lsn();
        if (lsn != expected) {
          throw TableException.dataLoss("write-ahead log segment %s holds record %d where %d"
              + " belongs (byte %d)", p.getFileName(), lsn, expected, pos);
        }
        if (lsn >= fromLsn) {
          sink.accept(lsn, r.payload());
        }
        expected++;
        pos += 8 + r.body().length;
      }
      return expected;
    }
  }

  /** Whether bytes [from, size) of the file are all zero. */
  private static boolean zerosFrom(FileChannel ch, long from, long size) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(1 << 16);
    for (long p = from; p < size; ) {
      b.clear();
      b.limit((int) Math.min(b.capacity(), size - p));
      readFully(ch, b, p);
      for (int i = 0; i < b.limit(); i++) {
        if (b.get(i) != 0) {
          return false;
        }
      }
      p += b.limit();
    }
    return true;
  }

  private static void readFully(FileChannel ch, ByteBuffer b, long pos) throws IOException {
    while (b.hasRemaining()) {
      int n = ch.read(b, pos + b.position());
      if (n < 0) {
        throw new java.io.EOFException("unexpected end of " + ch);
      }
    }
  }
}
