package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The disk tier's hot set: a table of N keys (Adagrad) read and updated by Zipf batches, with
 * memory capped at a fraction of the keys (the rest on RocksDB) against the same table all in
 * memory: rows/s of lookup+update, the hit rate of memory (1 - promotions / the distinct keys of
 * the batches: the share of a batch's keys found in memory), rows in memory, and rows on disk.
 * In process, one thread.
 */
@Command(name = "table-bench disk", mixinStandardHelpOptions = true)
public final class DiskTierBench extends TableShapeOptions implements Callable<Integer> {
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "exponent of the Zipf distribution of keys (default ${DEFAULT-VALUE})")
  double zipf;
  @Option(names = "--seconds", defaultValue = "10",
      description = "measured seconds per case (default ${DEFAULT-VALUE})") double seconds;
  @Option(names = "--warmup", defaultValue = "5",
      description = "warm-up seconds per case (default ${DEFAULT-VALUE})") double warmup;
  @Option(names = "--memory", defaultValue = "1.0,0.5,0.25,0.1", split = ",",
      description = "fractions of the keys memory holds (1.0: no cap, no disk tier)")
  List<Double> fractions;

  public static void main(String[] args) {
    System.exit(new CommandLine(new DiskTierBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "disk tier: %,d keys, dim %d, Adagrad (%,d bytes of floats per"
        + " row), Zipf s=%.2f batches of %,d (lookup+update), %.0f s measured after %.0f s;"
        + " JDK %s, %d cores, in process, 1 thread%n", numKeys, dim, 8L * dim, zipf, batch,
        seconds, warmup, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors());
    System.out.println("| memory holds | rows/s | hit rate of memory | rows in memory |"
        + " bytes in memory | on disk |");
    System.out.println("|---|---:|---:|---:|---:|---:|");
    String[] keys = Zipf.keys(numKeys);
    List<String[]> batches = Zipf.batches(keys, 256, batch, zipf);
    long distinct = 0;
    for (String[] k : batches) {
      distinct += new HashSet<>(Arrays.asList(k)).size();
    }
    double distinctPerBatch = distinct / 256.0;
    float[] g = new float[batch * dim];
    Arrays.fill(g, 1e-3f);
    for (double f : fractions) {
      Path dir = Files.createTempDirectory("disk-bench");
      try (TableClient c = TableClients.inProcess(dir)) {
        TableConfig.Builder cfg = TableConfigs.builder("d", dim)
            .setOptimizer(TableConfigs.adagrad(0.05f, 0.1f, 1e-8f));
        if (f < 1.0) {
          cfg.setMaxKeys((long) (numKeys * f)).setDiskTier(true);
        }
        EmbeddingTable t = c.createTable(cfg.build());
        for (int i = 0; i < numKeys; i += 65536) {
          t.findOrInsert(Arrays.copyOfRange(keys, i, Math.min(numKeys, i + 65536)));
        }
        var engine = dev.dynembed.table.embedded.EmbeddedTables.engineOf(c);
        engine.awaitEvictions();
        long step = 0;
        for (long end = System.nanoTime() + (long) (warmup * 1e9); System.nanoTime() < end; ) {
          String[] k = batches.get((int) (step % batches.size()));
          t.findOrInsert(k);
          t.applyGradients(k, g, 0f, ++step);
        }
        TableCounters before = t.describe().getCounters();
        long t0 = System.nanoTime();
        long n = 0;
        while (System.nanoTime() - t0 < seconds * 1e9) {
          String[] k = batches.get((int) (step % batches.size()));
          t.findOrInsert(k);
          t.applyGradients(k, g, 0f, ++step);
          n++;
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        engine.awaitEvictions();
        TableCounters after = t.describe().getCounters();
        double lookups = n * distinctPerBatch; // a batch's first look at each of its keys
        double hit = 1 - (after.getPromotions() - before.getPromotions()) / lookups;
        System.out.printf(Locale.ROOT, "| %s | %,.0f | %.4f | %,d | %,.1f MiB | %,d rows |%n",
            f >= 1.0 ? "all (no disk tier)" : String.format(Locale.ROOT, "%.0f%% of the keys",
                100 * f), n * batch / secs, hit, after.getKeys() - after.getColdKeys(),
            after.getBytesUsed() / 1048576.0, after.getColdKeys());
      }
    }
    return 0;
  }
}
