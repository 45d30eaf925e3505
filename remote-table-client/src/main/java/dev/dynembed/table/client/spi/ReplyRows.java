package dev.dynembed.table.client.spi;

import dev.dynembed.table.common.Rows;
import dev.dynembed.table.v1.RowEncoding;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * The rows of one reply, read where they arrived: a float array (in process) or the reply's bytes
 * in their wire encoding, decoded straight into the caller's array when a row is copied out (no
 * intermediate float array for remote replies).
 */
public abstract class ReplyRows {
  public final int dim;

  private ReplyRows(int dim) {
    this.dim = dim;
  }

  /** Number of rows. */
  public abstract int size();

  /** Copies row {@code row} into {@code dst} at {@code off}. */
  public abstract void get(int row, float[] dst, int off);

  /** Copies every row into {@code dst} from {@code off}. */
  public abstract void getAll(float[] dst, int off);

  /** All rows as an array of [size, dim] (not copied when they already are one). */
  public abstract float[] toArray();

  /**
   * These rows cut to their first {@code width} values of each of {@code blocks} blocks (a row,
   * or a key's slot rows one after another): what a client that opened a table at a width reads
   * of a shard that grew it since (the old columns of every row and slot).
   */
  public ReplyRows narrowed(int blocks, int width) {
    if (dim % blocks != 0 || width > dim / blocks) {
      throw new IllegalArgumentException("rows of dim " + dim + " cannot narrow to " + blocks
          + " blocks of " + width);
    }
    return width == dim / blocks ? this : new Narrowed(this, blocks, width);
  }

  private static final class Narrowed extends ReplyRows {
    private final ReplyRows wide;
    private final int blocks;
    private final int width;

    Narrowed(ReplyRows wide, int blocks, int width) {
      super(blocks * width);
      this.wide = wide;
      this.blocks = blocks;
      this.width = width;
    }

    @Override
    public int size() {
      return wide.size();
    }

    @Override
    public void get(int row, float[] dst, int off) {
      get(row, dst, off, new float[wide.dim]);
    }

    /** Row {@code row}'s old columns into {@code dst}, read through {@code w} (a wide row). */
    private void get(int row, float[] dst, int off, float[] w) {
      wide.get(row, w, 0);
      int from = wide.dim / blocks;
      for (int b = 0; b < blocks; b++) {
        System.arraycopy(w, b * from, dst, off + b * width, width);
      }
    }

    @Override
    public void getAll(float[] dst, int off) {
      float[] w = new float[wide.dim]; // one wide row read at a time
      for (int r = 0; r < size(); r++) {
        get(r, dst, off + r * dim, w);
      }
    }

    @Override
    public float[] toArray() {
      float[] out = new float[size() * dim];
      getAll(out, 0);
      return out;
    }
  }

  public static ReplyRows of(float[] rows, int dim) {
    return new Floats(rows, dim);
  }

  /** Rows of a reply's bytes (little-endian, {@code encoding}). */
  public static ReplyRows of(ByteBuffer bytes, RowEncoding encoding, int dim) {
    RowEncoding e = Rows.normalize(encoding);
    ByteBuffer le = bytes.slice().order(ByteOrder.LITTLE_ENDIAN);
    return e == RowEncoding.FLOAT32 ? new Float32(le.asFloatBuffer(), dim)
        : new Encoded16(le, e, dim);
  }

  private static final class Floats extends ReplyRows {
    private final float[] rows;

    Floats(float[] rows, int dim) {
      super(dim);
      this.rows = rows;
    }

    @Override
    public int size() {
      return rows.length / dim;
    }

    @Override
    public void get(int row, float[] dst, int off) {
      System.arraycopy(rows, row * dim, dst, off, dim);
    }

    @Override
    public void getAll(float[] dst, int off) {
      System.arraycopy(rows, 0, dst, off, rows.length);
    }

    @Override
    public float[] toArray() {
      return rows;
    }
  }

  private static final class Float32 extends ReplyRows {
    private final FloatBuffer rows;

    Float32(FloatBuffer rows, int dim) {
      super(dim);
      this.rows = rows;
    }

    @Override
    public int size() {
      return rows.limit() / dim;
    }

    @Override
    public void get(int row, float[] dst, int off) {
      rows.get(row * dim, dst, off, dim);
    }

    @Override
    public void getAll(float[] dst, int off) {
      rows.get(0, dst, off, rows.limit());
    }

    @Override
    public float[] toArray() {
      float[] out = new float[rows.limit()];
      getAll(out, 0);
      return out;
    }
  }

  private static final class Encoded16 extends ReplyRows {
    private final ByteBuffer bytes;
    private final RowEncoding encoding;

    Encoded16(ByteBuffer bytes, RowEncoding encoding, int dim) {
      super(dim);
      this.bytes = bytes;
      this.encoding = encoding;
    }

    @Override
    public int size() {
      return bytes.limit() / 2 / dim;
    }

    @Override
    public void get(int row, float[] dst, int off) {
      Rows.decode(bytes.duplicate().position(2 * row * dim), encoding, dst, off, dim);
    }

    @Override
    public void getAll(float[] dst, int off) {
      Rows.decode(bytes, encoding, dst, off, bytes.limit() / 2);
    }

    @Override
    public float[] toArray() {
      float[] out = new float[bytes.limit() / 2];
      getAll(out, 0);
      return out;
    }
  }
}
