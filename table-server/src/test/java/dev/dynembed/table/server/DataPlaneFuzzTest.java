package dev.dynembed.table.server;

import static dev.dynembed.table.server.HostileRequests.call;
import static dev.dynembed.table.server.HostileRequests.find;
import static dev.dynembed.table.server.HostileRequests.floats;
import static dev.dynembed.table.server.HostileRequests.keys;
import static dev.dynembed.table.server.HostileRequests.write;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import dev.dynembed.table.v1.Bags;
import dev.dynembed.table.v1.CreateTableRequest;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.OptimizerKind;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TopKRequest;
import dev.dynembed.table.v1.TopKResponse;
import dev.dynembed.table.v1.WriteResponse;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Fuzzing the data plane after a valid HELLO (issue 49): frames mutated from valid READ, WRITE
 * and TOPK calls (bit flips, interesting bytes, truncation, splices, swapped kinds, header bits,
 * lying lengths, and mutations of the messages' own fields to extreme values) sent to a shard
 * process. After each call: its answer is the right reply or an ERROR with a named code other
 * than INTERNAL/UNKNOWN; after each batch: the process lives, another connection is served, and
 * a table no frame names reads exactly as before. {@code -Dfuzz.cases=N} (default 3,000) and
 * {@code -Dfuzz.seed=S} for a long or repeated run; the figures are printed.
 */
@Tag("processes")
class DataPlaneFuzzTest {
  @TempDir Path dir;

  private static final Set<String> NAMED = Set.of("CANCELLED", "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED");
  private static final String GUARD = "guard-table-never-fuzzed";
  private static final List<String> TABLES = List.of("fz", "fz2", "nope", "", "fz\u0000",
      "x".repeat(200));

  private final Random rnd = new Random();
  private long ok;
  private long errors;
  private long connectionErrors;
  private long reconnects;
  private final java.util.Map<String, Integer> codes = new java.util.TreeMap<>();

  @Test
  void mutatedFramesAfterHello_getNamedErrorsOrReplies_andChangeNothingElse() throws Exception {
    int cases = Integer.getInteger("fuzz.cases", 3_000);
    long seed = Long.getLong("fuzz.seed", System.nanoTime());
    rnd.setSeed(seed);
    String[] guardKeys = new String[64];
    for (int i = 0; i < guardKeys.length; i++) {
      guardKeys[i] = "g" + i;
    }
    long start = System.nanoTime();
    try (ShardProcess shard = new ShardProcess(dir.resolve("shard"), "512m", "--fsync", "always",
        "--memory-budget-mb", "96")) {
      ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", shard.port)
          .usePlaintext().build();
      try {
        var stub = EmbeddingTableServiceGrpc.newBlockingStub(ch);
        stub.createTable(table(GUARD, 8, OptimizerKind.ADAGRAD, 0));
        stub.createTable(table("fz", 8, OptimizerKind.ADAGRAD, 0));
        stub.createTable(table("fz2", 4, OptimizerKind.SGD, 2));
        stub.findOrInsert(FindOrInsertRequest.newBuilder().setTable(GUARD)
            .setKeys(keys(guardKeys)).build());
        byte[] guard = readGuard(shard.dataPort, guardKeys);
        RawDataPlane c = RawDataPlane.open(shard.dataPort, null);
        try {
          for (int i = 0; i < cases; i++) {
            c = fuzzOne(c, shard.dataPort, i + 1, seed);
            if ((i + 1) % 200 == 0 || i + 1 == cases) {
              assertTrue(shard.alive(), "the shard died at case " + (i + 1) + " (seed " + seed
                  + "): " + shard.output());
              assertArrayEquals(guard, readGuard(shard.dataPort, guardKeys),
                  "a table no frame named changed by case " + (i + 1) + " (seed " + seed + ")");
            }
          }
        } finally {
          c.close();
        }
      } finally {
        ch.shutdownNow();
      }
      assertTrue(shard.alive(), shard.output());
    }
    System.out.printf("data-plane fuzz: %d cases (seed %d) in %.1f s: %d replies, %d named"
        + " errors %s, %d connection errors (%d reconnects), 0 shard exits, 0 changed rows%n",
        cases, seed, (System.nanoTime() - start) / 1e9, ok, errors, codes, connectionErrors,
        reconnects);
    assertEquals(cases, ok + errors + connectionErrors);
  }

  private static CreateTableRequest table(String name, int dim, OptimizerKind kind,
      int minCount) {
    return CreateTableRequest.newBuilder().setConfig(TableConfig.newBuilder().setName(name)
        .setDim(dim).setMinCount(minCount).setOptimizer(OptimizerConfig.newBuilder()
            .setKind(kind).setLearningRate(0.1f))).build();
  }

  /** The guard table's rows (and found bits) as bytes, read on a connection of their own. */
  private static byte[] readGuard(int port, String[] k) throws IOException {
    try (RawDataPlane g = RawDataPlane.open(port, null)) {
      g.send(RawDataPlane.READ, 1, find(GUARD, keys(k), 1).toByteArray());
      RawDataPlane.Frame f = g.read();
      assertEquals(RawDataPlane.READ_OK, f.kind(), String.valueOf(f));
      return ReadResponse.parseFrom(f.body()).getResults(0).getRows().toByteArray();
    }
  }

  /** Sends one mutated frame and judges its answer; returns the connection to go on with. */
  private RawDataPlane fuzzOne(RawDataPlane c, int port, long call, long seed)
      throws IOException {
    int kind = switch (rnd.nextInt(3)) {
      case 0 -> RawDataPlane.READ;
      case 1 -> RawDataPlane.WRITE;
      default -> RawDataPlane.TOPK;
    };
    Message valid = validRequest(kind, call);
    byte[] body = valid.toByteArray();
    int flags = 0;
    int reserved = 0;
    int m = rnd.nextInt(12);
    switch (m) {
      case 0 -> flip(body);
      case 1 -> interesting(body);
      case 2 -> body = java.util.Arrays.copyOf(body, rnd.nextInt(body.length + 1));
      case 3 -> body = splice(body, validRequest(kind, call).toByteArray());
      case 4 -> kind = List.of(RawDataPlane.READ, RawDataPlane.WRITE, RawDataPlane.TOPK)
          .get(rnd.nextInt(3)); // another message's bytes under this kind
      case 5 -> {
        if (rnd.nextInt(4) == 0) {
          flags = 1 + rnd.nextInt(255);
        } else {
          reserved = 1 + rnd.nextInt(65535);
        }
      }
      case 6 -> { // a length that lies: the connection is given up after it
        byte[] frame = java.nio.ByteBuffer.allocate(16 + body.length)
            .putInt(rnd.nextBoolean() ? rnd.nextInt(12) : 12 + body.length + 1 + rnd.nextInt(64))
            .put((byte) kind).put((byte) 0).putShort((short) 0).putLong(call).put(body).array();
        c.sendRaw(frame);
        connectionErrors++;
        c.close();
        reconnects++;
        return RawDataPlane.open(port, null);
      }
      default -> body = mutateFields(valid).toByteArray();
    }
    c.send(kind, flags, reserved, call, body);
    c.flush();
    RawDataPlane.Frame f = c.read();
    if (f == null) {
      fail("the shard closed the connection without a word at case " + call + " (seed " + seed
          + ")");
    }
    if (f.kind() == RawDataPlane.ERROR) {
      assertTrue(NAMED.contains(f.code()), "case " + call + " (seed " + seed + ", mutation " + m
          + "): " + f);
      assertTrue(!f.description().isBlank(), f.toString());
      if (f.call() == 0) { // about the connection: it is closed
        connectionErrors++;
        c.close();
        reconnects++;
        return RawDataPlane.open(port, null);
      }
      assertEquals(call, f.call(), f.toString());
      errors++;
      codes.merge(f.code(), 1, Integer::sum);
      if (Boolean.getBoolean("fuzz.debug")) {
        System.out.println("mutation " + m + ": " + f);
      }
      return c;
    }
    assertEquals(call, f.call(), f.toString());
    int expected = kind == RawDataPlane.READ ? RawDataPlane.READ_OK
        : kind == RawDataPlane.WRITE ? RawDataPlane.WRITE_OK : RawDataPlane.TOPK_OK;
    assertEquals(expected, f.kind(), "case " + call + ": " + f);
    try {
      switch (f.kind()) {
        case RawDataPlane.READ_OK -> ReadResponse.parseFrom(f.body());
        case RawDataPlane.WRITE_OK -> WriteResponse.parseFrom(f.body());
        default -> {
          for (float s : TopKResponse.parseFrom(f.body()).getScoresList()) {
            assertTrue(!Float.isNaN(s), "case " + call + ": a NaN score");
          }
        }
      }
    } catch (InvalidProtocolBufferException e) {
      fail("case " + call + ": a reply that does not parse: " + e);
    }
    ok++;
    return c;
  }

  private String anyKey() {
    return switch (rnd.nextInt(60)) {
      case 0 -> "";
      case 1, 2, 3, 4, 5 -> "k" + rnd.nextInt(1_000_000);
      case 6, 7, 8 -> "\u00e9t\u00e9" + rnd.nextInt(100);
      default -> "k" + rnd.nextInt(50);
    };
  }

  private String[] someKeys() {
    String[] k = new String[1 + rnd.nextInt(rnd.nextInt(8) == 0 ? 300 : 12)];
    for (int i = 0; i < k.length; i++) {
      k[i] = anyKey();
    }
    return k;
  }

  private float[] someFloats(int n) {
    float[] f = new float[n];
    for (int i = 0; i < n; i++) {
      f[i] = rnd.nextInt(50) == 0 ? 1e30f : (float) rnd.nextGaussian();
    }
    return f;
  }

  /** A valid call of this kind on the fuzzed tables (valid as a message; its values vary). */
  private Message validRequest(int kind, long call) {
    String table = rnd.nextInt(4) == 0 ? "fz2" : "fz";
    int dim = table.equals("fz") ? 8 : 4;
    String[] k = someKeys();
    if (kind == RawDataPlane.WRITE) {
      return write(table, keys(k), floats(someFloats(k.length * dim)), rnd.nextInt(3) == 0
          ? rnd.nextFloat() * 2 : 0f, call(1 + rnd.nextInt(8), call));
    }
    if (kind == RawDataPlane.TOPK) {
      return TopKRequest.newBuilder().setTable(table).setQueries(floats(someFloats(dim)))
          .setNumQueries(1).setK(1 + rnd.nextInt(20)).setMetricValue(rnd.nextInt(3))
          .setExclude(keys(anyKey())).build();
    }
    ReadRequest.Builder r = ReadRequest.newBuilder().setCallId(call(100 + rnd.nextInt(8),
        call));
    for (int i = 1 + rnd.nextInt(3); i > 0; i--) {
      ReadItem.Builder item = ReadItem.newBuilder();
      switch (rnd.nextInt(4)) {
        case 0 -> item.setFind(FindRequest.newBuilder().setTable(table).setKeys(keys(k)));
        case 1 -> item.setFindOrInsert(FindOrInsertRequest.newBuilder().setTable(table)
            .setKeys(keys(k)).setWithSlots(rnd.nextBoolean())
            .setWithFrequencies(rnd.nextBoolean()));
        case 2 -> item.setSample(SampleRequest.newBuilder().setTable(table)
            .setNumSampled(rnd.nextInt(2000)).setSampler(SamplerKind.forNumber(1
                + rnd.nextInt(3))).setDistinctWithRows(rnd.nextBoolean())
            .setNoneIfEmpty(rnd.nextBoolean()).setSeed(rnd.nextLong()));
        default -> item.setFind(FindRequest.newBuilder().setTable(table).setKeys(keys(k))
            .setPool(Bags.newBuilder().addBagSizes(k.length).addAllKeyIndex(
                java.util.stream.IntStream.range(0, k.length).boxed().toList())));
      }
      r.addItems(item);
    }
    return r.build();
  }

  private void flip(byte[] b) {
    for (int i = 1 + rnd.nextInt(4); i > 0 && b.length > 0; i--) {
      b[rnd.nextInt(b.length)] ^= (byte) (1 << rnd.nextInt(8));
    }
  }

  private void interesting(byte[] b) {
    byte[] values = {0, (byte) 0xFF, 0x7F, (byte) 0x80, 1, 0x0A, 0x12};
    for (int i = 1 + rnd.nextInt(3); i > 0 && b.length > 0; i--) {
      b[rnd.nextInt(b.length)] = values[rnd.nextInt(values.length)];
    }
  }

  private byte[] splice(byte[] a, byte[] b) {
    int i = rnd.nextInt(a.length + 1);
    int j = rnd.nextInt(b.length + 1);
    byte[] out = new byte[i + b.length - j];
    System.arraycopy(a, 0, out, 0, i);
    System.arraycopy(b, j, out, i, b.length - j);
    return out;
  }

  /** The message with one to three of its fields, at any depth, set to an extreme value. */
  private Message mutateFields(Message m) {
    Message out = m;
    for (int i = 1 + rnd.nextInt(3); i > 0; i--) {
      out = mutateOne(out, 0);
    }
    return out;
  }

  private Message mutateOne(Message m, int depth) {
    List<FieldDescriptor> fields = m.getDescriptorForType().getFields();
    FieldDescriptor f = fields.get(rnd.nextInt(fields.size()));
    Message.Builder b = m.toBuilder();
    if (f.isRepeated()) {
      int n = m.getRepeatedFieldCount(f);
      if (f.getJavaType() == FieldDescriptor.JavaType.MESSAGE && n > 0 && depth < 4) {
        int at = rnd.nextInt(n);
        b.setRepeatedField(f, at, mutateOne((Message) m.getRepeatedField(f, at), depth + 1));
      } else if (n > 0 && rnd.nextBoolean()) {
        b.clearField(f); // drop them all
        for (int i = 0; i < n - 1; i++) {
          b.addRepeatedField(f, m.getRepeatedField(f, i));
        }
      } else if (f.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
        b.addRepeatedField(f, extreme(f));
      }
      return b.build();
    }
    if (f.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
      if (m.hasField(f) && depth < 4 && rnd.nextInt(4) != 0) {
        b.setField(f, mutateOne((Message) m.getField(f), depth + 1));
      } else {
        b.clearField(f);
      }
      return b.build();
    }
    b.setField(f, extreme(f));
    return b.build();
  }

  private Object extreme(FieldDescriptor f) {
    return switch (f.getJavaType()) {
      case INT -> new int[] {0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 1 << 20, 1 << 22,
          4097, 4096}[rnd.nextInt(9)];
      case LONG -> new long[] {0, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, 1L << 32}[rnd.nextInt(6)];
      case FLOAT -> new float[] {0f, -0f, Float.NaN, Float.POSITIVE_INFINITY, 3e38f, -1f,
          1e-45f, 1e6f}[rnd.nextInt(8)];
      case DOUBLE -> Double.NaN;
      case BOOLEAN -> rnd.nextBoolean();
      case STRING -> TABLES.get(rnd.nextInt(TABLES.size()));
      case BYTE_STRING -> {
        byte[] b = new byte[new int[] {0, 1, 3, 7, 64, 4097}[rnd.nextInt(6)]];
        rnd.nextBytes(b);
        yield ByteString.copyFrom(b);
      }
      case ENUM -> f.getEnumType().findValueByNumber(0) == null
          ? f.getEnumType().getValues().get(0)
          : rnd.nextBoolean() ? f.getEnumType().getValues().get(rnd.nextInt(
              f.getEnumType().getValues().size()))
          : f.getEnumType().findValueByNumberCreatingIfUnknown(50 + rnd.nextInt(50));
      default -> throw new IllegalStateException(f.toString());
    };
  }
}
