package dev.dynembed.table.bench;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.RowTraffic;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Issue 55's table case: a Zipf lookup+update loop (findOrInsert, then applyGradients of the same
 * keys, Adagrad) from two client processes on 2 loopback shard processes, without and with the
 * trainers' row cache (docs/design/0022-row-cache.md): keys/s over both clients, the shards' CPU
 * per batch, and the rows that crossed per key looked up.
 */
@Command(name = "table-bench row-cache", mixinStandardHelpOptions = true)
public final class RowCacheBench implements Callable<Integer> {
  @Option(names = "--keys", defaultValue = "1000000",
      description = "key space (default ${DEFAULT-VALUE})") int numKeys;
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "Zipf exponent of the keys (default ${DEFAULT-VALUE})") double zipf;
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per lookup+update (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--seconds", defaultValue = "20",
      description = "measured seconds per case, after --warmup (default ${DEFAULT-VALUE})")
  double seconds;
  @Option(names = "--warmup", defaultValue = "10",
      description = "seconds of each case not measured (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--clients", defaultValue = "2",
      description = "client processes (default ${DEFAULT-VALUE})") int clients;
  @Option(names = "--staleness", defaultValue = "0,8,32", split = ",", description = "cases:"
      + " the cache's max staleness S (0: no cache; default ${DEFAULT-VALUE})") int[] staleness;
  @Option(names = "--cache-mb", defaultValue = "256",
      description = "row cache per client (default ${DEFAULT-VALUE})") long cacheMb;
  @Option(names = "--base-port", defaultValue = "17700",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;

  public static void main(String[] args) {
    System.exit(new CommandLine(new RowCacheBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "lookup+update, %d client processes on 2 loopback shard"
        + " processes: %,d keys, Zipf %.2f, batch %,d, dim %d, Adagrad; %s s measured after %s s;"
        + " JDK %s, %d cores%n", clients, numKeys, zipf, batch, dim, seconds, warmup,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
    System.out.println("| cache | keys/s (all clients) | shard CPU per batch | rows crossed per"
        + " key | hit rate |");
    System.out.println("|---|---:|---:|---:|---:|");
    for (int s : staleness) {
      Path dir = Files.createTempDirectory("row-cache-bench");
      try (LocalShardProcesses p = new LocalShardProcesses(2, basePort, dir, "4g", "")) {
        try (TableClient admin = TableClients.connect(p.endpoints())) {
          admin.createTable(TableConfigs.builder("rc", dim)
              .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f)).build());
        }
        List<Process> procs = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
          procs.add(new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java")
              .toString(), "-Xmx2g", "--add-modules", "jdk.incubator.vector", "-cp",
              System.getProperty("java.class.path"), Client.class.getName(),
              String.join(",", p.endpoints()), String.valueOf(numKeys), String.valueOf(zipf),
              String.valueOf(dim), String.valueOf(batch), String.valueOf(warmup),
              String.valueOf(seconds), String.valueOf(cacheMb), String.valueOf(s),
              String.valueOf(c)).redirectError(ProcessBuilder.Redirect.INHERIT).start());
        }
        // the shards' CPU over the measured window: read when the clients say they start
        double cpu0 = 0;
        long keys = 0;
        long batches = 0;
        long crossed = 0;
        long hits = 0;
        long lookups = 0;
        List<BufferedReader> outs = new ArrayList<>();
        for (Process pr : procs) {
          outs.add(new BufferedReader(new InputStreamReader(pr.getInputStream(),
              StandardCharsets.UTF_8)));
        }
        for (BufferedReader r : outs) {
          String line = r.readLine(); // "measuring"
          if (line == null) {
            throw new IllegalStateException("a client ended before measuring");
          }
        }
        cpu0 = p.cpuSeconds();
        double cpu1 = 0;
        for (int c = 0; c < outs.size(); c++) {
          String line = outs.get(c).readLine(); // "keys batches crossed hits lookups"
          if (c == 0) {
            cpu1 = p.cpuSeconds();
          }
          if (line == null) {
            throw new IllegalStateException("client " + c + " gave no result");
          }
          String[] f = line.trim().split(" ");
          keys += Long.parseLong(f[0]);
          batches += Long.parseLong(f[1]);
          crossed += Long.parseLong(f[2]);
          hits += Long.parseLong(f[3]);
          lookups += Long.parseLong(f[4]);
        }
        for (Process pr : procs) {
          pr.waitFor();
        }
        System.out.printf(Locale.ROOT, "| %s | %,.0f | %.2f ms | %.3f | %s |%n",
            s == 0 ? "none" : "S = " + s + ", " + cacheMb + " MiB", keys / seconds,
            1000 * (cpu1 - cpu0) / Math.max(1, batches), (double) crossed / Math.max(1, keys),
            s == 0 ? "-" : String.format(Locale.ROOT, "%.3f", (double) hits / lookups));
      }
    }
    return 0;
  }

  /** One client process: warms up, prints "measuring", then its counts of the window. */
  public static final class Client {
    public static void main(String[] a) throws Exception {
      List<String> endpoints = TableClients.parseEndpoints(a[0]);
      int numKeys = Integer.parseInt(a[1]);
      double zipf = Double.parseDouble(a[2]);
      int dim = Integer.parseInt(a[3]);
      int batch = Integer.parseInt(a[4]);
      double warmup = Double.parseDouble(a[5]);
      double seconds = Double.parseDouble(a[6]);
      long cacheMb = Long.parseLong(a[7]);
      int s = Integer.parseInt(a[8]);
      int seed = Integer.parseInt(a[9]);
      try (TableClient c = TableClients.connect(endpoints, ClientOptions.builder()
          .rowCache(new ClientOptions.RowCaching(cacheMb << 20, s)).build())) {
        EmbeddingTable t = c.openTable("rc");
        Zipf z = new Zipf(numKeys, zipf);
        SplittableRandom rnd = new SplittableRandom(seed);
        float[] g = new float[batch * dim];
        for (int i = 0; i < g.length; i++) {
          g[i] = (float) (rnd.nextDouble() - 0.5) * 0.01f;
        }
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        long step = 0;
        while (System.nanoTime() < warmEnd) {
          step(t, z, rnd, batch, g, ++step);
        }
        RowTraffic before = TableClients.traffic(t);
        System.out.println("measuring");
        System.out.flush();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long batches = 0;
        while (System.nanoTime() < end) {
          step(t, z, rnd, batch, g, ++step);
          batches++;
        }
        RowTraffic after = TableClients.traffic(t);
        System.out.println(batches * batch + " " + batches + " "
            + (after.rowsRead() + after.rowsWritten() - before.rowsRead() - before.rowsWritten())
            + " " + (after.cacheHits() - before.cacheHits()) + " "
            + (after.cacheHits() + after.cacheMisses() - before.cacheHits()
                - before.cacheMisses()));
      }
    }

    private static void step(EmbeddingTable t, Zipf z, SplittableRandom rnd, int batch,
        float[] g, long step) {
      String[] keys = new String[batch];
      for (int i = 0; i < batch; i++) {
        keys[i] = "key:" + z.next(rnd);
      }
      t.findOrInsert(keys);
      t.applyGradients(keys, g, 0f, step);
    }
  }
}
