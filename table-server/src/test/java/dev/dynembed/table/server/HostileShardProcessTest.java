package dev.dynembed.table.server;

import static dev.dynembed.table.server.HostileRequests.find;
import static dev.dynembed.table.server.HostileRequests.keys;
import static dev.dynembed.table.server.HostileRequests.sameKey;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.v1.CreateTableRequest;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The memory attacks of issue 49 (D1, D2) on a shard process with a 512 MiB heap and {@code
 * -XX:+ExitOnOutOfMemoryError}, as bin/table-server runs its 8 GiB one: one gRPC Read of a few
 * items asking for 2^20 rows each took such a shard down; the same on the data plane took 850 MiB
 * of direct memory before it was refused; 16 large samples held an event loop for seconds. Now
 * each is refused from the request's counts before anything is built, and another client is
 * served throughout.
 */
@Tag("processes")
class HostileShardProcessTest {
  @TempDir Path dir;

  @Test
  void d1_d2_oneCallCannotTakeTheShardsMemory_orHoldItsEventLoop() throws Exception {
    try (ShardProcess shard = new ShardProcess(dir.resolve("shard"), "512m", "--wal", "off")) {
      ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", shard.port)
          .usePlaintext().maxInboundMessageSize(512 << 20).build();
      try {
        var stub = EmbeddingTableServiceGrpc.newBlockingStub(ch);
        stub.createTable(CreateTableRequest.newBuilder().setConfig(TableConfig.newBuilder()
            .setName("amp").setDim(64)).build());
        String[] words = new String[1000];
        for (int i = 0; i < words.length; i++) {
          words[i] = "w" + i;
        }
        stub.findOrInsert(FindOrInsertRequest.newBuilder().setTable("amp")
            .setKeys(keys(words)).build());
        var a = sameKey(1 << 20);
        // D1 as found: 6 items of 2^20 keys, 256 MiB of rows each
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
            () -> stub.read(find("amp", a, 6)));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        assertTrue(e.getStatus().getDescription().contains("one reply holds at most"),
            e.getStatus().getDescription());
        // one such item fits one reply, not this shard's reply budget (a quarter of its heap)
        e = assertThrows(StatusRuntimeException.class, () -> stub.read(find("amp", a, 1)));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        assertTrue(e.getStatus().getDescription().contains("reply budget"),
            e.getStatus().getDescription());
        e = assertThrows(StatusRuntimeException.class, () -> stub.find(
            FindRequest.newBuilder().setTable("amp").setKeys(a).build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.toString());
        // many at once, and replies that fit the budget alone (48 MiB each): the shard lives,
        // and a victim's small finds are answered all along
        var fits = sameKey(3 << 16);
        ExecutorService pool = Executors.newFixedThreadPool(6);
        AtomicInteger refused = new AtomicInteger();
        AtomicInteger answered = new AtomicInteger();
        List<Future<?>> attacks = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
          attacks.add(pool.submit(() -> {
            for (int i = 0; i < 10; i++) {
              try {
                stub.read(i % 2 == 0 ? find("amp", a, 6) : find("amp", fits, 1));
                answered.incrementAndGet();
              } catch (StatusRuntimeException x) {
                assertTrue(x.getStatus().getCode() == Status.Code.RESOURCE_EXHAUSTED
                    || x.getStatus().getCode() == Status.Code.UNAVAILABLE, x.toString());
                refused.incrementAndGet();
              }
            }
            return null;
          }));
        }
        int victim = 0;
        while (!attacks.stream().allMatch(Future::isDone)) {
          assertEquals(64 * 2, stub.find(FindRequest.newBuilder().setTable("amp")
              .setKeys(keys("w1", "w2")).build()).getRows().size() / 4);
          victim++;
        }
        for (Future<?> f : attacks) {
          f.get();
        }
        pool.shutdown();
        assertTrue(shard.alive(), "the shard died: " + shard.output());
        assertTrue(refused.get() >= 30, "refused " + refused + ", answered " + answered);
        assertTrue(victim > 0);

        // D2: the same on the data plane is refused before memory is taken
        long rss = shard.rssMiB();
        try (RawDataPlane c = RawDataPlane.open(shard.dataPort, null)) {
          c.send(RawDataPlane.READ, 1, find("amp", a, 6).toByteArray());
          RawDataPlane.Frame f = c.read();
          assertEquals("RESOURCE_EXHAUSTED", f.code(), f.toString());
          assertTrue(f.description().contains("one reply holds at most"), f.toString());
          assertTrue(shard.rssMiB() - rss < 96, "RSS went from " + rss + " to " + shard.rssMiB()
              + " MiB for a refused call");
          // 16 samples of 4M draws: 64M draws in one call
          ReadRequest.Builder samples = ReadRequest.newBuilder();
          for (int i = 0; i < 16; i++) {
            samples.addItems(ReadItem.newBuilder().setSample(SampleRequest.newBuilder()
                .setTable("amp").setNumSampled(1 << 22).setSampler(SamplerKind.UNIFORM_SAMPLER)));
          }
          c.send(RawDataPlane.READ, 2, samples.build().toByteArray());
          f = c.read();
          assertEquals("RESOURCE_EXHAUSTED", f.code(), f.toString());
          assertTrue(f.description().contains("draw 67108864 keys in all; a call draws at most"
              + " 4194304"), f.toString());
          // the largest sample a call may draw runs off the event loop: a small call sent right
          // behind it on the same connection is answered first
          c.send(RawDataPlane.READ, 0, 0, 3, ReadRequest.newBuilder().addItems(ReadItem
              .newBuilder().setSample(SampleRequest.newBuilder().setTable("amp")
                  .setNumSampled(1 << 22).setSampler(SamplerKind.UNIFORM_SAMPLER))).build()
              .toByteArray());
          c.send(RawDataPlane.READ, 0, 0, 4, find("amp", keys("w1"), 1).toByteArray());
          c.flush();
          RawDataPlane.Frame first = c.read();
          RawDataPlane.Frame second = c.read();
          assertEquals(4, first.call(), "the small find waited for the sample");
          assertEquals(RawDataPlane.READ_OK, first.kind(), first.toString());
          assertEquals(3, second.call());
          assertEquals(RawDataPlane.READ_OK, second.kind(), second.toString());
        }
        assertTrue(shard.alive(), "the shard died: " + shard.output());
      } finally {
        ch.shutdownNow();
      }
    }
  }
}
