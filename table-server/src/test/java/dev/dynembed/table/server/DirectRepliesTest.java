package dev.dynembed.table.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.Bags;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import dev.dynembed.table.v1.RowEncoding;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SamplerKind;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data plane's hand-written replies ({@link DirectReplies}) parse as exactly the message the
 * protobuf path builds, for every field a find, find_or_insert or sample can carry, and their
 * buffers are released on failure.
 */
class DirectRepliesTest {
  @TempDir Path dir;

  private static ShardEngine engine(Path dir) {
    ShardEngine e = new ShardEngine(0, 1, dir);
    e.create(TableConfigs.builder("emb", 7).setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-7f))
        .setInitializer(TableConfigs.uniform(-1f, 1f, 5)).build());
    e.create(TableConfigs.builder("adm", 3).setMinCount(2).build());
    return e;
  }

  private static PackedKeys keys(String prefix, int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = prefix + (i * 7 % 11) + "\u00e9"; // repeats, and non-ASCII bytes
    }
    return PackedKeys.of(k);
  }

  /** Calls that exercise every field: rows in each encoding, slots, counts, frequencies. */
  private static List<ReadRequest> calls() {
    List<ReadRequest> calls = new ArrayList<>();
    for (RowEncoding e : new RowEncoding[] {RowEncoding.ROW_ENCODING_UNSPECIFIED,
        RowEncoding.FLOAT32, RowEncoding.BFLOAT16, RowEncoding.FLOAT16}) {
      calls.add(ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setFindOrInsert(
          FindOrInsertRequest.newBuilder().setTable("emb").setKeys(keys("a", 40).toProto())
              .setRowEncoding(e).setWithFrequencies(true).setWithSlots(true))).build());
      calls.add(ReadRequest.newBuilder()
          .addItems(ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable("emb")
              .setKeys(keys("a", 300).toProto()).setRowEncoding(e)))
          .addItems(ReadItem.newBuilder().setFindOrInsert(FindOrInsertRequest.newBuilder()
              .setTable("adm").setKeys(keys("b", 20).toProto()).setWithFrequencies(true)
              .setRowEncoding(e)))
          .addItems(ReadItem.newBuilder().setFindOrInsert(FindOrInsertRequest.newBuilder()
              .setTable("emb").setKeys(keys("c", 9).toProto()).setOmitRows(true)
              .addAllOccurrences(List.of(1, 2, 3, 1, 2, 3, 1, 2, 3))))
          .addItems(ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable("emb")
              .setKeys(keys("a", 6).toProto()).setPool(Bags.newBuilder().addBagSizes(6)
                  .addAllKeyIndex(List.of(0, 1, 2, 3, 4, 5)).addBagScales(1f))))
          .addItems(ReadItem.newBuilder().setSample(SampleRequest.newBuilder().setTable("emb")
              .setNumSampled(5).setSampler(SamplerKind.UNIFORM_SAMPLER).setSeed(3)
              .setDistinctWithRows(true).setRowEncoding(e)))
          .addItems(ReadItem.newBuilder().setSample(SampleRequest.newBuilder().setTable("emb")
              .setNumSampled(7).setSampler(SamplerKind.UNIFORM_SAMPLER).setSeed(4)
              .setDistinctWithRows(true).setWithSlots(true).setRowEncoding(e)
              .setPositives(keys("a", 3).toProto())))
          .addItems(ReadItem.newBuilder().setSample(SampleRequest.newBuilder().setTable("emb")
              .setNumSampled(9).setSampler(SamplerKind.UNIFORM_SAMPLER).setSeed(5)))
          .build());
    }
    return calls;
  }

  private static ReadResponse parse(List<ByteBuf> parts) throws Exception {
    ByteBuf all = Unpooled.wrappedBuffer(parts.toArray(new ByteBuf[0]));
    try {
      byte[] bytes = new byte[all.readableBytes()];
      all.readBytes(bytes);
      return ReadResponse.parseFrom(bytes);
    } finally {
      all.release();
    }
  }

  @Test
  void directReplies_parseAsTheProtobufReplies_forEveryField() throws Exception {
    ShardEngine protoEngine = engine(dir.resolve("p"));
    ShardEngine directEngine = engine(dir.resolve("d"));
    TableGrpcService protoService = new TableGrpcService(protoEngine);
    TableGrpcService directService = new TableGrpcService(directEngine);
    for (ReadRequest call : calls()) {
      ReadResponse expected = protoService.runRead(call);
      DirectReplies codec = new DirectReplies(directEngine, directService,
          PooledByteBufAllocator.DEFAULT);
      List<ByteBuf> parts = directEngine.commands().read(call.getCallId(), call.getItemsList(),
          codec);
      assertEquals(expected, parse(parts));
    }
  }

  @Test
  void aFailingItem_releasesTheBuffersOfTheItemsBeforeIt() {
    ShardEngine engine = engine(dir);
    TableGrpcService service = new TableGrpcService(engine);
    List<ByteBuf> made = new ArrayList<>();
    PooledByteBufAllocator alloc = new PooledByteBufAllocator(true) {
      @Override
      public ByteBuf directBuffer(int capacity) {
        ByteBuf b = super.directBuffer(capacity);
        made.add(b);
        return b;
      }
    };
    ReadRequest call = ReadRequest.newBuilder()
        .addItems(ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable("emb")
            .setKeys(keys("a", 10).toProto())))
        .addItems(ReadItem.newBuilder().setFindOrInsert(FindOrInsertRequest.newBuilder()
            .setTable("emb").setKeys(keys("a", 10).toProto()).addOccurrences(1)))
        .build(); // the second item's occurrences do not match its keys
    TableException e = assertThrows(TableException.class, () -> engine.commands().read(
        call.getCallId(), call.getItemsList(), new DirectReplies(engine, service, alloc)));
    assertEquals(dev.dynembed.table.common.ErrorCode.INVALID_ARGUMENT, e.code());
    assertEquals(2, made.size());
    for (ByteBuf b : made) {
      assertEquals(0, b.refCnt());
    }
  }
}
