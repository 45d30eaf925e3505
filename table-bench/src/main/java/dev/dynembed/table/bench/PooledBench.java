package dev.dynembed.table.bench;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.TableConfigs;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientStreamTracer;
import io.grpc.MethodDescriptor;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.LongAdder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * A training step of a mean-pooled bag (lookup of every example's keys, one gradient row per
 * example back) on loopback shard processes, two ways: pooled on the client (the keys' rows cross
 * the wire, the client pools them, per-key gradients go back: what {@code Layers.embeddingBag}
 * does) and pooled on the shards ({@link EmbeddingTable#pooled}: one partial vector per example
 * and shard back, one gradient row per example out). Reports examples/s, the bytes of gRPC
 * messages each way per example (counted by a client stream tracer: message payloads, without
 * HTTP/2 framing) and the client's and shards' CPU per step.
 */
@Command(name = "table-bench pooled", mixinStandardHelpOptions = true)
public final class PooledBench implements Callable<Integer> {
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--examples", defaultValue = "256", description = "examples (bags) per step")
  int examples;
  @Option(names = "--bag", defaultValue = "64", description = "keys per example") int bag;
  @Option(names = "--corpus", description = "text file: examples are consecutive runs of --bag"
      + " whitespace-separated words (omit for Zipf keys)")
  Path corpus;
  @Option(names = "--keys", defaultValue = "100000", description = "Zipf key space") int numKeys;
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "exponent of the Zipf distribution of keys (default ${DEFAULT-VALUE})")
  double zipf;
  @Option(names = "--shards", defaultValue = "2",
      description = "shard processes (default ${DEFAULT-VALUE})") int shards;
  @Option(names = "--seconds", defaultValue = "10",
      description = "measured seconds per case (default ${DEFAULT-VALUE})") double seconds;
  @Option(names = "--warmup", defaultValue = "8",
      description = "warm-up seconds per case (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--base-port", defaultValue = "17300",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;
  @Option(names = "--server-heap", defaultValue = "2g",
      description = "heap of each shard process (default ${DEFAULT-VALUE})") String serverHeap;
  @Option(names = "--server-cpus", description = "run the shard processes on these CPUs"
      + " (taskset -c LIST)")
  String serverCpus;
  @Option(names = "--rounds", defaultValue = "2", description = "client, shards, client, ..."
      + " rounds (interleaved, to spread drift over both)")
  int rounds;

  private final LongAdder sent = new LongAdder();
  private final LongAdder received = new LongAdder();
  private List<String[]> batches;

  public static void main(String[] args) {
    System.exit(new CommandLine(new PooledBench()).execute(args));
  }

  /** Counts the wire size of every message this client sends and receives. */
  private ClientInterceptor counter() {
    ClientStreamTracer.Factory f = new ClientStreamTracer.Factory() {
      @Override
      public ClientStreamTracer newClientStreamTracer(ClientStreamTracer.StreamInfo info,
          io.grpc.Metadata headers) {
        return new ClientStreamTracer() {
          @Override
          public void outboundWireSize(long bytes) {
            sent.add(bytes);
          }

          @Override
          public void inboundWireSize(long bytes) {
            received.add(bytes);
          }
        };
      }
    };
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method,
          CallOptions options, Channel next) {
        return next.newCall(method, options.withStreamTracerFactory(f));
      }
    };
  }

  private List<String[]> makeBatches() throws Exception {
    List<String[]> out = new ArrayList<>();
    if (corpus != null) {
      String[] words = Files.readString(corpus, StandardCharsets.UTF_8).trim().split("\\s+");
      int per = examples * bag;
      for (int at = 0; at + per <= words.length && out.size() < 256; at += per) {
        String[] b = new String[per];
        System.arraycopy(words, at, b, 0, per);
        out.add(b);
      }
      if (out.isEmpty()) {
        throw new IllegalArgumentException(corpus + " holds fewer than " + per + " words");
      }
      return out;
    }
    Zipf z = new Zipf(numKeys, zipf);
    SplittableRandom rnd = new SplittableRandom(42);
    for (int i = 0; i < 64; i++) {
      String[] b = new String[examples * bag];
      for (int j = 0; j < b.length; j++) {
        b[j] = "key:" + z.next(rnd);
      }
      out.add(b);
    }
    return out;
  }

  /** Distinct keys of a batch and mean bags over them (what dynamicEmbeddingBag builds). */
  private record Bags(String[] keys, KeyBags bags) {}

  private Bags bags(String[] batch) {
    Map<String, Integer> distinct = new LinkedHashMap<>();
    int[] index = new int[batch.length];
    for (int i = 0; i < batch.length; i++) {
      index[i] = distinct.computeIfAbsent(batch[i], k -> distinct.size());
    }
    int[] sizes = new int[examples];
    float[] scales = new float[examples];
    java.util.Arrays.fill(sizes, bag);
    java.util.Arrays.fill(scales, 1f / bag);
    return new Bags(distinct.keySet().toArray(new String[0]),
        KeyBags.of(sizes, index, null, scales, distinct.size()));
  }

  /** A pretend loss gradient per example: small, deterministic. */
  private float[] exampleGradients(float[] pooled, int step) {
    float[] g = new float[pooled.length];
    for (int i = 0; i < g.length; i++) {
      g[i] = 1e-3f * pooled[i] + ((i + step) % 7 - 3) * 1e-4f;
    }
    return g;
  }

  private void clientStep(EmbeddingTable t, String[] batch, int step) {
    float[] rows = t.findOrInsert(batch, true); // [examples * bag, dim]
    float[] pooled = new float[examples * dim];
    float inv = 1f / bag;
    for (int e = 0; e < examples; e++) {
      for (int j = 0; j < bag; j++) {
        int r = (e * bag + j) * dim;
        for (int c = 0; c < dim; c++) {
          pooled[e * dim + c] += rows[r + c] * inv;
        }
      }
    }
    float[] g = exampleGradients(pooled, step);
    float[] perKey = new float[rows.length]; // d(mean)/d(row) = 1/bag for every position
    for (int e = 0; e < examples; e++) {
      for (int j = 0; j < bag; j++) {
        for (int c = 0; c < dim; c++) {
          perKey[(e * bag + j) * dim + c] = g[e * dim + c] * inv;
        }
      }
    }
    t.applyGradients(batch, perKey, 0f, step);
  }

  private void shardStep(EmbeddingTable t, String[] batch, int step) {
    Bags b = bags(batch);
    float[] pooled = t.pooled(b.keys(), b.bags(), true, true);
    t.applyPooledGradients(b.keys(), b.bags(), exampleGradients(pooled, step), 0f, step);
  }

  private interface StepFn {
    void run(EmbeddingTable t, String[] batch, int step);
  }

  private String measure(String label, EmbeddingTable t, LocalShardProcesses procs, StepFn fn)
      throws Exception {
    long self = ProcessHandle.current().pid();
    double[] at0 = new double[4]; // client CPU, shards' CPU, bytes out, bytes in
    Timed.Run run = Timed.run(warmup, seconds,
        i -> fn.run(t, batches.get(i % batches.size()), i + 1), () -> {
          at0[0] = LocalShardProcesses.cpuSeconds(self);
          at0[1] = procs.cpuSeconds();
          at0[2] = sent.sum();
          at0[3] = received.sum();
        });
    long n = run.steps();
    double secs = run.seconds();
    double ex = (double) n * examples;
    return String.format(Locale.ROOT, "| %-28s | %,10.0f | %8.2f | %,10.0f | %,10.0f | %6.2f |"
            + " %6.2f |", label, ex / secs, secs * 1e3 / n, (sent.sum() - at0[2]) / ex,
        (received.sum() - at0[3]) / ex, (LocalShardProcesses.cpuSeconds(self) - at0[0]) * 1e3 / n,
        (procs.cpuSeconds() - at0[1]) * 1e3 / n);
  }

  @Override
  public Integer call() throws Exception {
    batches = makeBatches();
    long distinct = 0;
    for (String[] b : batches) {
      distinct += bags(b).keys().length;
    }
    System.out.printf(Locale.ROOT, "pooled vs client-pooled mean bags: %d examples x %d keys per"
        + " step (%.0f distinct keys per step), dim %d, %s, Adagrad, %d loopback shard"
        + " processes (write-ahead log on, fsync everysec)%s; JDK %s, %d cores; %s s measured after %s s warm-up, %d rounds%n",
        examples, bag, (double) distinct / batches.size(), dim,
        corpus != null ? "words of " + corpus.getFileName() : String.format(Locale.ROOT,
            "Zipf s=%.2f over %,d keys", zipf, numKeys),
        shards, serverCpus == null ? "" : " on CPUs " + serverCpus + " (taskset)",
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
        seconds, warmup, rounds);
    System.out.println("| pooling                      | examples/s |  ms/step |"
        + " B out/ex   | B in/ex    | client CPU ms/step | shards CPU ms/step |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|");
    Path data = Files.createTempDirectory("pooled-bench");
    List<String> launcher = serverCpus == null ? List.of() : List.of("taskset", "-c", serverCpus);
    try (LocalShardProcesses procs = new LocalShardProcesses(shards, basePort, data, serverHeap,
        "", launcher, List.of());
        TableClient c = TableClients.connect(procs.endpoints(),
            // bytes are counted by a gRPC interceptor: the data calls go through gRPC here
            ClientOptions.builder().interceptors(List.of(counter()))
                .dataPlane(ClientOptions.DataPlane.GRPC).build())) {
      EmbeddingTable client = c.createTable(TableConfigs.builder("client_pooled", dim)
          .setOptimizer(TableConfigs.adagrad(0.05f, 0.1f, 1e-8f)).build());
      EmbeddingTable pooled = c.createTable(TableConfigs.builder("shard_pooled", dim)
          .setOptimizer(TableConfigs.adagrad(0.05f, 0.1f, 1e-8f)).build());
      for (int r = 0; r < rounds; r++) {
        System.out.println(measure("client (rows over the wire)", client, procs,
            this::clientStep));
        System.out.println(measure("shards (pooled vectors)", pooled, procs, this::shardStep));
      }
    }
    return 0;
  }
}
