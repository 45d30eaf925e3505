package dev.dynembed.table.engine;

/**
 * Counts of keys awaiting admission in fixed memory: a count-min sketch (Cormode and
 * Muthukrishnan) of 4 rows of 32-bit counters with conservative update (Estan and Varghese): an
 * add raises each of the key's counters only as far as the key's new estimate. A key's estimate
 * is never below its true count (so a key is never admitted later than exact counting would admit
 * it) and exceeds it only through collisions with other keys. Deterministic: the rows' indexes
 * come from the key's 64-bit hash (the one that routes it to its shard) by double hashing, so a
 * replayed log or a restored checkpoint reproduces every counter.
 *
 * <p>Written here rather than taken from a library: the Java sketches with a stable serialised
 * form either need Java 21 (Apache DataSketches' CountMinSketch, 7.x and later) or are no longer
 * maintained (stream-lib), and Caffeine's frequency sketch is internal with 4-bit counters.
 * Thread-safe (synchronized: the admission path of keys without a row).
 */
public final class AdmissionSketch {
  static final int DEPTH = 4;

  private final int width;
  private final int[] counters; // DEPTH rows of width, row-major

  /** A sketch of {@code kib} KiB: width = kib * 1024 / (4 rows * 4 bytes). */
  AdmissionSketch(long kib) {
    long w = kib * 1024 / (DEPTH * 4L);
    if (w < 1 || w > Integer.MAX_VALUE / DEPTH) {
      throw new IllegalArgumentException("admission sketch of " + kib + " KiB");
    }
    this.width = (int) w;
    this.counters = new int[DEPTH * width];
  }

  private AdmissionSketch(int width, int[] counters) {
    this.width = width;
    this.counters = counters;
  }

  /** A sketch from its counters (checkpoint restore); their count must be DEPTH x width. */
  static AdmissionSketch of(int width, int[] counters) {
    if (width < 1 || counters.length != (long) DEPTH * width) {
      throw new IllegalArgumentException(counters.length + " counters for width " + width);
    }
    return new AdmissionSketch(width, counters);
  }

  int width() {
    return width;
  }

  long bytes() {
    return 4L * counters.length;
  }

  private int index(long hash, int row) {
    int h1 = (int) hash;
    int h2 = (int) (hash >>> 32) | 1; // odd: the rows' indexes differ
    return row * width + (int) (Integer.toUnsignedLong(h1 + row * h2) % width);
  }

  /** The key's estimated count (never below its true count). */
  synchronized long estimate(long hash) {
    long min = Long.MAX_VALUE;
    for (int r = 0; r < DEPTH; r++) {
      min = Math.min(min, Integer.toUnsignedLong(counters[index(hash, r)]));
    }
    return min;
  }

  /** Adds {@code occ} occurrences and returns the key's new estimate (conservative update). */
  synchronized long add(long hash, long occ) {
    long target = estimate(hash) + occ;
    int capped = (int) Math.min(target, 0xFFFF_FFFFL); // saturate at 2^32 - 1
    for (int r = 0; r < DEPTH; r++) {
      int i = index(hash, r);
      if (Integer.compareUnsigned(counters[i], capped) < 0) {
        counters[i] = capped;
      }
    }
    return Math.min(target, 0xFFFF_FFFFL);
  }

  /** Adds another sketch of the same width, counter by counter (saturating): a sketch of both. */
  synchronized void merge(AdmissionSketch other) {
    if (other.width != width) {
      throw new IllegalArgumentException("sketch widths differ: " + other.width + " vs " + width);
    }
    for (int i = 0; i < counters.length; i++) {
      counters[i] = (int) Math.min(Integer.toUnsignedLong(counters[i])
          + Integer.toUnsignedLong(other.counters[i]), 0xFFFF_FFFFL);
    }
  }

  /** A copy of the counters (checkpoints). */
  public synchronized int[] counters() {
    return counters.clone();
  }
}
