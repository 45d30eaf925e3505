package dev.dynembed.table.common;

import java.util.Arrays;

/**
 * Where a lookup writes its rows: a float array (in process) or the bytes of a reply ({@link
 * Rows.Writer}, which encodes as it copies). Row i of a batch of rows of {@code dim} values
 * occupies values {@code [i * dim, (i + 1) * dim)}.
 */
public interface RowSink {
  /** Writes {@code dim} values of {@code src} from {@code off} as row {@code i}. */
  void row(int i, float[] src, int off, int dim);

  /** Makes row {@code i} all zeros (a key without a row). */
  void zeros(int i, int dim);

  /** A sink over a float array, row-major. */
  static RowSink of(float[] out) {
    return new RowSink() {
      @Override
      public void row(int i, float[] src, int off, int dim) {
        System.arraycopy(src, off, out, i * dim, dim);
      }

      @Override
      public void zeros(int i, int dim) {
        Arrays.fill(out, i * dim, (i + 1) * dim, 0f);
      }
    };
  }
}
