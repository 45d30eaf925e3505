package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** Pooling and spreading are transposes; splitting over shards and adding the parts pools alike. */
class KeyBagsTest {
  private static final int DIM = 5;

  private static float[] random(Random r, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) r.nextGaussian();
    }
    return x;
  }

  /** 4 bags over 6 keys: a repeated key, an empty bag, weights and scales. */
  private static KeyBags sample() {
    return KeyBags.of(new int[] {3, 0, 2, 4}, new int[] {0, 1, 0, 2, 3, 4, 5, 1, 2},
        new float[] {1f, 2f, 1f, 0.5f, 1f, 1f, -1f, 3f, 1f}, new float[] {0.5f, 1f, 2f, 0.25f},
        6);
  }

  @Test
  void pool_isTheWeightedScaledSum_andEmptyBagsAreZero() {
    float[] rows = random(new Random(1), 6 * DIM);
    float[] out = sample().pool(rows, DIM);
    for (int j = 0; j < DIM; j++) {
      assertEquals(0.5f * (rows[j] + 2 * rows[DIM + j] + rows[j]), out[j], 1e-6);
      assertEquals(0f, out[DIM + j]);
      assertEquals(2f * (0.5f * rows[2 * DIM + j] + rows[3 * DIM + j]), out[2 * DIM + j], 1e-6);
    }
  }

  @Test
  void spread_isTheTransposeOfPool() {
    Random r = new Random(2);
    KeyBags b = sample();
    float[] rows = random(r, 6 * DIM);
    float[] g = random(r, 4 * DIM);
    float[] pooled = b.pool(rows, DIM);
    float[] spread = b.spread(g, 6, DIM);
    double lhs = 0;
    double rhs = 0;
    for (int i = 0; i < pooled.length; i++) {
      lhs += pooled[i] * g[i];
    }
    for (int i = 0; i < spread.length; i++) {
      rhs += rows[i] * spread[i];
    }
    assertEquals(lhs, rhs, 1e-5);
  }

  @Test
  void split_partsAddUpToTheWhole_andSurviveTheWire() {
    Random r = new Random(3);
    KeyBags b = sample();
    float[] rows = random(r, 6 * DIM);
    int[] shardOf = {1, 0, 1, 1, 0, 0};
    int[] pos = {0, 0, 1, 2, 1, 2};
    KeyBags[] parts = b.split(shardOf, pos, 2);
    float[] sum = new float[4 * DIM];
    for (int s = 0; s < 2; s++) {
      KeyBags p = KeyBags.fromProto(parts[s].toProto(), 3);
      assertEquals(4, p.bags());
      float[] shardRows = new float[3 * DIM];
      for (int k = 0; k < 6; k++) {
        if (shardOf[k] == s) {
          System.arraycopy(rows, k * DIM, shardRows, pos[k] * DIM, DIM);
        }
      }
      float[] part = p.pool(shardRows, DIM);
      for (int i = 0; i < sum.length; i++) {
        sum[i] += part[i];
      }
    }
    assertArrayEquals(b.pool(rows, DIM), sum, 1e-5f);
    assertEquals(-1, b.firstUnused(6));
    assertArrayEquals(new int[] {2, 2, 2, 1, 1, 1}, b.occurrences(6));
  }

  @Test
  void malformedBags_areRefusedWithWhatIsWrong() {
    assertMessage("bag sizes add up to more than 2 entries but 2 key indexes", () ->
        KeyBags.of(new int[] {1, 2}, new int[] {0, 1}, null, null, 2));
    assertMessage("bag entry 1 names key 7 but the request has 2 keys", () ->
        KeyBags.of(new int[] {2}, new int[] {0, 7}, null, null, 2));
    assertMessage("1 bag weights for 2 entries", () ->
        KeyBags.of(new int[] {2}, new int[] {0, 1}, new float[] {1f}, null, 2));
    assertMessage("scale of bag 0 is NaN", () ->
        KeyBags.of(new int[] {2}, new int[] {0, 1}, null, new float[] {Float.NaN}, 2));
    assertMessage("weight of bag entry 1 is Infinity", () -> KeyBags.of(new int[] {2},
        new int[] {0, 1}, new float[] {1f, Float.POSITIVE_INFINITY}, null, 2));
    assertMessage("1..1048576 bags but had 0", () ->
        KeyBags.of(new int[0], new int[0], null, null, 2));
    assertMessage("pooled gradients must hold 1 bags x dim 5 = 5 floats but had 4", () ->
        KeyBags.of(new int[] {1}, new int[] {0}, null, null, 1).spread(new float[4], 1, DIM));
    assertEquals(1, KeyBags.of(new int[] {1}, new int[] {0}, null, null, 2).firstUnused(2));
  }

  private static void assertMessage(String part, org.junit.jupiter.api.function.Executable e) {
    TableException x = assertThrows(TableException.class, e);
    assertEquals(ErrorCode.INVALID_ARGUMENT, x.code());
    assertTrue(x.getMessage().contains(part), x.getMessage());
  }
}
