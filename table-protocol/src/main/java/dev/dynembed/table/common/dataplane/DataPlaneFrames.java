package dev.dynembed.table.common.dataplane;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import com.google.protobuf.UnsafeByteOperations;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.TableException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ThreadFactory;

/**
 * The native data plane's frames (docs/design/0015-data-plane.md): the two calls of a training
 * step, {@code Read} and {@code Write}, over one TCP connection per client and shard, without
 * HTTP/2. A frame is
 *
 * <pre>
 *   offset size
 *   0      4    length of the rest of the frame (12 + body), big-endian, &lt;= MAX_FRAME
 *   4      1    kind (HELLO, HELLO_OK, READ, WRITE, READ_OK, WRITE_OK, ERROR)
 *   5      1    flags (0)
 *   6      2    reserved (0)
 *   8      8    call number: chosen by the client, echoed by the reply (many calls in flight)
 *   16     ...  body
 * </pre>
 *
 * Bodies of READ/WRITE/TOPK and their replies are the gRPC service's own messages ({@code
 * ReadRequest}, {@code WriteRequest}, {@code TopKRequest} and their responses) in protobuf's
 * wire form, so both transports share one contract, one validation and one command path on the
 * shard; what the data plane drops is HTTP/2 (framing, flow-control windows, HPACK), gRPC's
 * per-call machinery and its message copies. HELLO opens a connection: {@code u16 version, u16
 * token length, token (UTF-8)}; the shard answers HELLO_OK {@code u16 version} or ERROR and
 * closes. ERROR: {@code u8 length, canonical code name (ASCII), description (UTF-8)}.
 */
public final class DataPlaneFrames {
  private DataPlaneFrames() {}

  /**
   * The frame protocol's version; a shard refuses a HELLO of another. A client learns the shard's
   * from its gRPC {@code DataPlane} answer first and uses gRPC for a shard of another version.
   * 2 added TOPK.
   */
  public static final int VERSION = 2;
  /** Bytes before a frame's body, the length field included. */
  public static final int HEADER = 16;
  /** Largest frame (after the length field): the gRPC message limit plus the header. */
  public static final int MAX_FRAME = Limits.MAX_MESSAGE_BYTES + HEADER;

  public static final byte HELLO = 1;
  public static final byte HELLO_OK = 2;
  public static final byte READ = 3;
  public static final byte WRITE = 4;
  public static final byte TOPK = 5;
  public static final byte READ_OK = 0x43;
  public static final byte WRITE_OK = 0x44;
  public static final byte TOPK_OK = 0x45;
  public static final byte ERROR = 0x7F;

  /** The longest bearer token a HELLO may carry. */
  public static final int MAX_TOKEN_BYTES = 4096;

  /** A decoder that cuts the byte stream into whole frames (length field stripped). */
  public static LengthFieldBasedFrameDecoder frameDecoder() {
    return new LengthFieldBasedFrameDecoder(MAX_FRAME, 0, 4, 0, 4);
  }

  /**
   * A frame holding a protobuf message, written into one buffer of the allocator (direct and
   * pooled for Netty's default): the header, then the message serialized in place.
   */
  public static ByteBuf message(ByteBufAllocator alloc, byte kind, long call, MessageLite m) {
    int size = m.getSerializedSize();
    if (size > Limits.MAX_MESSAGE_BYTES) {
      throw TableException.exhausted("a %s frame of %d bytes exceeds the limit of %d bytes",
          kindName(kind), size, Limits.MAX_MESSAGE_BYTES);
    }
    ByteBuf buf = alloc.directBuffer(HEADER + size);
    try {
      header(buf, kind, call, size);
      writeMessage(buf, m, size);
      return buf;
    } catch (RuntimeException e) {
      buf.release();
      throw e;
    }
  }

  /**
   * Serializes {@code m} ({@code size} = its serialized size) at the buffer's writer index, in
   * place, and moves the index past it. The buffer must have room.
   */
  public static void writeMessage(ByteBuf buf, MessageLite m, int size) {
    try {
      CodedOutputStream out = CodedOutputStream.newInstance(buf.nioBuffer(buf.writerIndex(),
          size));
      m.writeTo(out);
      out.flush();
    } catch (IOException e) {
      throw new IllegalStateException("serializing into a buffer of the right size failed", e);
    }
    buf.writerIndex(buf.writerIndex() + size);
  }

  /**
   * A frame whose body is the given buffers one after the other (each already the wire bytes of
   * part of a message): the header in a buffer of its own, the parts not copied (a composite
   * buffer, written to the socket by one gathering write). Takes the parts over: they are
   * released with the frame, or here on failure.
   */
  public static ByteBuf parts(ByteBufAllocator alloc, byte kind, long call,
      java.util.List<ByteBuf> parts) {
    long size = 0;
    for (ByteBuf p : parts) {
      size += p.readableBytes();
    }
    if (size > Limits.MAX_MESSAGE_BYTES) {
      parts.forEach(ByteBuf::release);
      throw TableException.exhausted("a %s frame of %d bytes exceeds the limit of %d bytes",
          kindName(kind), size, Limits.MAX_MESSAGE_BYTES);
    }
    ByteBuf head = alloc.directBuffer(HEADER);
    header(head, kind, call, (int) size);
    io.netty.buffer.CompositeByteBuf frame = alloc.compositeDirectBuffer(parts.size() + 1);
    frame.addComponent(true, head);
    for (ByteBuf p : parts) {
      frame.addComponent(true, p);
    }
    return frame;
  }

  private static void header(ByteBuf buf, byte kind, long call, int bodySize) {
    buf.writeInt(HEADER - 4 + bodySize).writeByte(kind).writeByte(0).writeShort(0)
        .writeLong(call);
  }

  /** A HELLO frame: the client's version and its bearer token (null: none). */
  public static ByteBuf hello(ByteBufAllocator alloc, String token) {
    byte[] t = token == null ? new byte[0] : token.getBytes(StandardCharsets.UTF_8);
    ByteBuf buf = alloc.buffer(HEADER + 4 + t.length);
    header(buf, HELLO, 0, 4 + t.length);
    return buf.writeShort(VERSION).writeShort(t.length).writeBytes(t);
  }

  public static ByteBuf helloOk(ByteBufAllocator alloc) {
    ByteBuf buf = alloc.buffer(HEADER + 2);
    header(buf, HELLO_OK, 0, 2);
    return buf.writeShort(VERSION);
  }

  /** An ERROR frame answering call {@code call}. */
  public static ByteBuf error(ByteBufAllocator alloc, long call, ErrorCode code,
      String description) {
    byte[] name = code.grpcName().getBytes(StandardCharsets.US_ASCII);
    byte[] desc = (description == null ? "" : description).getBytes(StandardCharsets.UTF_8);
    ByteBuf buf = alloc.buffer(HEADER + 1 + name.length + desc.length);
    header(buf, ERROR, call, 1 + name.length + desc.length);
    return buf.writeByte(name.length).writeBytes(name).writeBytes(desc);
  }

  /** A received frame's header and body (the length field already stripped by the decoder). */
  public record Frame(byte kind, long call, ByteBuf body) {
    /**
     * Reads a frame from what {@link #frameDecoder} passed on; the body is a slice of it (not
     * retained: valid while the frame is).
     */
    public static Frame of(ByteBuf frame) {
      if (frame.readableBytes() < HEADER - 4) {
        throw TableException.invalid("data plane: a frame of %d bytes is shorter than its %d-byte"
            + " header", frame.readableBytes(), HEADER - 4);
      }
      byte kind = frame.readByte();
      frame.skipBytes(3);
      long call = frame.readLong();
      return new Frame(kind, call, frame.slice());
    }
  }

  /**
   * Parses a protobuf body. The bytes are copied once into a heap array that the message's byte
   * fields then alias (rows and keys are not copied again), so the message outlives the frame.
   */
  public static <M> M parse(ByteBuf body, Parser<M> parser, String what) {
    byte[] bytes = new byte[body.readableBytes()];
    body.getBytes(body.readerIndex(), bytes);
    return parse(CodedInputStream.newInstance(bytes), parser, what);
  }

  /** Parses with aliasing (byte fields share the input's memory) and no size limit. */
  private static <M> M parse(CodedInputStream in, Parser<M> parser, String what) {
    in.enableAliasing(true);
    in.setSizeLimit(Integer.MAX_VALUE);
    try {
      return parser.parseFrom(in);
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      throw TableException.invalid("data plane: a %s frame is not a valid message: %s", what,
          e.getMessage());
    }
  }

  /**
   * Parses a protobuf body in place: the message's byte fields (keys, gradients) alias the
   * frame's own (direct) memory, with no copy into a heap array. The message is valid only while
   * the frame is: the caller must hold the frame until it is done with the message and must not
   * keep any of its byte fields (the shard copies what it keeps: keys into its pages, gradients
   * into float arrays, log records into the log's buffer, all during the call).
   */
  public static <M> M parseInPlace(ByteBuf body, Parser<M> parser, String what) {
    // a decoder over a buffer it may treat as immutable: CodedInputStream.newInstance(ByteBuffer)
    // copies every bytes field into a fresh array even with aliasing enabled (protobuf aliases
    // only input it was told will not change), which was 8-12% of a shard's data-plane CPU
    return body.nioBufferCount() == 1
        ? parse(UnsafeByteOperations.unsafeWrap(body.nioBuffer()).newCodedInput(), parser, what)
        : parse(body, parser, what);
  }

  /** An ERROR frame's code and description. */
  public record Error(ErrorCode code, String description) {
    public static Error of(ByteBuf body) {
      int n = body.readUnsignedByte();
      String name = body.readCharSequence(n, StandardCharsets.US_ASCII).toString();
      String desc = body.readCharSequence(body.readableBytes(), StandardCharsets.UTF_8).toString();
      ErrorCode code;
      try {
        code = ErrorCode.valueOf(name);
      } catch (IllegalArgumentException e) {
        code = ErrorCode.INTERNAL;
        desc = name + ": " + desc;
      }
      return new Error(code, desc);
    }
  }

  public static String kindName(byte kind) {
    return switch (kind) {
      case HELLO -> "HELLO";
      case HELLO_OK -> "HELLO_OK";
      case READ -> "READ";
      case WRITE -> "WRITE";
      case TOPK -> "TOPK";
      case READ_OK -> "READ_OK";
      case WRITE_OK -> "WRITE_OK";
      case TOPK_OK -> "TOPK_OK";
      case ERROR -> "ERROR";
      default -> "unknown kind " + (kind & 0xFF);
    };
  }

  // ------------------------------------------------------------------ transport choice

  /** Whether Linux's epoll transport loaded (else Java NIO is used). */
  public static boolean epoll() {
    return Epoll.isAvailable();
  }

  public static EventLoopGroup eventLoops(int threads, String name) {
    ThreadFactory f = new io.netty.util.concurrent.DefaultThreadFactory(name, true);
    return epoll() ? new EpollEventLoopGroup(threads, f) : new NioEventLoopGroup(threads, f);
  }

  public static Class<? extends SocketChannel> socketChannel() {
    return epoll() ? EpollSocketChannel.class : NioSocketChannel.class;
  }

  public static Class<? extends ServerChannel> serverChannel() {
    return epoll() ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
  }
}
