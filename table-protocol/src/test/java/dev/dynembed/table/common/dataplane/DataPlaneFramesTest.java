package dev.dynembed.table.common.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.WriteRequest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/**
 * Parsing a request in place aliases the frame's memory (the shard's keys and gradients are not
 * copied out of it), while {@link DataPlaneFrames#parse} gives a message that owns its bytes.
 */
class DataPlaneFramesTest {
  private static WriteRequest request() {
    ByteBuffer g = ByteBuffer.allocate(3 * 4 * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < 12; i++) {
      g.putFloat(i + 0.5f);
    }
    return WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder().setTable("t")
        .setKeys(PackedKeys.of(new String[] {"a", "bb", "ccc"}).toProto())
        .setGradients(ByteString.copyFrom(g.array())).setLearningRate(0.1f)).build();
  }

  private static ByteBuf direct(byte[] bytes) {
    ByteBuf b = Unpooled.directBuffer(bytes.length);
    b.writeBytes(bytes);
    return b;
  }

  @Test
  void parseInPlace_aliasesTheFrame_andParseCopies() {
    WriteRequest sent = request();
    byte[] wire = sent.toByteArray();
    ByteBuf inPlaceFrame = direct(wire);
    ByteBuf copiedFrame = direct(wire);
    try {
      WriteRequest inPlace =
          DataPlaneFrames.parseInPlace(inPlaceFrame, WriteRequest.parser(), "WRITE");
      WriteRequest copied = DataPlaneFrames.parse(copiedFrame, WriteRequest.parser(), "WRITE");
      assertEquals(sent, inPlace);
      assertEquals(sent, copied);
      ByteString g = inPlace.getItems(0).getGradients();
      assertTrue(g.asReadOnlyByteBuffer().isDirect(), "the gradients are read from the frame");
      // overwrite the frame where the gradients lie: the in-place message sees it, the copy not
      int at = indexOf(wire, sent.getItems(0).getGradients().toByteArray());
      inPlaceFrame.setByte(at, inPlaceFrame.getByte(at) ^ 0x55);
      copiedFrame.setByte(at, copiedFrame.getByte(at) ^ 0x55);
      assertFalse(sent.getItems(0).getGradients().equals(inPlace.getItems(0).getGradients()));
      assertEquals(sent, copied);
    } finally {
      inPlaceFrame.release();
      copiedFrame.release();
    }
  }

  @Test
  void aFrameInSeveralBuffers_isParsedFromACopy() {
    WriteRequest sent = request();
    byte[] wire = sent.toByteArray();
    CompositeByteBuf frame = Unpooled.compositeBuffer();
    frame.addComponent(true, direct(java.util.Arrays.copyOfRange(wire, 0, 7)));
    frame.addComponent(true, direct(java.util.Arrays.copyOfRange(wire, 7, wire.length)));
    try {
      assertEquals(sent, DataPlaneFrames.parseInPlace(frame, WriteRequest.parser(), "WRITE"));
    } finally {
      frame.release();
    }
  }

  private static int indexOf(byte[] hay, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= hay.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (hay[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    throw new AssertionError("not found");
  }
}
