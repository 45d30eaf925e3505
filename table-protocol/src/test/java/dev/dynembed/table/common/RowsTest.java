package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.dynembed.table.v1.RowEncoding;
import java.math.BigDecimal;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The 16-bit row encodings round-trip within their stated error: bfloat16 and float16 give the
 * nearest representable value (ties to even), so the error is at most half a unit in the last
 * place: 2^-8 relative for bfloat16 (8 significant bits), 2^-11 for float16 normals (11), 2^-25
 * absolute for float16 subnormals. Checked against exact decimal arithmetic.
 */
class RowsTest {
  /** Values over every magnitude a row can hold, with their signs. */
  private static float[] samples(int n, int minExp, int maxExp, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      double m = 1 + r.nextDouble();
      int e = minExp + r.nextInt(maxExp - minExp + 1);
      v[i] = (float) ((r.nextBoolean() ? -1 : 1) * Math.scalb(m, e));
    }
    return v;
  }

  private static float[] roundTrip(float[] v, RowEncoding e) {
    ByteString b = Rows.encode(v, 0, v.length, e);
    assertEquals(v.length * 2, b.size(), "2 bytes per value");
    float[] out = new float[v.length];
    Rows.decode(b, e, out, 0);
    return out;
  }

  /** Whether d is a nearest value to x among a and b (the representable neighbours of x). */
  private static void assertNearest(float x, float d, float other, String what) {
    if (!Float.isFinite(other)) {
      return; // d is the largest finite value: no neighbour beyond it
    }
    BigDecimal ex = new BigDecimal(x);
    BigDecimal errD = new BigDecimal(d).subtract(ex).abs();
    BigDecimal errO = new BigDecimal(other).subtract(ex).abs();
    assertTrue(errD.compareTo(errO) <= 0, what + ": " + x + " decoded as " + d + " but "
        + other + " is nearer");
  }

  @Test
  void bfloat16_roundTrip_isNearestWithinHalfUlp() {
    float[] v = samples(200_000, -126, 126, 1);
    float[] d = roundTrip(v, RowEncoding.BFLOAT16);
    for (int i = 0; i < v.length; i++) {
      double rel = Math.abs((double) d[i] - v[i]) / Math.abs(v[i]);
      assertTrue(rel <= 0x1p-8, v[i] + " -> " + d[i] + ": relative error " + rel);
      // the other neighbour: one bfloat16 step away on the far side of x
      int bits = Float.floatToRawIntBits(d[i]);
      boolean above = Math.abs(d[i]) > Math.abs(v[i]);
      float other = Float.intBitsToFloat(above ? bits - 0x10000 : bits + 0x10000);
      assertNearest(v[i], d[i], other, "bfloat16");
    }
  }

  @Test
  void bfloat16_tiesGoToEven_andSpecialsSurvive() {
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even mantissa (1)
    assertEquals(1f, Rows.bf16ToFloat(Rows.floatToBf16(1f + 0x1p-8f)));
    // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties to 1 + 2^-6
    assertEquals(1f + 0x1p-6f, Rows.bf16ToFloat(Rows.floatToBf16(1f + 3 * 0x1p-8f)));
    assertTrue(Float.isNaN(Rows.bf16ToFloat(Rows.floatToBf16(Float.NaN))));
    assertEquals(Float.POSITIVE_INFINITY,
        Rows.bf16ToFloat(Rows.floatToBf16(Float.POSITIVE_INFINITY)));
    assertEquals(Float.floatToRawIntBits(-0f),
        Float.floatToRawIntBits(Rows.bf16ToFloat(Rows.floatToBf16(-0f))));
  }

  @Test
  void float16_normals_areNearestWithinHalfUlp() {
    float[] v = samples(200_000, -14, 14, 2); // the top binade: the overflow test
    float[] d = roundTrip(v, RowEncoding.FLOAT16);
    for (int i = 0; i < v.length; i++) {
      double rel = Math.abs((double) d[i] - v[i]) / Math.abs(v[i]);
      assertTrue(rel <= 0x1p-11, v[i] + " -> " + d[i] + ": relative error " + rel);
      float ulp = Math.ulp(d[i]) * 0x1p13f; // float16 has 13 fewer mantissa bits
      float other = Math.abs(d[i]) > Math.abs(v[i]) ? d[i] - Math.copySign(ulp, d[i])
          : d[i] + Math.copySign(ulp, d[i]);
      assertNearest(v[i], d[i], other, "float16");
    }
  }

  @Test
  void float16_subnormals_areWithinHalfTheirUnit() {
    float[] v = samples(100_000, -26, -15, 3);
    float[] d = roundTrip(v, RowEncoding.FLOAT16);
    for (int i = 0; i < v.length; i++) {
      double abs = Math.abs((double) d[i] - v[i]);
      assertTrue(abs <= 0x1p-25, v[i] + " -> " + d[i] + ": absolute error " + abs);
      // decoded values are multiples of the subnormal unit 2^-24
      assertEquals(0, Math.IEEEremainder(d[i], 0x1p-24), 0, v[i] + " -> " + d[i]);
    }
    assertEquals(0f, Rows.fp16ToFloat(Rows.floatToFp16(0x1p-26f)));
    assertEquals(0x1p-24f, Rows.fp16ToFloat(Rows.floatToFp16(0x1.8p-25f)));
  }

  @Test
  void float16_valueBeyondRange_isRefusedWhenWritten() {
    float[] row = {1f, 70_000f, 2f};
    TableException e = assertThrows(TableException.class,
        () -> Rows.encode(row, 0, row.length, RowEncoding.FLOAT16));
    assertTrue(e.getMessage().contains("70000.0 is beyond the range of FLOAT16"), e.getMessage());
    assertTrue(e.getMessage().contains("FLOAT32 or BFLOAT16"), e.getMessage());
    // the largest finite float16 and bfloat16's range still go through
    assertEquals(65504f, roundTrip(new float[] {65504f}, RowEncoding.FLOAT16)[0]);
    assertEquals(70_144f, roundTrip(new float[] {70_000f}, RowEncoding.BFLOAT16)[0]);
  }

  @Test
  void float32_isExact() {
    float[] v = samples(1_000, -126, 127, 4);
    float[] d = new float[v.length];
    Rows.decode(Rows.encode(v), d, 0);
    assertEquals(java.util.Arrays.toString(v), java.util.Arrays.toString(d));
  }
}
