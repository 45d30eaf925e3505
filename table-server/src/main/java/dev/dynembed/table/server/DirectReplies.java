package dev.dynembed.table.server;

import com.google.protobuf.CodedOutputStream;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.dataplane.DataPlaneFrames;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ProtoItems;
import dev.dynembed.table.engine.ShardCommands;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadResult;
import dev.dynembed.table.v1.RowEncoding;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * A Read call's items as the native data plane answers them: each answer is the wire bytes of
 * one {@code ReadResponse.results} entry in pooled direct buffers, so that the reply frame is
 * the header and these buffers, written to the socket as they are (gathering write). A plain
 * find or find_or_insert (the training step's reads) is encoded by hand ({@link DirectOut}), and
 * a sample's drawn rows ({@link SampleOut}): the store copies each row from its pages straight
 * into the outgoing buffer, with no reply array to allocate, zero, fill and copy again. Pooled
 * reads are built as protobuf messages by {@link TableGrpcService} and serialized. The client parses the
 * frame as the same {@code ReadResponse} either way (DataPlaneTest: bit for bit the gRPC reply).
 */
final class DirectReplies implements ShardCommands.ReadItems<ReadItem, ByteBuf> {
  private static final int TAG_LEN_1 = (1 << 3) | 2; // field 1, length-delimited
  /** Room before a find's fields for the two enclosing headers (tag and length, each). */
  private static final int RESERVE = 2 * (1 + 5);

  private final ShardEngine engine;
  private final ShardCommands.ReadItems<ReadItem, ReadResult> proto;
  private final ByteBufAllocator alloc;

  DirectReplies(ShardEngine engine, TableGrpcService service, ByteBufAllocator alloc) {
    this.engine = engine;
    this.proto = ProtoItems.reads(service::runItem);
    this.alloc = alloc;
  }

  @Override
  public String table(ReadItem item) {
    return proto.table(item);
  }

  @Override
  public ShardCommands.Inserts inserts(ReadItem item) {
    return proto.inserts(item);
  }

  @Override
  public ShardCommands.ReadCost cost(ReadItem item, dev.dynembed.table.engine.TableStore t) {
    return proto.cost(item, t);
  }

  @Override
  public FindOrInsertRequest logged(ReadItem item, boolean noCount) {
    return proto.logged(item, noCount);
  }

  @Override
  public void discard(ByteBuf answer) {
    answer.release();
  }

  @Override
  public ByteBuf run(ReadItem item, boolean resent) {
    if (item.getItemCase() == ReadItem.ItemCase.FIND && !item.getFind().hasPool()) {
      return written(new DirectOut(), out -> FindItems.find(engine, item.getFind(), out));
    }
    if (item.getItemCase() == ReadItem.ItemCase.FIND_OR_INSERT
        && !item.getFindOrInsert().hasPool()) {
      return written(new DirectOut(),
          out -> FindItems.findOrInsert(engine, item.getFindOrInsert(), resent, out));
    }
    if (item.getItemCase() == ReadItem.ItemCase.SAMPLE) {
      return written(new SampleOut(), out -> SampleItems.sample(engine, item.getSample(), out));
    }
    return serialized(proto.run(item, resent));
  }

  /** Runs an item into {@code out}; its buffer is released if the item fails. */
  private static <O extends Direct> ByteBuf written(O out,
      java.util.function.Function<O, ByteBuf> item) {
    try {
      return item.apply(out);
    } catch (RuntimeException | Error e) { // out of direct memory too
      out.release();
      throw e;
    }
  }

  /** A result built as a message, serialized behind its {@code results} header. */
  private ByteBuf serialized(ReadResult r) {
    int size = r.getSerializedSize();
    ByteBuf buf = alloc.directBuffer(1 + 5 + size);
    try {
      buf.writeByte(TAG_LEN_1);
      writeVarint(buf, size);
      DataPlaneFrames.writeMessage(buf, r, size);
      return buf;
    } catch (RuntimeException e) {
      buf.release();
      throw e;
    }
  }

  /**
   * An answer written into one direct buffer behind {@value #RESERVE} bytes of room for its
   * enclosing headers, with bytes fields of rows written by the store.
   */
  private abstract class Direct {
    ByteBuf buf;
    Rows.Writer rows;
    Rows.Writer slots;

    void allocate(long capacity) {
      if (capacity > dev.dynembed.table.common.Limits.MAX_MESSAGE_BYTES) {
        throw TableException.exhausted("a reply of %d bytes would exceed the limit of %d bytes;"
            + " send fewer keys per call", capacity,
            dev.dynembed.table.common.Limits.MAX_MESSAGE_BYTES);
      }
      buf = alloc.directBuffer((int) capacity);
      buf.writerIndex(RESERVE);
    }

    /** A bytes field's header, and a writer over the room for its bytes. */
    Rows.Writer field(int number, int bytes, RowEncoding encoding) {
      buf.writeByte((number << 3) | 2);
      writeVarint(buf, bytes);
      Rows.Writer w = new Rows.Writer(buf.nioBuffer(buf.writerIndex(), bytes), encoding);
      buf.writerIndex(buf.writerIndex() + bytes);
      return w;
    }

    public Rows.Writer rows() {
      return rows;
    }

    public Rows.Writer slots() {
      return slots;
    }

    /**
     * Writes the enclosing headers into the room left in front: {@code ReadResponse.results},
     * then field {@code resultField} of {@code ReadResult} holding {@code length} bytes (which
     * may continue past this buffer); the buffer then starts at them.
     */
    void enclose(int resultField, int length) {
      int result = 1 + varintSize(length) + length;
      int start = RESERVE - (1 + varintSize(length)) - (1 + varintSize(result));
      int end = buf.writerIndex();
      buf.writerIndex(start);
      buf.writeByte(TAG_LEN_1); // ReadResponse.results
      writeVarint(buf, result);
      buf.writeByte((resultField << 3) | 2);
      writeVarint(buf, length);
      buf.writerIndex(end).readerIndex(start);
    }

    void release() {
      if (buf != null) {
        buf.release();
        buf = null;
      }
    }
  }

  /**
   * A {@code SampleResponse}: the drawn rows (field 6) and slots (field 9) written by the store
   * into one direct buffer behind room for the enclosing headers ({@code ReadResponse.results},
   * {@code ReadResult.sample} = field 2), then the rest of the message serialized into a second
   * buffer; the answer is both, as one composite buffer.
   */
  private final class SampleOut extends Direct implements SampleItems.Out<ByteBuf> {
    @Override
    public void begin(int rowValues, int slotValues, RowEncoding encoding) {
      int bpv = Rows.bytesPerValue(encoding);
      long rowBytes = (long) rowValues * bpv;
      long slotBytes = slotValues < 0 ? -1 : (long) slotValues * bpv;
      long capacity = RESERVE + 6 + rowBytes + (slotBytes < 0 ? 0 : 6 + slotBytes);
      allocate(capacity);
      rows = field(6, (int) rowBytes, encoding);
      slots = slotBytes < 0 ? null : field(9, (int) slotBytes, encoding);
    }

    @Override
    public ByteBuf finish(dev.dynembed.table.v1.SampleResponse.Builder head) {
      dev.dynembed.table.v1.SampleResponse m = head.build();
      int headSize = m.getSerializedSize();
      if (buf == null) { // no rows: the headers and the message in one buffer
        allocate(RESERVE + headSize);
        DataPlaneFrames.writeMessage(buf, m, headSize);
        enclose(2, headSize); // ReadResult.sample
        ByteBuf only = buf;
        buf = null;
        return only;
      }
      ByteBuf tail = alloc.directBuffer(headSize);
      try {
        DataPlaneFrames.writeMessage(tail, m, headSize);
      } catch (RuntimeException e) {
        tail.release();
        throw e;
      }
      enclose(2, buf.writerIndex() - RESERVE + headSize); // ReadResult.sample
      ByteBuf both = alloc.compositeDirectBuffer(2).addComponents(true, buf, tail);
      buf = null;
      return both;
    }

  }

  /**
   * A {@code FindResponse} written field by field into one direct buffer, inside its {@code
   * ReadResult.rows} and {@code ReadResponse.results} headers (prepended at the end, when its
   * length is known, into the room left for them). Fields: dim 1, rows 2, found 3, frequencies
   * 4 (packed), row_encoding 5, slots 6, update_counts 7 (packed); protobuf takes them in any
   * order.
   */
  private final class DirectOut extends Direct implements FindItems.Out<ByteBuf> {
    @Override
    public void begin(int dim, RowEncoding encoding, int keys, long rowValues, long slotValues,
        boolean frequencies) {
      int bpv = Rows.bytesPerValue(encoding);
      long rowBytes = rowValues < 0 ? -1 : rowValues * bpv;
      long slotBytes = slotValues < 0 ? -1 : slotValues * bpv;
      long capacity = RESERVE + 12 + (rowBytes < 0 ? 0 : 6 + rowBytes)
          + (slotBytes < 0 ? 0 : 6 + slotBytes + 6 + 10L * keys) + 6 + (keys + 7) / 8
          + (frequencies ? 6 + 10L * keys : 0);
      allocate(capacity);
      if (dim != 0) {
        buf.writeByte(1 << 3);
        writeVarint(buf, dim);
      }
      if (rowBytes >= 0 && encoding.getNumber() != 0) { // with rows only, as the message has it
        buf.writeByte(5 << 3);
        writeVarint(buf, encoding.getNumber());
      }
      rows = rowBytes < 0 ? null : field(2, (int) rowBytes, encoding);
      slots = slotBytes < 0 ? null : field(6, (int) slotBytes, encoding);
    }

    @Override
    public ByteBuf finish(byte[] found, long[] frequencies, long[] updateCounts) {
      buf.writeByte((3 << 3) | 2);
      writeVarint(buf, found.length);
      buf.writeBytes(found);
      packed(4, frequencies);
      packed(7, updateCounts);
      enclose(1, buf.writerIndex() - RESERVE); // ReadResult.rows
      return buf;
    }

    private void packed(int number, long[] values) {
      if (values == null || values.length == 0) {
        return;
      }
      int size = 0;
      for (long v : values) {
        size += CodedOutputStream.computeUInt64SizeNoTag(v);
      }
      buf.writeByte((number << 3) | 2);
      writeVarint(buf, size);
      for (long v : values) {
        writeVarint(buf, v);
      }
    }

  }

  static int varintSize(int v) {
    return CodedOutputStream.computeUInt32SizeNoTag(v);
  }

  static void writeVarint(ByteBuf buf, long v) {
    while ((v & ~0x7FL) != 0) {
      buf.writeByte((int) ((v & 0x7F) | 0x80));
      v >>>= 7;
    }
    buf.writeByte((int) v);
  }
}
