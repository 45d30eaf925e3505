package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.ServingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Inference lookups ({@code find} of Zipf-distributed keys) on loopback shard processes, read
 * directly and through {@link ServingTable} caches of several sizes: rows/s, the cache's hit
 * rate, and the keys that still reach the shards.
 */
@Command(name = "table-bench serving", mixinStandardHelpOptions = true)
public final class ServingBench implements Callable<Integer> {
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per call (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--keys", defaultValue = "1000000", description = "key space (all stored)")
  int numKeys;
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "exponent of the Zipf distribution of keys (default ${DEFAULT-VALUE})")
  double zipf;
  @Option(names = "--shards", defaultValue = "2",
      description = "shard processes (default ${DEFAULT-VALUE})") int shards;
  @Option(names = "--cache-keys", defaultValue = "10000,100000,1000000", split = ",",
      description = "cache sizes, in rows (the byte bound is rows x the row's weight)")
  long[] cacheKeys;
  @Option(names = "--seconds", defaultValue = "8",
      description = "measured seconds per case (default ${DEFAULT-VALUE})") double seconds;
  @Option(names = "--warmup", defaultValue = "8",
      description = "warm-up seconds per case (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--base-port", defaultValue = "17400",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;
  @Option(names = "--server-heap", defaultValue = "2g",
      description = "heap of each shard process (default ${DEFAULT-VALUE})") String serverHeap;

  public static void main(String[] args) {
    System.exit(new CommandLine(new ServingBench()).execute(args));
  }

  private interface Lookup {
    void run(String[] keys);
  }

  private String measure(String label, List<String[]> batches, Lookup l, ServingTable s)
      throws Exception {
    long[] at0 = new long[3]; // hits, misses, keys read
    Timed.Run run = Timed.run(warmup, seconds, i -> l.run(batches.get(i % batches.size())),
        () -> {
          if (s != null) {
            at0[0] = s.stats().hitCount();
            at0[1] = s.stats().missCount();
            at0[2] = s.keysRead();
          }
        });
    long n = run.steps();
    double secs = run.seconds();
    String hit = "";
    String read = "";
    if (s != null) {
      long h = s.stats().hitCount() - at0[0];
      long m = s.stats().missCount() - at0[1];
      hit = String.format(Locale.ROOT, "%.3f", (double) h / Math.max(1, h + m));
      read = String.format(Locale.ROOT, "%,.0f", (double) (s.keysRead() - at0[2]) / n);
    }
    return String.format(Locale.ROOT, "| %-34s | %,12.0f | %7.2f | %9s | %12s |", label,
        n * (double) batch / secs, secs * 1e3 / n, hit, read);
  }

  @Override
  public Integer call() throws Exception {
    String[] keys = Zipf.keys(numKeys);
    List<String[]> batches = Zipf.batches(keys, 256, batch, zipf);
    System.out.printf(Locale.ROOT, "serving lookups: find of %d Zipf(s=%.2f) keys per call over"
        + " %,d stored keys, dim %d, %d loopback shard processes; 1 client thread; JDK %s, %d"
        + " cores; %s s measured after %s s warm-up%n", batch, zipf, numKeys, dim, shards,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(), seconds,
        warmup);
    System.out.println("| lookups                            |       rows/s | ms/call | hit rate |"
        + " keys to shards/call |");
    System.out.println("|---|---:|---:|---:|---:|");
    Path data = Files.createTempDirectory("serving-bench");
    try (LocalShardProcesses procs = new LocalShardProcesses(shards, basePort, data, serverHeap,
        "", List.of(), List.of("--wal", "off"));
        TableClient c = TableClients.connect(procs.endpoints())) {
      EmbeddingTable t = c.createTable(TableConfigs.builder("serve", dim).build());
      for (int i = 0; i < numKeys; i += 65536) {
        t.findOrInsert(Arrays.copyOfRange(keys, i, Math.min(numKeys, i + 65536)));
      }
      System.out.println(measure("shards directly", batches, t::find, null));
      long rowBytes = 64 + 2 * ("key:" + numKeys).length() + 4L * dim;
      for (long size : cacheKeys) {
        ServingTable s = new ServingTable(t, size * rowBytes, Duration.ofMinutes(10));
        System.out.println(measure(String.format(Locale.ROOT, "serving cache of %,d rows (%d MB)",
            size, size * rowBytes >> 20), batches, s::find, s));
      }
    }
    return 0;
  }
}
