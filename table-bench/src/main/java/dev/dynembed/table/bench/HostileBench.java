package dev.dynembed.table.bench;

import com.google.protobuf.ByteString;
import dev.dynembed.table.v1.CreateTableRequest;
import dev.dynembed.table.v1.EmbeddingTableServiceGrpc;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.KeyBatch;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Issue 49's attacks all at once on one shard as bin/table-server runs it (8 GiB heap,
 * {@code -XX:+ExitOnOutOfMemoryError}), while a victim client keeps reading: D1 (one gRPC Read of
 * 36 items of 2^20 keys, 72 MiB of request asking for 9 GiB of rows) x100, D2 (the same on the
 * data plane, 16 samples of 4M draws, the largest allowed sample) x20 each, D3 (2,000 silent
 * connections, then as many authenticated ones) and D4 (three 512 MiB frames before HELLO).
 * Prints what was refused, the victim's calls and latencies, and the shard's resident memory
 * (before, peak, after). The attacks speak the protocol over raw sockets and the generated gRPC
 * stub, not through the project's client. bin/table-bench hostile starts the shard.
 */
@Command(name = "table-bench hostile", mixinStandardHelpOptions = true)
public final class HostileBench implements Callable<Integer> {
  @Option(names = "--port", required = true, description = "the shard's gRPC port") int port;
  @Option(names = "--data-port", required = true, description = "its data plane's port")
  int dataPort;
  @Option(names = "--pid", required = true, description = "its process id (for its RSS)")
  long pid;
  @Option(names = "--d1", defaultValue = "100", description = "D1 calls") int d1Calls;
  @Option(names = "--d1-items", defaultValue = "36", description = "items of 2^20 keys a call")
  int d1Items;
  @Option(names = "--silent", defaultValue = "2000", description = "D3 silent connections")
  int silent;

  public static void main(String[] args) {
    System.exit(new CommandLine(new HostileBench()).execute(args));
  }

  private final AtomicBoolean done = new AtomicBoolean();
  private final Map<String, LongAdder> outcomes = new ConcurrentHashMap<>();

  private void count(String what) {
    outcomes.computeIfAbsent(what, k -> new LongAdder()).increment();
  }

  static KeyBatch keys(String... k) {
    ByteString.Output utf8 = ByteString.newOutput();
    KeyBatch.Builder b = KeyBatch.newBuilder();
    for (String s : k) {
      byte[] bytes = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
      utf8.write(bytes, 0, bytes.length);
      b.addLengths(bytes.length);
    }
    return b.setUtf8(utf8.toByteString()).build();
  }

  static KeyBatch sameKey(int n) {
    byte[] utf8 = new byte[n];
    Arrays.fill(utf8, (byte) 'a');
    KeyBatch.Builder b = KeyBatch.newBuilder().setUtf8(ByteString.copyFrom(utf8));
    for (int i = 0; i < n; i++) {
      b.addLengths(1);
    }
    return b.build();
  }

  static ReadRequest finds(KeyBatch k, int items) {
    ReadRequest.Builder r = ReadRequest.newBuilder();
    for (int i = 0; i < items; i++) {
      r.addItems(ReadItem.newBuilder().setFind(FindRequest.newBuilder().setTable("amp")
          .setKeys(k)));
    }
    return r.build();
  }

  long rssMiB() {
    try {
      for (String l : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "status"))) {
        if (l.startsWith("VmRSS:")) {
          return Long.parseLong(l.replaceAll("[^0-9]", "")) >> 10;
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }

  /** A data-plane connection over a plain socket; HELLO sent and answered. */
  static final class Raw implements AutoCloseable {
    final Socket s;
    final DataOutputStream out;
    final DataInputStream in;

    Raw(int port, boolean hello) throws IOException {
      s = new Socket("127.0.0.1", port);
      s.setSoTimeout(120_000);
      out = new DataOutputStream(new java.io.BufferedOutputStream(s.getOutputStream(), 1 << 16));
      in = new DataInputStream(new java.io.BufferedInputStream(s.getInputStream(), 1 << 16));
      if (hello) {
        send(1, 0, new byte[] {0, 2, 0, 0});
        int kind = read();
        if (kind != 2) {
          s.close();
          throw new IOException("HELLO answered kind " + kind + ": " + lastError);
        }
      }
    }

    void send(int kind, long call, byte[] body) throws IOException {
      out.writeInt(12 + body.length);
      out.writeByte(kind);
      out.writeByte(0);
      out.writeShort(0);
      out.writeLong(call);
      out.write(body);
      out.flush();
    }

    String lastError = "";

    /** The next frame's kind (its body skipped; an ERROR's kept), or -1 when closed. */
    int read() throws IOException {
      int length;
      try {
        length = in.readInt();
      } catch (IOException e) {
        return -1;
      }
      int kind = in.readUnsignedByte();
      if (kind == 0x7F) {
        in.skipNBytes(11);
        byte[] b = in.readNBytes(length - 12);
        lastError = new String(b, java.nio.charset.StandardCharsets.UTF_8);
        return kind;
      }
      in.skipNBytes(length - 1);
      return kind;
    }

    @Override
    public void close() throws IOException {
      s.close();
    }
  }

  @Override
  public Integer call() throws Exception {
    ManagedChannel ch = ManagedChannelBuilder.forAddress("127.0.0.1", port).usePlaintext()
        .maxInboundMessageSize(512 << 20).build();
    var stub = EmbeddingTableServiceGrpc.newBlockingStub(ch);
    stub.createTable(CreateTableRequest.newBuilder().setConfig(TableConfig.newBuilder()
        .setName("amp").setDim(64)).build());
    String[] words = new String[1000];
    for (int i = 0; i < words.length; i++) {
      words[i] = "w" + i;
    }
    stub.findOrInsert(FindOrInsertRequest.newBuilder().setTable("amp").setKeys(keys(words))
        .build());
    long rssBefore = rssMiB();
    AtomicLong rssPeak = new AtomicLong(rssBefore);
    ExecutorService pool = Executors.newCachedThreadPool();
    pool.submit(() -> { // the shard's resident memory, every 50 ms
      while (!done.get()) {
        rssPeak.accumulateAndGet(rssMiB(), Math::max);
        Thread.sleep(50);
      }
      return null;
    });
    // the victim: a trainer's small reads, on gRPC and on the data plane, all along
    List<Long> victimNanos = java.util.Collections.synchronizedList(new ArrayList<>());
    LongAdder victimFailures = new LongAdder();
    // its own connections: on the attackers' HTTP/2 connection it would queue behind their
    // 72 MiB messages in the client's own flow control
    ManagedChannel victimChannel = ManagedChannelBuilder.forAddress("127.0.0.1", port)
        .usePlaintext().build();
    var victimStub = EmbeddingTableServiceGrpc.newBlockingStub(victimChannel);
    Future<?> victim = pool.submit(() -> victim(victimStub, victimNanos, victimFailures));
    long start = System.nanoTime();
    List<Future<?>> attacks = new ArrayList<>();
    KeyBatch a = sameKey(1 << 20);
    // D1 x N: gRPC Reads of 36 items of 2^20 keys, from 4 threads
    ReadRequest d1 = finds(a, d1Items);
    for (int t = 0; t < 4; t++) {
      int share = d1Calls / 4 + (t < d1Calls % 4 ? 1 : 0);
      attacks.add(pool.submit(() -> {
        ManagedChannel own = ManagedChannelBuilder.forAddress("127.0.0.1", port).usePlaintext()
            .build(); // one attacker, one connection
        var attacker = EmbeddingTableServiceGrpc.newBlockingStub(own);
        for (int i = 0; i < share; i++) {
          try {
            attacker.read(d1);
            count("D1 answered");
          } catch (StatusRuntimeException e) {
            count("D1 " + e.getStatus().getCode());
          }
        }
        own.shutdownNow();
        return null;
      }));
    }
    attacks.add(pool.submit(() -> d2(d1)));
    attacks.add(pool.submit(this::d3));
    // D4: three 512 MiB frames before HELLO, each followed by zeros
    for (int t = 0; t < 3; t++) {
      attacks.add(pool.submit(this::d4));
    }
    for (Future<?> f : attacks) {
      f.get();
    }
    double secs = (System.nanoTime() - start) / 1e9;
    done.set(true);
    victim.get();
    pool.shutdown();
    Thread.sleep(1000);
    long rssAfter = rssMiB();
    ch.shutdownNow();
    victimChannel.shutdownNow();
    long[] lat = victimNanos.stream().mapToLong(Long::longValue).sorted().toArray();
    boolean alive = Files.exists(Path.of("/proc", String.valueOf(pid)));
    System.out.printf(Locale.ROOT, "hostile load on one shard (pid %d): %.1f s%n", pid, secs);
    new java.util.TreeMap<>(outcomes).forEach((k, v) -> System.out.printf(Locale.ROOT,
        "  %-45s %,d%n", k, v.sum()));
    System.out.printf(Locale.ROOT, "  victim: %,d rounds (a gRPC find + a data-plane read each),"
        + " %,d failed; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms%n", lat.length,
        victimFailures.sum(), pct(lat, 0.5), pct(lat, 0.99), lat.length == 0 ? 0
            : lat[lat.length - 1] / 1e6);
    System.out.printf(Locale.ROOT, "  shard RSS: %,d MiB before, %,d MiB peak, %,d MiB after;"
        + " alive: %s%n", rssBefore, rssPeak.get(), rssAfter, alive);
    return alive ? 0 : 1;
  }

  /** The victim: a trainer's small reads, a gRPC find and a data-plane read a round. */
  private Void victim(EmbeddingTableServiceGrpc.EmbeddingTableServiceBlockingStub victimStub,
      List<Long> victimNanos, LongAdder victimFailures) throws IOException {
    try (Raw dp = new Raw(dataPort, true)) {
      byte[] small = finds(keys("w1", "w2", "w3"), 1).toByteArray();
      long n = 0;
      while (!done.get()) {
        long t0 = System.nanoTime();
        try {
          victimStub.find(FindRequest.newBuilder().setTable("amp")
              .setKeys(keys("w1", "w2")).build());
          dp.send(3, ++n, small);
          if (dp.read() != 0x43) {
            victimFailures.increment();
          }
        } catch (StatusRuntimeException e) {
          victimFailures.increment();
        }
        victimNanos.add(System.nanoTime() - t0);
      }
    }
    return null;
  }

  /** D2 on the data plane: the same read, 16 samples of 4M draws, the largest allowed sample. */
  private Void d2(ReadRequest d1) throws IOException {
    ReadRequest.Builder samples = ReadRequest.newBuilder();
    for (int i = 0; i < 16; i++) {
      samples.addItems(ReadItem.newBuilder().setSample(SampleRequest.newBuilder()
          .setTable("amp").setNumSampled(1 << 22).setSampler(SamplerKind.UNIFORM_SAMPLER)));
    }
    byte[] big = d1.toByteArray();
    byte[] many = samples.build().toByteArray();
    byte[] largest = ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setSample(
        SampleRequest.newBuilder().setTable("amp").setNumSampled(1 << 22)
            .setSampler(SamplerKind.UNIFORM_SAMPLER))).build().toByteArray();
    try (Raw c = new Raw(dataPort, true)) {
      for (int i = 0; i < 20; i++) {
        c.send(3, 3L * i + 1, big);
        count("D2 read " + (c.read() == 0x7F ? "refused" : "answered"));
        c.send(3, 3L * i + 2, many);
        count("D2 16 samples " + (c.read() == 0x7F ? "refused" : "answered"));
        c.send(3, 3L * i + 3, largest);
        count("D2 largest sample " + (c.read() == 0x7F ? "refused" : "answered"));
      }
    }
    return null;
  }

  /** D3: silent connections, then authenticated ones left idle. */
  private Void d3() throws Exception {
    List<Socket> open = new ArrayList<>();
    try {
      for (int i = 0; i < silent; i++) {
        try {
          open.add(new Socket("127.0.0.1", dataPort));
        } catch (IOException e) {
          count("D3 connect failed");
        }
      }
      Thread.sleep(500);
      long closed = open.stream().filter(s -> {
        try {
          s.setSoTimeout(1);
          s.getInputStream().read(); // an ERROR frame, or the end of the stream
          return true;
        } catch (java.net.SocketTimeoutException e) {
          return false;
        } catch (IOException e) {
          return true;
        }
      }).count();
      outcomes.computeIfAbsent("D3 silent connections refused at once", k -> new LongAdder())
          .add(closed);
      List<Raw> authed = new ArrayList<>();
      for (int i = 0; i < silent; i++) {
        try {
          authed.add(new Raw(dataPort, true));
        } catch (IOException e) {
          count("D3 authenticated connection refused");
        }
      }
      outcomes.computeIfAbsent("D3 authenticated connections open", k -> new LongAdder())
          .add(authed.size());
      for (Raw r : authed) {
        r.close();
      }
    } finally {
      for (Socket s : open) {
        s.close();
      }
    }
    return null;
  }

  /** D4: a 512 MiB frame before HELLO, followed by zeros. */
  private Void d4() throws IOException {
    try (Socket s = new Socket("127.0.0.1", dataPort)) {
      DataOutputStream out = new DataOutputStream(s.getOutputStream());
      out.writeInt(512 << 20);
      out.writeLong(3L << 56);
      out.writeInt(0);
      byte[] zeros = new byte[1 << 20];
      long sent = 0;
      try {
        for (int i = 0; i < 300; i++) {
          out.write(zeros);
          sent += zeros.length;
        }
        count("D4 300 MiB taken");
      } catch (IOException e) {
        count("D4 refused after " + (sent >> 20) + " MiB or less");
      }
    }
    return null;
  }

  private static double pct(long[] sorted, double p) {
    return sorted.length == 0 ? 0 : sorted[(int) Math.min(sorted.length - 1,
        Math.floor(p * sorted.length))] / 1e6;
  }
}
