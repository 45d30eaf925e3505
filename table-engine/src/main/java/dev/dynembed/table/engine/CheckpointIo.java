package dev.dynembed.table.engine;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.RowRules;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.CheckpointHeader;
import dev.dynembed.table.v1.TableConfig;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.zip.CRC32C;
import java.util.zip.CheckedInputStream;
import java.util.zip.CheckedOutputStream;

/**
 * Checkpoint shard files, format version 1 (docs/design/0004-checkpoint-format.md):
 *
 * <pre>
 * "DYNEMBCK" | u32 version | u32 header length | CheckpointHeader (protobuf) | u32 crc32c(header)
 * block*     : u32 records (&gt; 0) | u32 payload length | payload | u32 crc32c(payload)
 *              record: u16 key length | key UTF-8 | row_floats f32 | i64 freq | i64 step | i64 updates
 * end        : u32 0 | u64 total records
 * pending    : (only when the config's min_count &gt; 1) u64 entries | entries * (u64 key hash,
 *              u64 admission count) | u32 crc32c(entries); or, with admission_sketch_kib, the
 *              sketch: u32 width | 4 * width u32 counters | u32 crc32c(counters)
 * file crc   : u32 crc32c(all bytes before this field)
 * </pre>
 *
 * All integers little-endian. The whole-file CRC32C is also returned to the caller for the
 * manifest, so a restore checks each block, the trailer, and the file against the manifest.
 */
public final class CheckpointIo {
  public static final int FORMAT_VERSION = dev.dynembed.table.common.CheckpointFormat.VERSION;
  private static final byte[] MAGIC = "DYNEMBCK".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
  private static final int BLOCK_RECORDS = 1024;

  private CheckpointIo() {}

  public static String fileName(String table, int shard, int numShards) {
    return String.format("%s.shard-%05d-of-%05d.ckpt", table, shard, numShards);
  }

  /** Writes a table's shard file from a frozen copy; needs no lock. */
  public static CheckpointFile write(TableStore.Frozen f, Path dir, long step) throws IOException {
    return write(f, dir, step, null);
  }

  /**
   * As above, keeping only the keys {@code owned} gives the store's shard (null: every key). A
   * checkpoint taken between a slot move's merge on the destination and the drop on the source
   * then holds each key once.
   */
  public static CheckpointFile write(TableStore.Frozen f, Path dir, long step,
      dev.dynembed.table.common.SlotMap owned) throws IOException {
    try {
      return writeFrozen(f, dir, step, owned);
    } finally {
      if (f.cold != null) {
        f.cold.close();
      }
    }
  }

  private static CheckpointFile writeFrozen(TableStore.Frozen f, Path dir, long step,
      dev.dynembed.table.common.SlotMap owned) throws IOException {
    TableStore t = f.table; // config and layout; every row comes from the copy
    Files.createDirectories(dir);
    String name = fileName(t.name(), t.shardIndex, t.numShards);
    Path target = dir.resolve(name);
    Path tmp = dir.resolve(name + ".tmp");
    int n = f.size();
    long records = 0;
    CRC32C whole = new CRC32C();
    try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
        CheckedOutputStream cos = new CheckedOutputStream(
            new BufferedOutputStream(java.nio.channels.Channels.newOutputStream(ch), 1 << 16), whole);
        DataOutputStream out = new DataOutputStream(cos)) {
      out.write(MAGIC);
      byte[] header = CheckpointHeader.newBuilder()
          .setFormatVersion(FORMAT_VERSION)
          .setConfig(t.config())
          .setShardIndex(t.shardIndex)
          .setNumShards(t.numShards)
          .setStep(step)
          .setRowFloats(t.rowFloats)
          .build().toByteArray();
      writeInt(out, FORMAT_VERSION);
      writeInt(out, header.length);
      out.write(header);
      writeInt(out, crc(header, header.length));
      int rowBytes = 2 + t.maxKeyBytes + 4 * t.rowFloats + 24;
      ByteBuffer block = ByteBuffer.allocate(BLOCK_RECORDS * rowBytes).order(ByteOrder.LITTLE_ENDIAN);
      int inBlock = 0;
      for (int r = 0; r < n; r++) {
        if (!f.isReady(r)) {
          continue;
        }
        PackedKeys.Builder kb = new PackedKeys.Builder(1);
        f.appendKey(r, kb);
        PackedKeys key = kb.build();
        if (owned != null && owned.ownerOf(key.hash(0)) != t.shardIndex) {
          continue; // given away by a slot move, not yet dropped
        }
        block.putShort((short) key.length(0));
        block.put(key.bytes(), 0, key.length(0));
        float[] page = f.rowPage(r);
        int base = f.rowBase(r);
        for (int j = 0; j < t.rowFloats; j++) {
          block.putFloat(page[base + j]);
        }
        block.putLong(f.meta(r, TableStore.M_FREQ));
        block.putLong(f.meta(r, TableStore.M_STEP));
        block.putLong(f.meta(r, TableStore.M_UPDATES));
        records++;
        if (++inBlock == BLOCK_RECORDS) {
          flushBlock(out, block, inBlock);
          inBlock = 0;
        }
      }
      if (f.cold != null) { // the disk tier's rows at the same cut
        long[] cold = {0};
        int[] in = {inBlock};
        try {
          f.cold.each(r -> {
            block.putShort((short) r.key().length);
            block.put(r.key());
            for (float v : r.values()) {
              block.putFloat(v);
            }
            block.putLong(r.frequency());
            block.putLong(r.step());
            block.putLong(r.updates());
            cold[0]++;
            if (++in[0] == BLOCK_RECORDS) {
              try {
                flushBlock(out, block, in[0]);
              } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
              in[0] = 0;
            }
            return true;
          });
        } catch (java.io.UncheckedIOException e) {
          throw e.getCause();
        }
        records += cold[0];
        inBlock = in[0];
      }
      if (inBlock > 0) {
        flushBlock(out, block, inBlock);
      }
      writeInt(out, 0);
      writeLong(out, records);
      if (t.config().getAdmissionSketchKib() > 0) {
        writeSketch(out, f.sketchCounters());
      } else if (t.config().getMinCount() > 1) {
        java.util.Map<Long, Long> pending = f.pendingCounts();
        if (owned != null) {
          pending = new java.util.HashMap<>(pending);
          pending.keySet().removeIf(h -> owned.ownerOf(h) != t.shardIndex);
        }
        writePending(out, pending);
      }
      if (t.config().hasCooccurrence()) { // the anchors this file's keys are: its own
        f.pairs.write(out, owned == null ? h -> true : h -> owned.ownerOf(h) == t.shardIndex);
      }
      out.flush();
      writeInt(out, (int) whole.getValue());
      out.flush();
      ch.force(true);
    }
    long crc = crcOfFile(tmp);
    Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    return CheckpointFile.newBuilder()
        .setName(name)
        .setShardIndex(t.shardIndex)
        .setNumShards(t.numShards)
        .setKeys(records)
        .setBytes(Files.size(target))
        .setCrc32C((int) crc)
        .build();
  }

  private static void writePending(DataOutputStream out, java.util.Map<Long, Long> pending)
      throws IOException {
    ByteBuffer b = ByteBuffer.allocate(16 * pending.size()).order(ByteOrder.LITTLE_ENDIAN);
    pending.forEach((hash, count) -> b.putLong(hash).putLong(count)); // quiesced: no writer
    writeLong(out, pending.size());
    out.write(b.array(), 0, b.position());
    writeInt(out, crc(b.array(), b.position()));
  }

  private static void writeSketch(DataOutputStream out, int[] counters) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(4 * counters.length).order(ByteOrder.LITTLE_ENDIAN);
    for (int c : counters) {
      b.putInt(c);
    }
    writeInt(out, counters.length / AdmissionSketch.DEPTH);
    out.write(b.array());
    writeInt(out, crc(b.array(), b.position()));
  }

  /**
   * Reads a file's admission sketch into the target's: a file written by the same shard of the
   * same layout is its exact state; after a change of shard count every file's sketch is added
   * (a sketch of all the shards' streams: each key's estimate stays an upper bound).
   */
  private static void readSketch(DataInputStream in, String p, Target target,
      CheckpointHeader h) throws IOException {
    int width = readInt(in);
    AdmissionSketch mine = target.table.admissionSketch();
    if (width != mine.width()) {
      throw TableException.dataLoss("%s: admission sketch of width %d, the config makes %d", p,
          width, mine.width());
    }
    byte[] payload = in.readNBytes(4 * AdmissionSketch.DEPTH * width);
    if (payload.length != 4 * AdmissionSketch.DEPTH * width) {
      throw new EOFException();
    }
    if (readInt(in) != crc(payload, payload.length)) {
      throw TableException.dataLoss("%s: admission sketch checksum mismatch (corrupt)", p);
    }
    // the sketch cannot be split by key: a shard of the same layout (and no moved slots) takes
    // its own file's, any other shard every file's (counts may then over-admit, never lose)
    boolean sameLayout = h.getNumShards() == target.numShards
        && (target.map == null || target.map.epoch() == 0);
    if (sameLayout && h.getShardIndex() != target.shardIndex) {
      return; // another shard's keys
    }
    ByteBuffer b = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
    int[] counters = new int[AdmissionSketch.DEPTH * width];
    for (int i = 0; i < counters.length; i++) {
      counters[i] = b.getInt();
    }
    mine.merge(AdmissionSketch.of(width, counters));
  }

  /**
   * Reads a file's co-occurrence counts: a file of the same shard and layout is its exact state
   * (totals and sketch too); after a change of shard count each owned anchor's summary is taken
   * and its kept counts added to the totals and sketch (PMI then reads this shard's shares).
   */
  private static void readPairs(DataInputStream in, String p, Target target, CheckpointHeader h)
      throws IOException {
    boolean sameLayout = h.getNumShards() == target.numShards
        && (target.map == null || target.map.epoch() == 0);
    boolean exact = target.all || target.numShards <= 1 && h.getNumShards() <= 1
        || sameLayout && h.getShardIndex() == target.shardIndex;
    target.table.pairs().read(in, target::owns, exact, p);
  }

  private static void readPending(DataInputStream in, String p, Target target) throws IOException {
    long entries = readLong(in);
    if (entries < 0 || entries > (1L << 27)) {
      throw TableException.dataLoss("%s: admission-count section has %d entries", p, entries);
    }
    byte[] payload = in.readNBytes((int) (16 * entries));
    if (payload.length != 16 * entries) {
      throw new EOFException();
    }
    if (readInt(in) != crc(payload, payload.length)) {
      throw TableException.dataLoss("%s: admission-count section checksum mismatch (corrupt)", p);
    }
    ByteBuffer b = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
    for (long i = 0; i < entries; i++) {
      long hash = b.getLong();
      long count = b.getLong();
      if (target.owns(hash)) {
        target.table.restorePending(hash, count);
      }
    }
  }

  private static void flushBlock(DataOutputStream out, ByteBuffer block, int records)
      throws IOException {
    writeInt(out, records);
    writeInt(out, block.position());
    out.write(block.array(), 0, block.position());
    writeInt(out, crc(block.array(), block.position()));
    block.clear();
  }

  /**
   * Reads every listed file and builds a new table holding the keys that route to {@code
   * shardIndex} of {@code numShards}. Nothing live is touched; any problem throws before the
   * caller swaps the table in.
   *
   * @param expectedName the table the caller restores; every file must hold it
   */
  public static TableStore read(Path dir, List<CheckpointFile> files, String expectedName,
      int shardIndex, int numShards) {
    return read(dir, files, expectedName, shardIndex, numShards, c -> c);
  }

  /**
   * As above, keeping the keys {@code map} gives to shard {@code shardIndex} (a shard's own
   * snapshot and a restore both route by the shard's slot map).
   */
  public static TableStore read(Path dir, List<CheckpointFile> files, String expectedName,
      int shardIndex, dev.dynembed.table.common.SlotMap map,
      java.util.function.UnaryOperator<TableConfig> adapt) {
    return read(dir, files, expectedName, new Target(shardIndex, map.numShards(), map), adapt);
  }

  /**
   * Every row of a shard's own snapshot, whatever its slot map says: a source keeps the rows it
   * gave away until the move's {@code DropUnowned}, and a destination holds rows it merged before
   * its new map was installed (a snapshot may be cut in between), so recovery must not drop them
   * by the map (docs/design/0021-slot-moves-proposal.md).
   */
  public static TableStore readAll(Path dir, List<CheckpointFile> files, String expectedName,
      int shardIndex, int numShards) {
    Target t = new Target(shardIndex, numShards, null);
    t.all = true;
    return read(dir, files, expectedName, t, c -> c);
  }

  /**
   * As above, the table taking {@code adapt} of the config the checkpoint was written with (e.g.
   * {@link TableConfigs#withoutRedisTier} where there is no Redis tier, {@link
   * TableConfigs#uncapped} for a reader of the whole checkpoint).
   */
  public static TableStore read(Path dir, List<CheckpointFile> files, String expectedName,
      int shardIndex, int numShards, java.util.function.UnaryOperator<TableConfig> adapt) {
    return read(dir, files, expectedName, new Target(shardIndex, numShards, null), adapt);
  }

  private static TableStore read(Path dir, List<CheckpointFile> files, String expectedName,
      Target target, java.util.function.UnaryOperator<TableConfig> adapt) {
    if (files.isEmpty()) {
      throw TableException.invalid("table '%s': restore lists no checkpoint files", expectedName);
    }
    target.adapt = adapt;
    for (CheckpointFile f : files) {
      if (f.getName().contains("/") || f.getName().contains("\\") || f.getName().startsWith(".")) {
        throw TableException.invalid("checkpoint file name '%s' must be a plain file name", f.getName());
      }
      Path p = dir.resolve(f.getName());
      try {
        long size = Files.size(p);
        if (size != f.getBytes()) {
          throw TableException.dataLoss("checkpoint file %s is %s than its manifest says"
              + " (truncated or replaced)", f.getName(), size < f.getBytes() ? "shorter" : "longer");
        }
        int crc = (int) crcOfFile(p);
        if (crc != f.getCrc32C()) {
          throw TableException.dataLoss("checkpoint file %s does not match its manifest's checksum"
              + " (corrupt)", f.getName());
        }
        try (InputStream in = new BufferedInputStream(Files.newInputStream(p), 1 << 16)) {
          readFile(in, f.getName(), expectedName, target);
        }
      } catch (NoSuchFileException e) {
        throw TableException.dataLoss("checkpoint file %s is missing", f.getName());
      } catch (IOException e) {
        throw TableException.dataLoss("checkpoint file %s cannot be read (%s)", f.getName(),
            e.getClass().getSimpleName());
      }
    }
    return target.table;
  }

  /** The table being rebuilt, created from the first file's header. */
  private static final class Target {
    final int shardIndex;
    final int numShards;
    TableStore table;
    java.util.function.UnaryOperator<TableConfig> adapt = c -> c;

    /** The slot map keys are routed by, or null: {@code xxh3 mod numShards}. */
    final dev.dynembed.table.common.SlotMap map;

    Target(int shardIndex, int numShards, dev.dynembed.table.common.SlotMap map) {
      this.shardIndex = shardIndex;
      this.numShards = numShards;
      this.map = map;
    }

    /** Every key is kept (a shard's own snapshot). */
    boolean all;

    /** Whether a key's hash routes to the shard being rebuilt. */
    boolean owns(long hash) {
      if (numShards <= 1 || all) {
        return true;
      }
      return map != null ? map.ownerOf(hash) == shardIndex
          : KeyHashing.shardOf(hash, numShards) == shardIndex;
    }
  }

  /** Reads one file; messages name it by {@code p}, its file name (never a server path). */
  private static void readFile(InputStream raw, String p, String expectedName, Target target)
      throws IOException {
    CRC32C whole = new CRC32C();
    DataInputStream in = new DataInputStream(new CheckedInputStream(raw, whole));
    try {
      CheckpointHeader h = readHeader(in, p, expectedName, target);
      TableConfig cfg = target.table.config();
      long records = readRecords(in, p, target);
      long total = readLong(in);
      if (total != records) {
        throw TableException.dataLoss("%s: trailer says %d records but %d were read", p, total,
            records);
      }
      if (cfg.getAdmissionSketchKib() > 0) {
        readSketch(in, p, target, h);
      } else if (cfg.getMinCount() > 1) {
        readPending(in, p, target);
      }
      if (cfg.hasCooccurrence()) {
        readPairs(in, p, target, h);
      }
      int expected = (int) whole.getValue();
      int stored = Integer.reverseBytes(new DataInputStream(raw).readInt());
      if (stored != expected) {
        throw TableException.dataLoss("%s: file checksum mismatch (corrupt)", p);
      }
      if (raw.read() != -1) {
        throw TableException.dataLoss("%s: trailing bytes after the end of the checkpoint", p);
      }
    } catch (EOFException e) {
      throw TableException.dataLoss("%s is truncated", p);
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      throw TableException.dataLoss("%s: header cannot be parsed: %s", p, e.getMessage());
    }
  }

  /**
   * The file's magic, version and header (checked by its CRC); creates the target's table from
   * the header's config on the first file, and checks that the others agree with it.
   */
  private static CheckpointHeader readHeader(DataInputStream in, String p, String expectedName,
      Target target) throws IOException {
    int shardIndex = target.shardIndex;
    int numShards = target.numShards;
    byte[] magic = in.readNBytes(MAGIC.length);
    if (!java.util.Arrays.equals(magic, MAGIC)) {
      throw TableException.dataLoss("%s is not a table checkpoint file (bad magic)", p);
    }
    int version = readInt(in);
    if (version != FORMAT_VERSION) {
      throw TableException.precondition(
          "%s has checkpoint format version %d; this build reads version %d", p, version,
          FORMAT_VERSION);
    }
    int hlen = readInt(in);
    if (hlen < 0 || hlen > (1 << 20)) {
      throw TableException.dataLoss("%s: header length %d is invalid", p, hlen);
    }
    byte[] hb = in.readNBytes(hlen);
    if (hb.length != hlen || readInt(in) != crc(hb, hlen)) {
      throw TableException.dataLoss("%s: header checksum mismatch or truncated header", p);
    }
    CheckpointHeader h = CheckpointHeader.parseFrom(hb);
    TableConfig cfg;
    dev.dynembed.table.v1.OptimizerConfig opt = h.getConfig().getOptimizer();
    if (opt.getKind() == dev.dynembed.table.v1.OptimizerKind.RULE
        && !RowRules.has(opt.getRule())) { // the file is sound; the process lacks
      throw TableException.precondition("%s: table '%s' updates its rows with the rule '%s',"
          + " which this process does not have (installed: %s): put the rule's jar on the"
          + " class path (bin/table-server: DYNEMBED_RULES_CLASSPATH)", p,
          h.getConfig().getName(), opt.getRule(), String.join(", ", RowRules.names()));
    }
    try {
      cfg = TableConfigs.normalize(h.getConfig());
    } catch (TableException e) { // found by FuzzTest: an empty header passes an empty CRC
      throw TableException.dataLoss("%s: the header holds no valid table config (%s)", p,
          e.getMessage());
    }
    cfg = target.adapt.apply(cfg);
    if (!cfg.getName().equals(expectedName)) {
      throw TableException.precondition("%s holds table '%s', not '%s'", p, cfg.getName(),
          expectedName);
    }
    if (target.table == null) {
      target.table = new TableStore(cfg, shardIndex, numShards);
    } else if (!target.table.config().equals(cfg)) {
      throw TableException.precondition(
          "%s was written with a different table config than the other files", p);
    }
    TableStore t = target.table;
    if (h.getRowFloats() != t.rowFloats) {
      throw TableException.dataLoss("%s: header says %d floats per row but dim %d with %s needs %d",
          p, h.getRowFloats(), cfg.getDim(), RowRules.of(cfg.getOptimizer()).name(), t.rowFloats);
    }
    return h;
  }

  /** The record blocks, each checked by its CRC, to the empty block that ends them. */
  private static long readRecords(DataInputStream in, String p, Target target)
      throws IOException {
    TableStore t = target.table;
    long records = 0;
    float[] rec = new float[t.rowFloats];
    while (true) {
      int count = readInt(in);
      if (count == 0) {
        break;
      }
      int len = readInt(in);
      if (count < 0 || len < 0 || len > (64 << 20)) {
        throw TableException.dataLoss("%s: block header is invalid (records %d, bytes %d)", p,
            count, len);
      }
      byte[] payload = in.readNBytes(len);
      if (payload.length != len) {
        throw new EOFException();
      }
      if (readInt(in) != crc(payload, len)) {
        throw TableException.dataLoss("%s: block %d checksum mismatch (corrupt)", p, records);
      }
      ByteBuffer b = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
      try {
        for (int i = 0; i < count; i++) {
          int klen = b.getShort() & 0xFFFF;
          if (klen == 0 || klen > t.maxKeyBytes) {
            throw TableException.dataLoss("%s: record %d has key length %d", p, records, klen);
          }
          byte[] kbytes = new byte[klen];
          b.get(kbytes);
          for (int j = 0; j < t.rowFloats; j++) {
            rec[j] = b.getFloat();
          }
          long freq = b.getLong();
          long step = b.getLong();
          long upd = b.getLong();
          records++;
          PackedKeys key = new PackedKeys.Builder(1).add(kbytes, 0, klen).build();
          if (!target.owns(key.hash(0))) {
            continue;
          }
          if (!t.restoreRecord(key, 0, rec, 0, freq, step, upd)) {
            throw TableException.dataLoss("%s: key '%s' appears twice in the checkpoint", p,
                key.key(0));
          }
        }
      } catch (java.nio.BufferUnderflowException e) {
        throw TableException.dataLoss("%s: block %d is shorter than its records", p, records);
      }
      if (b.hasRemaining()) {
        throw TableException.dataLoss("%s: block has %d trailing bytes", p, b.remaining());
      }
    }
    return records;
  }

  static long crcOfFile(Path p) throws IOException {
    CRC32C c = new CRC32C();
    byte[] buf = new byte[1 << 16];
    try (InputStream in = Files.newInputStream(p)) {
      int r;
      while ((r = in.read(buf)) > 0) {
        c.update(buf, 0, r);
      }
    }
    return c.getValue();
  }

  private static int crc(byte[] b, int len) {
    CRC32C c = new CRC32C();
    c.update(b, 0, len);
    return (int) c.getValue();
  }

  private static void writeInt(OutputStream out, int v) throws IOException {
    out.write(v);
    out.write(v >>> 8);
    out.write(v >>> 16);
    out.write(v >>> 24);
  }

  private static void writeLong(OutputStream out, long v) throws IOException {
    writeInt(out, (int) v);
    writeInt(out, (int) (v >>> 32));
  }

  private static int readInt(DataInputStream in) throws IOException {
    return Integer.reverseBytes(in.readInt());
  }

  private static long readLong(DataInputStream in) throws IOException {
    return Long.reverseBytes(in.readLong());
  }
}
