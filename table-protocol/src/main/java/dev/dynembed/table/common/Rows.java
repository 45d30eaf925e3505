package dev.dynembed.table.common;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import dev.dynembed.table.v1.RowEncoding;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * Rows on the wire: packed little-endian values, row-major, in one of the {@link RowEncoding}s
 * (docs/design/0001-wire-format.md, 0007-pipelined-steps.md). FLOAT32 is one bulk copy each way;
 * the 16-bit encodings convert value by value (about 1 ns per value either way, measured by
 * {@code KernelBench}) and halve the bytes.
 *
 * <p>BFLOAT16 is the upper half of the float32 bits, rounded to nearest even (NaN stays NaN).
 * FLOAT16 is IEEE 754 binary16 with round to nearest even; a finite row value beyond its range
 * (|x| &gt;= 65520, which would round to infinity) is refused when the row is written ({@link
 * Writer}), with a message that names the value and the encodings that can carry it.
 */
public final class Rows {
  private Rows() {}

  /** Bytes per value of an encoding. */
  public static int bytesPerValue(RowEncoding e) {
    return switch (e) {
      case BFLOAT16, FLOAT16 -> 2;
      default -> 4;
    };
  }

  /** FLOAT32 for UNSPECIFIED; rejects values this build does not know. */
  public static RowEncoding normalize(RowEncoding e) {
    return switch (e) {
      case ROW_ENCODING_UNSPECIFIED, FLOAT32 -> RowEncoding.FLOAT32;
      case BFLOAT16, FLOAT16 -> e;
      default -> throw TableException.invalid("row_encoding %s is not supported", e);
    };
  }

  /** Encodes {@code count} floats of {@code src} from {@code offset} as FLOAT32; one bulk copy. */
  public static ByteString encode(float[] src, int offset, int count) {
    return encode(src, offset, count, RowEncoding.FLOAT32);
  }

  public static ByteString encode(float[] src) {
    return encode(src, 0, src.length);
  }

  /** Encodes {@code count} floats of {@code src} from {@code offset}; the bytes are not copied again. */
  public static ByteString encode(float[] src, int offset, int count, RowEncoding e) {
    Writer w = new Writer(count, e);
    w.put(0, src, offset, count);
    return w.toByteString();
  }

  /** Number of floats in a FLOAT32 buffer; rejects a byte count that is not a multiple of 4. */
  public static int floatCount(ByteString bytes, String what) {
    return valueCount(bytes, RowEncoding.FLOAT32, what);
  }

  /** Number of values in a buffer of the encoding; rejects a byte count that is not whole. */
  public static int valueCount(ByteString bytes, RowEncoding e, String what) {
    int b = bytesPerValue(e);
    if (bytes.size() % b != 0) {
      throw TableException.invalid(
          "%s: %d bytes is not a whole number of %s values", what, bytes.size(), normalize(e));
    }
    return bytes.size() / b;
  }

  /** Decodes packed FLOAT32 values into {@code dst} from {@code offset}. */
  public static void decode(ByteString bytes, float[] dst, int offset) {
    decode(bytes, RowEncoding.FLOAT32, dst, offset);
  }

  public static float[] decode(ByteString bytes) {
    float[] out = new float[bytes.size() >>> 2];
    decode(bytes, out, 0);
    return out;
  }

  /** Decodes every value of {@code bytes} into {@code dst} from {@code offset}. */
  public static void decode(ByteString bytes, RowEncoding e, float[] dst, int offset) {
    ByteBuffer b = bytes.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    decode(b, e, dst, offset, bytes.size() / bytesPerValue(e));
  }

  /**
   * Decodes {@code count} values from {@code src} (little-endian, from its position) into {@code
   * dst}; the position is not moved.
   */
  public static void decode(ByteBuffer src, RowEncoding e, float[] dst, int offset, int count) {
    ByteBuffer b = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    switch (normalize(e)) {
      case FLOAT32 -> b.asFloatBuffer().get(dst, offset, count);
      case BFLOAT16 -> {
        ShortBuffer s = b.asShortBuffer();
        for (int i = 0; i < count; i++) {
          dst[offset + i] = bf16ToFloat(s.get(i));
        }
      }
      default -> {
        ShortBuffer s = b.asShortBuffer();
        for (int i = 0; i < count; i++) {
          dst[offset + i] = fp16ToFloat(s.get(i));
        }
      }
    }
  }

  /**
   * Writes rows straight into the bytes of a reply: values go from the store's pages into the
   * buffer that becomes the protobuf field (wrapped, not copied), in the requested encoding.
   */
  public static final class Writer implements RowSink {
    private final RowEncoding encoding;
    private final byte[] bytes; // null when writing into a caller's buffer
    private final FloatBuffer floats;
    private final ShortBuffer shorts;

    /** @param values the buffer's size in values */
    public Writer(int values, RowEncoding e) {
      this.encoding = normalize(e);
      this.bytes = new byte[values * bytesPerValue(encoding)];
      ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
      this.floats = encoding == RowEncoding.FLOAT32 ? b.asFloatBuffer() : null;
      this.shorts = encoding == RowEncoding.FLOAT32 ? null : b.asShortBuffer();
    }

    /**
     * Writes into {@code region} (from its position to its limit, typically a slice of an
     * outgoing network buffer), which need not hold zeros: missing rows are written as zeros.
     */
    public Writer(ByteBuffer region, RowEncoding e) {
      this.encoding = normalize(e);
      this.bytes = null;
      ByteBuffer b = region.slice().order(ByteOrder.LITTLE_ENDIAN);
      this.floats = encoding == RowEncoding.FLOAT32 ? b.asFloatBuffer() : null;
      this.shorts = encoding == RowEncoding.FLOAT32 ? null : b.asShortBuffer();
    }

    public RowEncoding encoding() {
      return encoding;
    }

    /** Writes {@code n} values of {@code src} from {@code off} at value index {@code at}. */
    public void put(int at, float[] src, int off, int n) {
      switch (encoding) {
        case FLOAT32 -> floats.put(at, src, off, n);
        case BFLOAT16 -> {
          for (int j = 0; j < n; j++) {
            shorts.put(at + j, floatToBf16(src[off + j]));
          }
        }
        default -> {
          for (int j = 0; j < n; j++) {
            short h = floatToFp16(src[off + j]);
            if ((h & 0x7C00) == 0x7C00 && Float.isFinite(src[off + j])) {
              throw TableException.invalid("a row value %s is beyond the range of FLOAT16 rows"
                  + " (|x| < 65520); read this table with FLOAT32 or BFLOAT16 rows",
                  src[off + j]);
            }
            shorts.put(at + j, h);
          }
        }
      }
    }

    @Override
    public void row(int i, float[] src, int off, int dim) {
      put(i * dim, src, off, dim);
    }

    @Override
    public void zeros(int i, int dim) {
      if (bytes != null) {
        return; // a fresh array starts as zeros, and every encoding writes zero as all-zero bits
      }
      if (floats != null) {
        for (int j = i * dim, end = j + dim; j < end; j++) {
          floats.put(j, 0f);
        }
      } else {
        for (int j = i * dim, end = j + dim; j < end; j++) {
          shorts.put(j, (short) 0);
        }
      }
    }

    /** The bytes as a protobuf field, without a copy; the writer must not be used afterwards. */
    public ByteString toByteString() {
      if (bytes == null) {
        throw new IllegalStateException("a writer into a caller's buffer has no bytes of its own");
      }
      return UnsafeByteOperations.unsafeWrap(bytes);
    }
  }

  // ------------------------------------------------------------------ 16-bit conversions

  /** float32 to bfloat16, round to nearest even; NaN stays a (quiet) NaN. */
  public static short floatToBf16(float f) {
    int bits = Float.floatToRawIntBits(f);
    if ((bits & 0x7FFF_FFFF) > 0x7F80_0000) {
      return (short) ((bits >>> 16) | 0x40); // NaN: keep sign and exponent, force a mantissa bit
    }
    return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
  }

  public static float bf16ToFloat(short h) {
    return Float.intBitsToFloat((h & 0xFFFF) << 16);
  }

  /** float32 to IEEE binary16, round to nearest even; overflow gives infinity. */
  public static short floatToFp16(float f) {
    int bits = Float.floatToRawIntBits(f);
    int sign = (bits >>> 16) & 0x8000;
    int abs = bits & 0x7FFF_FFFF;
    if (abs >= 0x7F80_0000) { // infinity or NaN
      return (short) (sign | 0x7C00 | (abs > 0x7F80_0000 ? 0x200 : 0));
    }
    if (abs >= 0x477F_F000) { // rounds to >= 65520: beyond binary16's largest finite value
      return (short) (sign | 0x7C00);
    }
    if (abs < 0x3880_0000) { // below 2^-14: a subnormal (or zero) of binary16
      if (abs < 0x3300_0000) { // below half the smallest subnormal (2^-25): rounds to zero
        return (short) sign;
      }
      int e = abs >>> 23; // 102..112
      int m = (abs & 0x7F_FFFF) | 0x80_0000; // 24-bit significand
      int shift = 126 - e; // value = m * 2^(e - 150); subnormal unit 2^-24: m >> (126 - e)
      int q = m >>> shift;
      int rem = m & ((1 << shift) - 1);
      int half = 1 << (shift - 1);
      if (rem > half || (rem == half && (q & 1) != 0)) {
        q++;
      }
      return (short) (sign | q);
    }
    // normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits
    int r = abs - 0x3800_0000; // exponent - 112
    r += 0xFFF + ((r >>> 13) & 1);
    return (short) (sign | (r >>> 13));
  }

  public static float fp16ToFloat(short h) {
    int bits = h & 0xFFFF;
    int sign = (bits & 0x8000) << 16;
    int exp = (bits >>> 10) & 0x1F;
    int mant = bits & 0x3FF;
    if (exp == 0x1F) {
      return Float.intBitsToFloat(sign | 0x7F80_0000 | (mant << 13));
    }
    if (exp == 0) {
      if (mant == 0) {
        return Float.intBitsToFloat(sign);
      }
      float v = mant * 0x1p-24f; // subnormal: exact in float
      return sign != 0 ? -v : v;
    }
    return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
}
