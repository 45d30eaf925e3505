package dev.dynembed.table.common;

/**
 * The checks of a gradient batch that both ends make: the client before it splits a batch over
 * the shards (so that no shard applies a part another refuses), the shard before it applies one
 * (it cannot trust its callers). One definition, so both refuse the same batches with the same
 * messages.
 */
public final class GradientChecks {
  private GradientChecks() {}

  /**
   * Refuses (INVALID_ARGUMENT) a batch whose width is not keys x dim, with a NaN or infinite
   * value, with a key of 0 or more than {@code maxKeyBytes} bytes, or with a negative or
   * non-finite learning rate (0 means the table's own). Messages name the table, the key and the
   * column, and say that nothing was applied.
   */
  public static void check(String table, PackedKeys keys, int dim, int maxKeyBytes,
      float[] gradients, float learningRate) {
    int n = keys.size();
    if ((long) n * dim != gradients.length) {
      throw TableException.invalid(
          "table '%s' expects gradients of %d keys x dim %d = %d floats but the request had %d"
              + " floats (%s rows); nothing was applied",
          table, n, dim, (long) n * dim, gradients.length,
          gradients.length % dim == 0 ? String.valueOf(gradients.length / dim) : "not whole");
    }
    for (int i = 0; i < n; i++) {
      int len = keys.length(i);
      if (len == 0 || len > maxKeyBytes) {
        throw TableException.invalid("table '%s': key %d is %d bytes long; keys must be 1..%d"
            + " bytes (the table's max_key_bytes); nothing was applied", table, i, len,
            maxKeyBytes);
      }
    }
    int k = FloatKernels.firstNonFinite(gradients, 0, gradients.length);
    if (k >= 0) {
      throw TableException.invalid(
          "table '%s': gradient of key %d ('%s') column %d is %s; nothing was applied",
          table, k / dim, keys.key(k / dim), k % dim, gradients[k]);
    }
    if (!(learningRate >= 0f && learningRate <= Limits.MAX_LEARNING_RATE)) {
      throw TableException.invalid(
          "table '%s': learning_rate must be in [0, %s] (0 = the table's) but was %s; nothing"
              + " was applied", table, Limits.MAX_LEARNING_RATE, learningRate);
    }
  }

  /**
   * Refuses (INVALID_ARGUMENT) a batch whose gradients, summed per distinct key ({@code summed},
   * {@code dim} values a key) or times the learning rate, are not finite: two finite gradients
   * of one key can sum to infinity. {@code keyOf} names the key of a summed row.
   */
  public static void checkSummed(String table, float[] summed, int dim, float lr,
      java.util.function.IntFunction<String> keyOf, boolean duplicates) {
    if (duplicates) {
      int k = FloatKernels.firstNonFinite(summed, 0, summed.length);
      if (k >= 0) {
        throw TableException.invalid("table '%s': the gradients of key '%s' column %d sum to %s;"
            + " nothing was applied", table, keyOf.apply(k / dim), k % dim, summed[k]);
      }
    }
    if (lr <= 1f) {
      return; // |lr g| <= |g|, finite
    }
    for (int k = 0; k < summed.length; k++) {
      if (Float.isInfinite(summed[k] * lr)) {
        throw TableException.invalid("table '%s': gradient %s of key '%s' column %d times the"
            + " learning rate %s is not finite; nothing was applied", table, summed[k],
            keyOf.apply(k / dim), k % dim, lr);
      }
    }
  }

  /**
   * Refuses (INVALID_ARGUMENT) rows to assign ({@code EmbeddingTable.assign}: an import) whose
   * width is not keys x dim, with a value that is not finite or beyond &plusmn;{@link
   * Limits#MAX_ROW_VALUE}, with a key of 0 or more than {@code maxKeyBytes} bytes, with a key twice
   * (which of two values would win is not for the table to guess), or with frequencies that are
   * not one per key ({@code frequencies} may be null: counts unchanged).
   *
   * @return the batch's de-duplication (every key distinct), for the caller to keep
   */
  public static BatchDedup checkAssign(String table, PackedKeys keys, int dim, int maxKeyBytes,
      float[] values, long[] frequencies) {
    int n = keys.size();
    if ((long) n * dim != values.length) {
      throw TableException.invalid(
          "table '%s' expects rows of %d keys x dim %d = %d floats but the request had %d"
              + " floats; nothing was assigned", table, n, dim, (long) n * dim, values.length);
    }
    if (frequencies != null && frequencies.length != n) {
      throw TableException.invalid("table '%s': %d frequencies for %d keys; nothing was assigned",
          table, frequencies.length, n);
    }
    for (int i = 0; i < n; i++) {
      int len = keys.length(i);
      if (len == 0 || len > maxKeyBytes) {
        throw TableException.invalid("table '%s': key %d is %d bytes long; keys must be 1..%d"
            + " bytes (the table's max_key_bytes); nothing was assigned", table, i, len,
            maxKeyBytes);
      }
      if (frequencies != null && frequencies[i] < 0) {
        throw TableException.invalid("table '%s': frequency %d of key '%s' is negative; nothing"
            + " was assigned", table, frequencies[i], keys.key(i));
      }
    }
    for (int k = 0; k < values.length; k++) {
      if (!(Math.abs(values[k]) <= Limits.MAX_ROW_VALUE)) {
        throw TableException.invalid("table '%s': value of key %d ('%s') column %d is %s; rows"
            + " hold finite values within +-%s; nothing was assigned", table, k / dim,
            keys.key(k / dim), k % dim, values[k], Limits.MAX_ROW_VALUE);
      }
    }
    BatchDedup dedup = BatchDedup.of(keys);
    if (!dedup.allDistinct()) {
      for (int i = 0; i < n; i++) {
        int first = dedup.firstPosition(dedup.uniqueOf(i));
        if (first != i) {
          throw TableException.invalid("table '%s': key '%s' is given twice (keys %d and %d) in"
              + " one assign; nothing was assigned", table, keys.key(i), first, i);
        }
      }
    }
    return dedup;
  }
}
