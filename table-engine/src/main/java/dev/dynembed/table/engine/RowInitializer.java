package dev.dynembed.table.engine;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.v1.InitializerConfig;

/**
 * Fills a new row as a pure function of (key hash, seed), so a row re-created on any shard, after
 * a restore into another shard count, or by another implementation, is identical.
 *
 * <p>Stream: {@code s0 = mix(keyHash ^ mix(seed + 0x9E3779B97F4A7C15))}; draw i is SplitMix64's
 * {@code mix(s0 + (i+1) * 0x9E3779B97F4A7C15)} (with {@code mix} the Murmur3 finalizer); a uniform
 * float in [0,1) is its top 24 bits times 2^-24; normals come from Box–Muller over two uniforms
 * (the truncated normal redraws beyond two standard deviations).
 */
public final class RowInitializer {
  private static final long GOLDEN = 0x9E3779B97F4A7C15L;

  private final InitializerConfig c;
  private final long seedMix;

  public RowInitializer(InitializerConfig c) {
    this.c = c;
    this.seedMix = KeyHashing.mix(c.getSeed() + GOLDEN);
  }

  /** Writes the row of the key of hash {@code keyHash} ({@link KeyHashing#hash}) at {@code off}. */
  public void fill(long keyHash, float[] dst, int off, int dim) {
    switch (c.getKind()) {
      case ZEROS -> java.util.Arrays.fill(dst, off, off + dim, 0f);
      case UNIFORM -> {
        Stream s = new Stream(keyHash ^ seedMix);
        float lo = c.getLow();
        float span = c.getHigh() - lo;
        for (int j = 0; j < dim; j++) {
          dst[off + j] = lo + span * s.nextFloat();
        }
      }
      case NORMAL, TRUNCATED_NORMAL -> {
        Stream s = new Stream(keyHash ^ seedMix);
        boolean truncated = c.getKind() == dev.dynembed.table.v1.InitializerKind.TRUNCATED_NORMAL;
        for (int j = 0; j < dim; j++) {
          double z;
          do {
            z = s.nextGaussian();
          } while (truncated && Math.abs(z) > 2.0);
          dst[off + j] = (float) (c.getMean() + c.getStddev() * z);
        }
      }
      default -> throw new IllegalStateException("unsupported initializer " + c.getKind());
    }
  }

  private static final class Stream {
    private long state;

    Stream(long seed) {
      state = KeyHashing.mix(seed);
    }

    long next() {
      state += GOLDEN;
      return KeyHashing.mix(state);
    }

    float nextFloat() {
      return (next() >>> 40) * 0x1.0p-24f;
    }

    double nextGaussian() {
      double u1 = ((next() >>> 11) + 1) * 0x1.0p-53; // (0, 1]
      double u2 = (next() >>> 11) * 0x1.0p-53;
      return Math.sqrt(-2.0 * Math.log(u1)) * Math.cos(2.0 * Math.PI * u2);
    }
  }
}
