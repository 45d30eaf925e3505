package dev.dynembed.table.server;

import com.google.protobuf.ByteString;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.KeyBatch;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.WriteRequest;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** Requests built from the protocol's messages by hand, as an outside client builds them. */
final class HostileRequests {
  private HostileRequests() {}

  static KeyBatch keys(String... keys) {
    ByteString.Output utf8 = ByteString.newOutput();
    KeyBatch.Builder b = KeyBatch.newBuilder();
    for (String k : keys) {
      byte[] bytes = k.getBytes(StandardCharsets.UTF_8);
      utf8.write(bytes, 0, bytes.length);
      b.addLengths(bytes.length);
    }
    return b.setUtf8(utf8.toByteString()).build();
  }

  /** {@code n} times the one-byte key "a" (what the attack of issue 49 sent). */
  static KeyBatch sameKey(int n) {
    byte[] utf8 = new byte[n];
    java.util.Arrays.fill(utf8, (byte) 'a');
    KeyBatch.Builder b = KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(utf8));
    for (int i = 0; i < n; i++) {
      b.addLengths(1);
    }
    return b.build();
  }

  static ByteString floats(float... v) {
    ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
    for (float f : v) {
      b.putFloat(f);
    }
    return ByteString.copyFrom(b.array());
  }

  static float[] floats(ByteString s) {
    ByteBuffer b = s.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[s.size() / 4];
    for (int i = 0; i < out.length; i++) {
      out[i] = b.getFloat();
    }
    return out;
  }

  static ReadRequest find(String table, KeyBatch keys, int items) {
    ReadRequest.Builder r = ReadRequest.newBuilder();
    for (int i = 0; i < items; i++) {
      r.addItems(ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable(table)
          .setKeys(keys)));
    }
    return r.build();
  }

  static WriteRequest write(String table, KeyBatch keys, ByteString gradients, float lr,
      CallId id) {
    return WriteRequest.newBuilder().setCallId(id).addItems(ApplyGradientsRequest.newBuilder()
        .setTable(table).setKeys(keys).setGradients(gradients).setLearningRate(lr)
        .setStep(1)).build();
  }

  static CallId call(long client, long seq) {
    return CallId.newBuilder().setClient(client).setSeq(seq).setLowWater(seq).build();
  }
}
