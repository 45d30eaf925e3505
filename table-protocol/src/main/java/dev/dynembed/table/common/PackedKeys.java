package dev.dynembed.table.common;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import dev.dynembed.table.v1.KeyBatch;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An immutable batch of string keys held as concatenated UTF-8 bytes plus offsets, the form keys
 * take on the wire ({@link KeyBatch}) and in the table's key arena. Hashes are computed once, on
 * first use.
 */
public final class PackedKeys {
  private final byte[] utf8;
  private final int[] offsets; // size() + 1 entries
  private long[] hashes;

  private PackedKeys(byte[] utf8, int[] offsets) {
    this.utf8 = utf8;
    this.offsets = offsets;
  }

  /**
   * Packs Java strings. One output buffer, no per-key allocation: ASCII keys (the common case)
   * are copied char by char, others go through the UTF-8 encoder. Unpaired surrogates become
   * '?', as {@link String#getBytes} does.
   */
  public static PackedKeys of(String... keys) {
    int n = keys.length;
    int[] offsets = new int[n + 1];
    int cap = 0;
    for (int i = 0; i < n; i++) {
      if (keys[i] == null) {
        throw TableException.invalid("key %d is null", i);
      }
      cap += keys[i].length();
    }
    byte[] utf8 = new byte[Math.max(cap, 16)];
    int p = 0;
    for (int i = 0; i < n; i++) {
      String k = keys[i];
      int len = k.length();
      if (p + 3 * len > utf8.length) {
        utf8 = Arrays.copyOf(utf8, Math.max(utf8.length * 2, p + 3 * len));
      }
      int start = p;
      int j = 0;
      for (; j < len; j++) {
        char c = k.charAt(j);
        if (c >= 0x80) {
          break;
        }
        utf8[p++] = (byte) c;
      }
      if (j < len) { // not ASCII: encode the whole key properly
        byte[] b = k.getBytes(StandardCharsets.UTF_8);
        if (start + b.length > utf8.length) {
          utf8 = Arrays.copyOf(utf8, Math.max(utf8.length * 2, start + b.length));
        }
        System.arraycopy(b, 0, utf8, start, b.length);
        p = start + b.length;
      }
      offsets[i + 1] = p;
    }
    return new PackedKeys(utf8.length == p ? utf8 : Arrays.copyOf(utf8, p), offsets);
  }

  /** Wraps arrays built by a {@link Builder}; no copy. */
  static PackedKeys wrap(byte[] utf8, int[] offsets) {
    return new PackedKeys(utf8, offsets);
  }

  /**
   * Reads a wire batch and checks it: lengths add up, every key is 1..maxKeyBytes bytes of valid
   * UTF-8, and the batch holds at most {@link Limits#MAX_BATCH_KEYS} keys.
   *
   * @param what names the batch in error messages ("keys", "positives")
   */
  public static PackedKeys fromProto(KeyBatch batch, int maxKeyBytes, String what) {
    int n = batch.getLengthsCount();
    if (n > Limits.MAX_BATCH_KEYS) {
      throw TableException.exhausted(
          "%s: batch of %d keys exceeds the limit of %d", what, n, Limits.MAX_BATCH_KEYS);
    }
    byte[] utf8 = batch.getUtf8().toByteArray();
    int[] offsets = new int[n + 1];
    long total = 0;
    for (int i = 0; i < n; i++) {
      int len = batch.getLengths(i);
      if (len == 0) {
        throw TableException.invalid("%s: key %d is empty", what, i);
      }
      if (len > maxKeyBytes || len < 0) {
        throw TableException.invalid(
            "%s: key %d is %d bytes long; the limit is %d bytes",
            what, i, Integer.toUnsignedLong(len), maxKeyBytes);
      }
      total += len;
      if (total > utf8.length) {
        break;
      }
      offsets[i + 1] = (int) total;
    }
    if (total != utf8.length) {
      throw TableException.invalid(
          "%s: key lengths add up to %d bytes but the batch holds %d bytes",
          what, total, utf8.length);
    }
    if (!batch.getUtf8().isValidUtf8()) {
      throw TableException.invalid("%s: key bytes are not valid UTF-8", what);
    }
    for (int i = 0; i < n; i++) {
      if ((utf8[offsets[i]] & 0xC0) == 0x80) {
        throw TableException.invalid("%s: key %d does not start on a UTF-8 character", what, i);
      }
    }
    return new PackedKeys(utf8, offsets);
  }

  public KeyBatch toProto() {
    KeyBatch.Builder b = KeyBatch.newBuilder().setUtf8(UnsafeByteOperations.unsafeWrap(utf8));
    for (int i = 0; i < size(); i++) {
      b.addLengths(offsets[i + 1] - offsets[i]);
    }
    return b.build();
  }

  public int size() {
    return offsets.length - 1;
  }

  public byte[] bytes() {
    return utf8;
  }

  public int offset(int i) {
    return offsets[i];
  }

  public int length(int i) {
    return offsets[i + 1] - offsets[i];
  }

  /** Key i's UTF-8 bytes, copied out of the batch. */
  public byte[] keyBytes(int i) {
    return Arrays.copyOfRange(utf8, offsets[i], offsets[i + 1]);
  }

  public String key(int i) {
    return new String(utf8, offsets[i], length(i), StandardCharsets.UTF_8);
  }

  public String[] toStrings() {
    String[] out = new String[size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = key(i);
    }
    return out;
  }

  /** {@link KeyHashing#hash} of key i, computed once for the whole batch. */
  public long hash(int i) {
    long[] h = hashes;
    if (h == null) {
      h = new long[size()];
      for (int j = 0; j < h.length; j++) {
        h[j] = KeyHashing.hash(utf8, offsets[j], offsets[j + 1] - offsets[j]);
      }
      hashes = h;
    }
    return h[i];
  }

  /** Whether key i equals the given bytes. */
  public boolean keyEquals(int i, byte[] other, int otherOffset, int otherLength) {
    return Arrays.equals(
        utf8, offsets[i], offsets[i + 1], other, otherOffset, otherOffset + otherLength);
  }

  /** Appends keys one at a time (UTF-8 bytes), growing as needed. */
  public static final class Builder {
    private byte[] utf8;
    private int[] offsets;
    private int n;

    public Builder(int expectedKeys) {
      utf8 = new byte[Math.max(16, expectedKeys * 12)];
      offsets = new int[expectedKeys + 1];
    }

    public Builder add(byte[] src, int offset, int length) {
      int end = offsets[n] + length;
      if (end > utf8.length) {
        utf8 = Arrays.copyOf(utf8, Math.max(end, utf8.length * 2));
      }
      if (n + 2 > offsets.length) {
        offsets = Arrays.copyOf(offsets, offsets.length * 2 + 1);
      }
      System.arraycopy(src, offset, utf8, offsets[n], length);
      offsets[++n] = end;
      return this;
    }

    public Builder add(PackedKeys keys, int i) {
      return add(keys.utf8, keys.offsets[i], keys.length(i));
    }

    public int size() {
      return n;
    }

    public PackedKeys build() {
      return new PackedKeys(
          utf8.length == offsets[n] ? utf8 : Arrays.copyOf(utf8, offsets[n]),
          offsets.length == n + 1 ? offsets : Arrays.copyOf(offsets, n + 1));
    }

    /** The wire form, without the intermediate copy. */
    public KeyBatch toProto() {
      KeyBatch.Builder b =
          KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(utf8, 0, offsets[n]));
      for (int i = 0; i < n; i++) {
        b.addLengths(offsets[i + 1] - offsets[i]);
      }
      return b.build();
    }
  }
}
