package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.*;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.zip.CRC32C;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Property-based fuzzing (jqwik): arbitrary bytes and structured nonsense fed to every request
 * handler, mutated files to checkpoint reading. Only clear errors come back (a status other than
 * INTERNAL/UNKNOWN, a {@link TableException}), and the store's invariants hold after every call:
 * every row indexed once, found by its own key, counters consistent. Runs {@code tries} cases per
 * property in CI ({@code -Djqwik.tries.default=N} for a long run).
 */
class FuzzTest {
  private static Path dir;
  private static ShardEngine engine;
  private static TableGrpcService service;

  @BeforeContainer
  static void shard() throws IOException {
    dir = Files.createTempDirectory("fuzz");
    engine = new ShardEngine(0, 1, dir);
    engine.setMemoryBudget(256L << 20);
    service = new TableGrpcService(engine);
    engine.create(TableConfigs.builder("emb", 8).setOptimizer(TableConfigs.adagrad(0.1f, 0.1f,
        1e-7f)).build());
    engine.create(TableConfigs.builder("adm", 4).setMinCount(3).build());
  }

  /** Captures one unary reply. */
  static final class Reply<T> implements StreamObserver<T> {
    T value;
    Throwable error;
    boolean completed;

    @Override
    public void onNext(T v) {
      value = v;
    }

    @Override
    public void onError(Throwable t) {
      error = t;
    }

    @Override
    public void onCompleted() {
      completed = true;
    }
  }

  private static <Q, R> void call(BiConsumer<Q, StreamObserver<R>> handler, Q request) {
    Reply<R> r = new Reply<>();
    handler.accept(request, r);
    if (r.error != null) {
      Status s = ((StatusRuntimeException) r.error).getStatus();
      assertTrue(s.getCode() != Status.Code.INTERNAL && s.getCode() != Status.Code.UNKNOWN,
          () -> "unclear error " + s + " for " + shortText(request));
      assertTrue(s.getDescription() != null && !s.getDescription().isBlank());
    } else {
      assertTrue(r.completed && r.value != null);
    }
    checkInvariants();
  }

  private static String shortText(Object m) {
    String t = m.toString();
    return t.length() > 400 ? t.substring(0, 400) + "..." : t;
  }

  /** Every row indexed once and found by its own key; counters agree with the rows. */
  static void checkInvariants() {
    for (TableStore t : engine.tables()) {
      List<String> keys = t.keys();
      Set<String> distinct = new HashSet<>(keys);
      assertEquals(keys.size(), distinct.size(), "a key has two rows in " + t.name());
      assertEquals(t.size(), keys.size(), "rows vs keys in " + t.name());
      long freq = 0;
      for (String k : keys) {
        TableStore.Record r = t.record(k);
        assertTrue(r != null, "row of '" + k + "' not found by its key");
        freq += r.frequency();
      }
      assertEquals(t.counters().getTotalFrequency(), freq, "total frequency of " + t.name());
    }
  }

  // ---------------------------------------------------------------- arbitrary bytes

  @Property
  void arbitraryBytes_toEveryHandler_giveClearErrors(@ForAll("bytes") byte[] b) {
    parseAnd(b, FindRequest.parser(), service::find);
    parseAnd(b, FindOrInsertRequest.parser(), service::findOrInsert);
    parseAnd(b, ApplyGradientsRequest.parser(), service::applyGradients);
    parseAnd(b, SampleRequest.parser(), service::sample);
    parseAnd(b, TopKRequest.parser(), service::topK);
    parseAnd(b, ReadRequest.parser(), service::read);
    parseAnd(b, WriteRequest.parser(), service::write);
    FuzzTest.<CreateTableRequest, TableInfo>parseAnd(b, CreateTableRequest.parser(), (q, o) -> {
      if (engine.tables().size() < 8) { // keep the shard small; creating is fuzzed below too
        service.createTable(q, o);
      } else {
        o.onError(Status.RESOURCE_EXHAUSTED.withDescription("skipped").asRuntimeException());
      }
    });
  }

  private static <Q extends Message, R> void parseAnd(byte[] b,
      com.google.protobuf.Parser<Q> parser, BiConsumer<Q, StreamObserver<R>> handler) {
    Q q;
    try {
      q = parser.parseFrom(b);
    } catch (InvalidProtocolBufferException e) {
      return; // gRPC refuses it before any handler runs
    }
    call(handler, q);
  }

  @Provide
  Arbitrary<byte[]> bytes() {
    return Arbitraries.bytes().array(byte[].class).ofMaxSize(200);
  }

  // ---------------------------------------------------------------- structured nonsense

  @Provide
  Arbitrary<KeyBatch> keyBatches() {
    Arbitrary<byte[]> utf8 = Arbitraries.oneOf(
        Arbitraries.strings().withCharRange('a', 'f').ofMaxLength(60)
            .map(s -> s.getBytes(java.nio.charset.StandardCharsets.UTF_8)),
        Arbitraries.bytes().array(byte[].class).ofMaxSize(60));
    Arbitrary<List<Integer>> lengths = Arbitraries.integers().between(-2, 70).list()
        .ofMaxSize(12);
    Arbitrary<KeyBatch> random = Combinators.combine(utf8, lengths).as((u, l) -> {
      KeyBatch.Builder b = KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(u));
      for (int x : l) {
        b.addLengths(x);
      }
      return b.build();
    });
    // lengths that still add up to the bytes, one moved between two keys: empty, negative,
    // or splitting a two-byte character
    Arbitrary<KeyBatch> shifted = Combinators.combine(
        Arbitraries.strings().withChars('a', 'b', 'é', '字').ofMinLength(1).ofMaxLength(6).list()
            .ofMinSize(1).ofMaxSize(8),
        Arbitraries.integers().between(-4, 4), Arbitraries.integers().between(0, 7))
        .as((keys, d, j) -> {
          StringBuilder all = new StringBuilder();
          int[] len = new int[keys.size()];
          for (int i = 0; i < len.length; i++) {
            all.append(keys.get(i));
            len[i] = keys.get(i).getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
          }
          if (len.length > 1) {
            len[j % len.length] += d;
            len[(j + 1) % len.length] -= d;
          }
          KeyBatch.Builder b = KeyBatch.newBuilder().setUtf8(ByteString.copyFromUtf8(
              all.toString()));
          for (int x : len) {
            b.addLengths(x);
          }
          return b.build();
        });
    return Arbitraries.oneOf(random, shifted);
  }

  @Provide
  Arbitrary<String> tables() {
    return Arbitraries.of("emb", "adm", "", "missing", "emb/../x");
  }

  @Provide
  Arbitrary<ByteString> floats() {
    return Arbitraries.oneOf(
        Arbitraries.floats().list().ofMaxSize(40).map(l -> {
          float[] f = new float[l.size()];
          for (int i = 0; i < f.length; i++) {
            f[i] = l.get(i);
          }
          return Rows.encode(f);
        }),
        Arbitraries.of(Float.NaN, Float.POSITIVE_INFINITY, 1e30f, -0f).list().ofMaxSize(16)
            .map(l -> {
              float[] f = new float[l.size()];
              for (int i = 0; i < f.length; i++) {
                f[i] = l.get(i);
              }
              return Rows.encode(f);
            }),
        Arbitraries.bytes().array(byte[].class).ofMaxSize(30).map(ByteString::copyFrom));
  }

  @Property
  void structuredNonsense_toDataHandlers_givesClearErrors(@ForAll("tables") String table,
      @ForAll("keyBatches") KeyBatch keys, @ForAll("floats") ByteString floats,
      @ForAll float lr, @ForAll int n, @ForAll int k, @ForAll boolean flag) {
    call(service::find, FindRequest.newBuilder().setTable(table).setKeys(keys).build());
    call(service::findOrInsert, FindOrInsertRequest.newBuilder().setTable(table).setKeys(keys)
        .addOccurrences(n).setNoCount(flag).setWithSlots(!flag).setWithFrequencies(true).build());
    call(service::applyGradients, ApplyGradientsRequest.newBuilder().setTable(table)
        .setKeys(keys).setGradients(floats).setLearningRate(lr).setStep(n).build());
    call(service::sample, SampleRequest.newBuilder().setTable(table).setPositives(keys)
        .setNumSampled(n % 5000).setAlpha(lr).setSampler(SamplerKind.forNumber(Math.floorMod(n, 4))
            == null ? SamplerKind.UNIFORM_SAMPLER : SamplerKind.forNumber(Math.floorMod(n, 4)))
        .setDistinctWithRows(flag).setWithSlots(flag).build());
    call(service::topK, TopKRequest.newBuilder().setTable(table).setQueries(floats)
        .setNumQueries(n % 10).setK(k % 20_000).setExclude(keys).setBiasLastDim(flag).build());
    call(service::write, WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder()
        .setTable(table).setKeys(keys).setGradients(floats)).setCallId(CallId.newBuilder()
        .setClient(n).setSeq(k).setLowWater(n)).build());
  }

  // ---------------------------------------------------------------- checkpoint files

  @Property
  void mutatedCheckpointFiles_giveClearErrors(@ForAll("mutations") List<int[]> edits)
      throws IOException {
    Path d = Files.createTempDirectory(dir, "ckpt");
    TableStore t = engine.get("emb");
    Fixtures.rows(t, "alpha", "beta", "gamma", "delta");
    CheckpointFile f;
    t.quiesce.writeLock().lock();
    try {
      f = CheckpointIo.write(t.freeze(), d, 7);
    } finally {
      t.quiesce.writeLock().unlock();
    }
    Path p = d.resolve(f.getName());
    byte[] original = Files.readAllBytes(p);
    byte[] b = original.clone();
    for (int[] e : edits) { // {kind, position, value}
      int at = Math.floorMod(e[1], Math.max(1, b.length));
      switch (Math.floorMod(e[0], 3)) {
        case 0 -> {
          if (b.length > 0) {
            b[at] ^= (byte) (1 + Math.floorMod(e[2], 255));
          }
        }
        case 1 -> b = java.util.Arrays.copyOf(b, at);
        default -> {
          byte[] c = java.util.Arrays.copyOf(b, b.length + 1 + Math.floorMod(e[2], 16));
          b = c;
        }
      }
    }
    Files.write(p, b);
    // a manifest that matches the damaged file: the reader's own checks must catch it
    CRC32C crc = new CRC32C();
    crc.update(b);
    CheckpointFile lying = f.toBuilder().setBytes(b.length).setCrc32C((int) crc.getValue())
        .build();
    if (java.util.Arrays.equals(b, original)) { // edits that undid each other (append, cut)
      assertEquals(t.size(), CheckpointIo.read(d, List.of(lying), "emb", 0, 1).size());
      return;
    }
    TableException e = org.junit.jupiter.api.Assertions.assertThrows(TableException.class,
        () -> CheckpointIo.read(d, List.of(lying), "emb", 0, 1), "an edit went unnoticed");
    assertTrue(e.code() == dev.dynembed.table.common.ErrorCode.DATA_LOSS
        || e.code() == dev.dynembed.table.common.ErrorCode.FAILED_PRECONDITION, e::toString);
  }

  @Provide
  Arbitrary<List<int[]>> mutations() {
    return Combinators.combine(Arbitraries.integers(), Arbitraries.integers(),
        Arbitraries.integers()).as((a, b, c) -> new int[] {a, b, c}).list().ofMinSize(1)
        .ofMaxSize(3);
  }
}
