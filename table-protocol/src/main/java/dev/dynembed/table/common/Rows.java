package dev.dynembed.table.common;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Rows on the wire: packed little-endian float32, row-major. */
public final class Rows {
  private Rows() {}

  /** Encodes {@code count} floats of {@code src} from {@code offset}; one bulk copy. */
  public static ByteString encode(float[] src, int offset, int count) {
    byte[] out = new byte[count * Float.BYTES];
    ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(src, offset, count);
    return UnsafeByteOperations.unsafeWrap(out);
  }

  public static ByteString encode(float[] src) {
    return encode(src, 0, src.length);
  }

  /** Number of floats in a packed buffer; rejects a byte count that is not a multiple of 4. */
  public static int floatCount(ByteString bytes, String what) {
    if ((bytes.size() & 3) != 0) {
      throw TableException.invalid(
          "%s: %d bytes is not a whole number of float32 values", what, bytes.size());
    }
    return bytes.size() >>> 2;
  }

  /** Decodes packed floats into {@code dst} from {@code offset}. */
  public static void decode(ByteString bytes, float[] dst, int offset) {
    bytes.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer()
        .get(dst, offset, bytes.size() >>> 2);
  }

  public static float[] decode(ByteString bytes) {
    float[] out = new float[bytes.size() >>> 2];
    decode(bytes, out, 0);
    return out;
  }
}
