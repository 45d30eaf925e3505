package dev.dynembed.ops;

import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.nd4j.linalg.api.buffer.DataBuffer;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.Shape;
import org.nd4j.linalg.factory.Nd4j;

/**
 * String-key arrays for the ops' inputs: make them with {@link #of}.
 *
 * <p><b>Why not {@code Nd4j.create(List<String>)}:</b> ND4J M2.1's UTF8 buffer built from Java
 * strings stores each {@code char} cast to a byte, so every non-ASCII key is corrupted ("naïve"
 * reads back as "na\uFFFDve", and distinct keys can collapse into one). {@link #of} encodes the
 * strings as UTF-8 itself and hands ND4J the finished buffer (offset header, then bytes) in one
 * bulk copy, which is also faster than M2.1's byte-by-byte JNI writes. An op that decodes a key
 * containing U+FFFD from an array not made here reports it ({@link DynamicEmbeddingLookup}).
 *
 * <p>{@link #of} also remembers the strings for the array's buffer, so that the ops reading that
 * array (the lookup, its backward, sampled logits: two or three reads per training step) get them
 * back instead of decoding the native buffer again: M2.1's {@code getString} reads every byte
 * through a JNI call, which was 3.6% of an in-process word2vec run's CPU. A view of a remembered
 * buffer that is not the whole of it in row-major order is decoded as before. The last {@value
 * #SLOTS} arrays are remembered, through weak references to their buffers (identity, not
 * contents), so nothing is kept alive here and no entry has to be removed. Prefetching threads
 * make arrays that training threads read: access is synchronized (a few calls per step).
 */
public final class KeyArrays {
  private KeyArrays() {}

  static final int SLOTS = 64;
  private static final Object LOCK = new Object();
  @SuppressWarnings("unchecked")
  private static final WeakReference<DataBuffer>[] BUFFERS = new WeakReference[SLOTS];
  private static final String[][] KEYS = new String[SLOTS][];
  private static int next;

  /** A UTF8 array of {@code keys} in row-major order with the given shape ([n] when omitted). */
  public static INDArray of(String[] keys, long... shape) {
    return make(keys.clone(), shape); // the caller may change its array afterwards
  }

  /** {@link #of} for a list. */
  public static INDArray of(List<String> keys, long... shape) {
    return make(keys.toArray(new String[0]), shape);
  }

  /** The keys of a UTF8 array of rank 1 or 2, in row-major order (as the ops read them). */
  public static List<String> toList(INDArray a) {
    return List.of(DynamicEmbeddingLookup.keys(a, "KeyArrays.toList"));
  }

  /** Builds the array of {@code keys} and remembers them; the array is not copied again. */
  private static INDArray make(String[] keys, long... shape) {
    long[] s = shape.length == 0 ? new long[] {keys.length} : shape;
    long product = 1;
    for (long d : s) {
      product *= d;
    }
    if (product != keys.length) {
      throw new IllegalArgumentException("KeyArrays.of: " + keys.length + " keys do not fill shape "
          + Arrays.toString(s));
    }
    int n = keys.length;
    byte[][] utf8 = new byte[n][];
    long total = 0;
    for (int i = 0; i < n; i++) {
      if (keys[i] == null) {
        throw new IllegalArgumentException("KeyArrays.of: key " + i + " is null");
      }
      utf8[i] = keys[i].getBytes(StandardCharsets.UTF_8);
      total += utf8[i].length;
    }
    long header = (n + 1L) * Long.BYTES;
    if (header + total > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException("KeyArrays.of: " + n + " keys of " + total
          + " UTF-8 bytes are more than one array can hold (2 GiB)");
    }
    // M2.1's Utf8Buffer layout: n + 1 offsets (native-order longs, relative to the data), then
    // the bytes
    byte[] buf = new byte[(int) (header + total)];
    ByteBuffer offsets = ByteBuffer.wrap(buf).order(ByteOrder.nativeOrder());
    long off = 0;
    for (int i = 0; i < n; i++) {
      offsets.putLong(i * Long.BYTES, off);
      System.arraycopy(utf8[i], 0, buf, (int) (header + off), utf8[i].length);
      off += utf8[i].length;
    }
    offsets.putLong(n * Long.BYTES, off);
    INDArray a = Nd4j.create(Nd4j.getDataBufferFactory().createUtf8Buffer(buf, n), s);
    synchronized (LOCK) {
      BUFFERS[next] = new WeakReference<>(a.data());
      KEYS[next] = keys;
      next = (next + 1) % SLOTS;
    }
    return a;
  }

  /**
   * The strings {@link #of} made {@code a} from (a fresh copy), or null when {@code a} was not
   * made there or is not all of its buffer in row-major order.
   */
  static String[] remembered(INDArray a) {
    DataBuffer buf = a.data();
    if (a.offset() != 0 || a.ordering() != 'c' || !Shape.hasDefaultStridesForShape(a)) {
      return null;
    }
    synchronized (LOCK) {
      for (int i = 0; i < SLOTS; i++) {
        WeakReference<DataBuffer> r = BUFFERS[i];
        if (r != null && r.get() == buf) {
          return KEYS[i].length == a.length() ? KEYS[i].clone() : null;
        }
      }
    }
    return null;
  }
}
