package dev.dynembed.table.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.dynembed.table.v1.KeyBatch;
import org.junit.jupiter.api.Test;

class PackedKeysTest {
  @Test
  void toProtoFromProto_roundTrip_keepsKeysInOrder() {
    String[] keys = {"a", "bb", "東京", "a"};
    PackedKeys back = PackedKeys.fromProto(PackedKeys.of(keys).toProto(), 256, "keys");
    assertArrayEquals(keys, back.toStrings());
  }

  @Test
  void fromProto_lengthsDoNotAddUp_isInvalid() {
    KeyBatch b = KeyBatch.newBuilder().setUtf8(ByteString.copyFromUtf8("abc")).addLengths(2).build();
    TableException e = assertThrows(TableException.class, () -> PackedKeys.fromProto(b, 256, "keys"));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("add up to 2 bytes but the batch holds 3"), e.getMessage());
  }

  @Test
  void fromProto_invalidUtf8_isInvalid() {
    KeyBatch b = KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(new byte[] {(byte) 0xff, 'a'}))
        .addLengths(2).build();
    TableException e = assertThrows(TableException.class, () -> PackedKeys.fromProto(b, 256, "keys"));
    assertTrue(e.getMessage().contains("not valid UTF-8"), e.getMessage());
  }

  @Test
  void fromProto_splitInsideCharacter_isInvalid() {
    byte[] b = "東".getBytes(java.nio.charset.StandardCharsets.UTF_8); // 3 bytes
    KeyBatch kb = KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(b)).addLengths(1).addLengths(2)
        .build();
    assertThrows(TableException.class, () -> PackedKeys.fromProto(kb, 256, "keys"));
  }

  @Test
  void fromProto_emptyAndOverlongKeys_areInvalid() {
    KeyBatch empty = KeyBatch.newBuilder().setUtf8(ByteString.copyFromUtf8("ab")).addLengths(0)
        .addLengths(2).build();
    assertTrue(assertThrows(TableException.class, () -> PackedKeys.fromProto(empty, 256, "keys"))
        .getMessage().contains("key 0 is empty"));
    KeyBatch longKey = PackedKeys.of("x".repeat(300)).toProto();
    assertTrue(assertThrows(TableException.class, () -> PackedKeys.fromProto(longKey, 256, "keys"))
        .getMessage().contains("300 bytes long; the limit is 256"));
  }

  @Test
  void of_nullKey_isInvalid() {
    assertThrows(TableException.class, () -> PackedKeys.of("a", null));
  }

  @Test
  void batchDedup_duplicates_mapToFirstOccurrence() {
    PackedKeys k = PackedKeys.of("x", "y", "x", "z", "y", "x");
    BatchDedup d = BatchDedup.of(k);
    assertEquals(3, d.uniqueCount());
    assertFalse(d.allDistinct());
    int[] expected = {0, 1, 0, 2, 1, 0};
    for (int i = 0; i < expected.length; i++) {
      assertEquals(expected[i], d.uniqueOf(i));
    }
    assertEquals(3, d.firstPosition(2));
  }

  @Test
  void batchDedup_manyDistinctKeys_allDistinct() {
    String[] keys = new String[10_000];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "k" + i;
    }
    BatchDedup d = BatchDedup.of(PackedKeys.of(keys));
    assertTrue(d.allDistinct());
    assertEquals(keys.length, d.uniqueCount());
  }

  @Test
  void rows_encodeDecode_isLittleEndianFloat32() {
    float[] v = {1f, -2.5f, Float.MIN_VALUE, 3.4e38f};
    ByteString b = Rows.encode(v);
    assertEquals(16, b.size());
    assertEquals(0x00, b.byteAt(0));
    assertEquals(0x3f, b.byteAt(3) & 0xff); // 1.0f = 0x3f800000, little-endian
    assertArrayEquals(v, Rows.decode(b));
    assertThrows(TableException.class, () -> Rows.floatCount(ByteString.copyFrom(new byte[5]), "g"));
  }

  @Test
  void of_mixedAsciiAndUnicode_matchesStringGetBytes() {
    String[] keys = {"plain", "naïve", "東京タワー", "emoji 😀 key", "x", "\ud800lone"};
    PackedKeys k = PackedKeys.of(keys);
    int off = 0;
    for (int i = 0; i < keys.length; i++) {
      byte[] expected = keys[i].getBytes(java.nio.charset.StandardCharsets.UTF_8);
      assertEquals(off, k.offset(i));
      assertArrayEquals(expected, java.util.Arrays.copyOfRange(k.bytes(), k.offset(i),
          k.offset(i) + k.length(i)));
      off += expected.length;
    }
    assertEquals(off, k.bytes().length);
  }
}
