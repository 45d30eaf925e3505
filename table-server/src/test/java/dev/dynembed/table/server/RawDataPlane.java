package dev.dynembed.table.server;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;

/**
 * A client of the native data plane written from docs/design/0015 alone, over a plain socket:
 * none of the project's client or frame classes, so that what it sends is what an outside client
 * (or an attacker) would send, header fields and lengths included.
 */
final class RawDataPlane implements AutoCloseable {
  static final int HELLO = 1;
  static final int HELLO_OK = 2;
  static final int READ = 3;
  static final int WRITE = 4;
  static final int TOPK = 5;
  static final int READ_OK = 0x43;
  static final int WRITE_OK = 0x44;
  static final int TOPK_OK = 0x45;
  static final int ERROR = 0x7F;
  static final int VERSION = 2;

  /** A frame as received: kind, call number, body; for ERROR its code and description. */
  record Frame(int kind, long call, byte[] body) {
    String code() {
      return kind == ERROR ? new String(body, 1, body[0] & 0xFF, StandardCharsets.US_ASCII)
          : null;
    }

    String description() {
      int n = body[0] & 0xFF;
      return new String(body, 1 + n, body.length - 1 - n, StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
      return kind == ERROR ? "ERROR(call " + call + ") " + code() + ": " + description()
          : "frame kind 0x" + Integer.toHexString(kind) + " call " + call + " (" + body.length
              + " bytes)";
    }
  }

  final Socket socket;
  private final DataOutputStream out;
  private final DataInputStream in;

  RawDataPlane(String host, int port) throws IOException {
    socket = new Socket(host, port);
    socket.setTcpNoDelay(true);
    socket.setSoTimeout(30_000);
    out = new DataOutputStream(new java.io.BufferedOutputStream(socket.getOutputStream(), 1 << 16));
    in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream(), 1 << 16));
  }

  /** Opens a connection and sends HELLO; returns it once HELLO_OK came (fails otherwise). */
  static RawDataPlane open(int port, String token) throws IOException {
    RawDataPlane c = new RawDataPlane("127.0.0.1", port);
    c.hello(token);
    Frame f = c.read();
    if (f == null || f.kind() != HELLO_OK) {
      c.close();
      throw new IOException("HELLO answered " + f);
    }
    return c;
  }

  void hello(String token) throws IOException {
    byte[] t = token == null ? new byte[0] : token.getBytes(StandardCharsets.UTF_8);
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(4 + t.length);
    b.putShort((short) VERSION).putShort((short) t.length).put(t);
    send(HELLO, 0, b.array());
  }

  void send(int kind, long call, byte[] body) throws IOException {
    send(kind, 0, 0, call, body);
    flush();
  }

  /** Writes one frame without flushing (pipelining many). */
  void send(int kind, int flags, int reserved, long call, byte[] body) throws IOException {
    out.writeInt(12 + body.length);
    out.writeByte(kind);
    out.writeByte(flags);
    out.writeShort(reserved);
    out.writeLong(call);
    out.write(body);
  }

  /** Raw bytes, the length field included: for lies about lengths. */
  void sendRaw(byte[] bytes) throws IOException {
    out.write(bytes);
    out.flush();
  }

  void flush() throws IOException {
    out.flush();
  }

  /** The next frame, or null when the shard closed the connection. */
  Frame read() throws IOException {
    int length;
    try {
      length = in.readInt();
    } catch (EOFException | java.net.SocketException e) {
      return null;
    }
    if (length < 12 || length > (512 << 20) + 16) {
      throw new IOException("the shard sent a frame length of " + length);
    }
    int kind = in.readUnsignedByte();
    in.readUnsignedByte();
    in.readUnsignedShort();
    long call = in.readLong();
    byte[] body = new byte[length - 12];
    in.readFully(body);
    return new Frame(kind, call, body);
  }

  /** Whether the shard closed the connection within {@code millis} (frames before are read). */
  boolean closedWithin(long millis) throws IOException {
    socket.setSoTimeout((int) millis);
    try {
      while (true) {
        if (in.read() < 0) {
          return true;
        }
      }
    } catch (SocketTimeoutException e) {
      return false;
    } catch (java.net.SocketException e) {
      return true; // reset
    } finally {
      if (!socket.isClosed()) {
        socket.setSoTimeout(30_000);
      }
    }
  }

  @Override
  public void close() throws IOException {
    socket.close();
  }
}
