package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Bounded admission against exact counting: a stream of keys (a corpus's words, or Zipf keys)
 * counted by an in-process table with min_count, once with the exact map of pending keys and once
 * per sketch size; reports the memory of the pending counts and the keys admitted early (seen
 * fewer than min_count times but admitted by the sketch's overestimate).
 */
@Command(name = "table-bench admission", mixinStandardHelpOptions = true)
public final class AdmissionBench implements Callable<Integer> {
  @Option(names = "--corpus", description = "text file whose words are the keys (omit: Zipf)")
  Path corpus;
  @Option(names = "--keys", defaultValue = "10000000", description = "Zipf key space") int numKeys;
  @Option(names = "--occurrences", defaultValue = "20000000", description = "Zipf stream length")
  int occurrences;
  @Option(names = "--zipf", defaultValue = "1.0",
      description = "exponent of the Zipf distribution of keys (default ${DEFAULT-VALUE})")
  double zipf;
  @Option(names = "--min-count", defaultValue = "5",
      description = "admission count (min_count) (default ${DEFAULT-VALUE})") int minCount;
  @Option(names = "--sketch-kib", defaultValue = "64,256,1024,4096", split = ",",
      description = "admission sketch sizes measured, KiB per shard (default ${DEFAULT-VALUE})")
  int[] sketches;

  public static void main(String[] args) {
    System.exit(new CommandLine(new AdmissionBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    KeyStream stream = KeyStream.of(corpus, numKeys, occurrences, zipf, 8192);
    List<String[]> batches = stream.batches();
    String source = stream.source();
    Map<String, Integer> truth = stream.counts();
    String[] keys = truth.keySet().toArray(new String[0]);
    long below = truth.values().stream().filter(c -> c < minCount).count();
    System.out.printf(Locale.ROOT, "admission with min_count %d over %s: %,d distinct keys,"
        + " %,d of them seen fewer than %d times; JDK %s%n", minCount, source, keys.length, below,
        minCount, System.getProperty("java.version"));
    System.out.println("| pending counts | their memory | keys admitted early | over-admission"
        + " rate | count-only throughput (keys/s) |");
    System.out.println("|---|---:|---:|---:|---:|");
    Path dir = Files.createTempDirectory("admission-bench");
    List<Integer> sizes = new ArrayList<>();
    sizes.add(0);
    for (int k : sketches) {
      sizes.add(k);
    }
    for (int kib : sizes) {
      try (TableClient c = TableClients.inProcess(dir)) {
        EmbeddingTable t = c.createTable(TableConfigs.builder("adm" + kib, 4)
            .setMinCount(minCount).setAdmissionSketchKib(kib).build());
        long start = System.nanoTime();
        long n = 0;
        for (String[] b : batches) {
          t.count(b, true);
          n += b.length;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        long admittedRowsBytes = t.describe().getCounters().getBytesUsed();
        long early = 0;
        for (int i = 0; i < keys.length; i += 65536) {
          String[] part = Arrays.copyOfRange(keys, i, Math.min(keys.length, i + 65536));
          KeyCounts k = t.count(part, false);
          for (int j = 0; j < part.length; j++) {
            if (k.admitted()[j] && truth.get(part[j]) < minCount) {
              early++;
            }
          }
        }
        long pendingBytes = kib > 0 ? kib * 1024L
            : t.describe().getCounters().getPendingKeys() * 96L;
        System.out.printf(Locale.ROOT, "| %s | %,d KiB | %,d | %.4f | %,.0f |%n",
            kib == 0 ? "exact map" : String.format(Locale.ROOT, "sketch of %,d KiB", kib),
            pendingBytes >> 10, early, (double) early / Math.max(1, below), n / secs);
        c.dropTable(t.name());
        if (admittedRowsBytes < 0) {
          throw new IllegalStateException();
        }
      }
    }
    return 0;
  }
}
