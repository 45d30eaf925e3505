package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.EvictionPolicy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What an eviction costs: a table of N keys (Adagrad, frequencies from a Zipf stream) evicted to
 * half by LFU, then by a TTL; seconds per eviction, in process and on loopback shard processes.
 */
@Command(name = "table-bench evict", mixinStandardHelpOptions = true)
public final class EvictBench implements Callable<Integer> {
  @Option(names = "--keys", defaultValue = "1000000",
      description = "keys in the table (default ${DEFAULT-VALUE})") int numKeys;
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--shards", defaultValue = "2",
      description = "shard processes (default ${DEFAULT-VALUE})") int shards;
  @Option(names = "--base-port", defaultValue = "17500",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;

  public static void main(String[] args) {
    System.exit(new CommandLine(new EvictBench()).execute(args));
  }

  private void run(String label, TableClient c) {
    EmbeddingTable t = c.createTable(TableConfigs.builder("ev", dim)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f)).build());
    String[] keys = new String[numKeys];
    for (int i = 0; i < numKeys; i++) {
      keys[i] = "key:" + i;
    }
    SplittableRandom rnd = new SplittableRandom(3);
    Zipf z = new Zipf(numKeys, 1.0);
    for (int i = 0; i < numKeys; i += 65536) {
      String[] part = Arrays.copyOfRange(keys, i, Math.min(numKeys, i + 65536));
      t.findOrInsert(part);
      String[] hot = new String[65536];
      for (int j = 0; j < hot.length; j++) {
        hot[j] = keys[z.next(rnd)];
      }
      t.applyGradients(hot, new float[hot.length * dim], 0f, i / 65536 + 1);
    }
    long before = t.describe().getCounters().getKeys();
    long t0 = System.nanoTime();
    long lfu = t.evict(0, 0, numKeys / 2, EvictionPolicy.LFU);
    double lfuSecs = (System.nanoTime() - t0) / 1e9;
    t0 = System.nanoTime();
    long ttl = t.evict(5, 0, 0, EvictionPolicy.LFU);
    double ttlSecs = (System.nanoTime() - t0) / 1e9;
    System.out.printf(Locale.ROOT, "| %-28s | %,d | %,d in %.2f s | %,d in %.2f s | %,d |%n",
        label, before, lfu, lfuSecs, ttl, ttlSecs, t.describe().getCounters().getKeys());
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "eviction of a table of %,d keys, dim %d, Adagrad (rows and"
        + " slots: %,d bytes each); JDK %s, %d cores%n", numKeys, dim, 8L * dim,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
    System.out.println("| table | keys | LFU cap to half | then TTL 5 steps | keys left |");
    System.out.println("|---|---:|---:|---:|---:|");
    Path dir = Files.createTempDirectory("evict-bench");
    try (TableClient c = TableClients.inProcess(dir)) {
      run("in process", c);
    }
    Files.createDirectories(dir.resolve("s"));
    try (LocalShardProcesses p = new LocalShardProcesses(shards, basePort, dir.resolve("s"), "4g",
        "", List.of(), List.of());
        TableClient c = TableClients.connect(p.endpoints())) {
      run(shards + " loopback shards (WAL on)", c);
    }
    return 0;
  }
}
