package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import dev.dynembed.table.v1.AdmissionPressure;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Admission under memory pressure (design 0027), measured with the memory it is for: a stream of
 * keys (a corpus's words, or Zipf keys) counted through one loopback shard whose memory holds a
 * fraction of the keys' rows, once per admission rule. Reports, per rule, how much of the
 * stream's second half found a row when counted (what a trainer then trains), the calls refused,
 * the rows held and the rows ever built (what churn costs), and the wall time.
 *
 * <p>Two kinds of memory: the shard's budget (--memory-budget-mb, a hard limit: a call that may
 * pass it is refused) and the table's max_bytes (a soft cap whose LFU eviction makes room).
 */
@Command(name = "table-bench pressure", mixinStandardHelpOptions = true)
public final class PressureBench implements Callable<Integer> {
  @Option(names = "--corpus", description = "text file whose words are the keys (omit: Zipf)")
  Path corpus;
  @Option(names = "--keys", defaultValue = "1000000", description = "Zipf key space") int numKeys;
  @Option(names = "--occurrences", defaultValue = "4000000", description = "Zipf stream length")
  int occurrences;
  @Option(names = "--dim", defaultValue = "100", description = "values per row") int dim;
  @Option(names = "--fit", defaultValue = "0.1", description = "the fraction of the stream's"
      + " distinct keys whose rows fit the memory (default ${DEFAULT-VALUE})") double fit;
  @Option(names = "--batch", defaultValue = "4096", description = "keys per call") int batch;
  @Option(names = "--pressure", defaultValue = "0.5:64", description = "FROM:MAX_COUNT of the"
      + " pressured rule (default ${DEFAULT-VALUE})") String pressure;
  @Option(names = "--min-count", defaultValue = "5", description = "the fixed rule's min_count"
      + " (default ${DEFAULT-VALUE})") int minCount;

  public static void main(String[] args) {
    System.exit(new CommandLine(new PressureBench()).execute(args));
  }

  private record Rule(String name, TableConfig config, boolean budget) {}

  @Override
  public Integer call() throws Exception {
    KeyStream stream = KeyStream.of(corpus, numKeys, occurrences, 1.0, batch);
    List<String[]> batches = stream.batches();
    String source = stream.source();
    Map<String, Integer> truth = stream.counts();
    int rowsThatFit = (int) Math.max(1, truth.size() * fit);
    double best = topCoverage(batches, truth, rowsThatFit);
    AdmissionPressure ap = dev.dynembed.table.tools.cli.TableCli.admissionPressure(pressure);
    Path dir = Files.createTempDirectory("pressure-bench");
    long perRow = bytesPerRow(dir);
    long rowBytes = (long) rowsThatFit * perRow;
    // the counts of keys without rows take a sixteenth of the memory (they count in it too)
    int sketchKib = (int) Math.max(16, rowBytes / 16 / 1024);
    System.out.printf(Locale.ROOT, "admission under memory pressure over %s: %,d distinct keys,"
        + " memory for %,d rows of dim %d (%.0f%% of the keys, %.1f MiB at %d bytes a row),"
        + " admission sketches of %,d KiB, calls of %,d keys, 1 loopback shard; the %,d most"
        + " frequent keys would cover %.3f of the second half; JDK %s%n", source, truth.size(),
        rowsThatFit, dim, fit * 100, rowBytes / 1048576.0, perRow, sketchKib, batch, rowsThatFit,
        best,
        System.getProperty("java.version"));
    List<Rule> rules = List.of(
        new Rule("budget, every key at first sight", base().build(), true),
        new Rule("budget, min_count " + minCount, base().setMinCount(minCount)
            .setAdmissionSketchKib(sketchKib).build(), true),
        new Rule("budget, admission_pressure " + pressure, base().setAdmissionSketchKib(sketchKib)
            .setAdmissionPressure(ap).build(), true),
        new Rule("max_bytes (LFU), every key at first sight", base().setMaxBytes(rowBytes)
            .build(), false),
        new Rule("max_bytes (LFU), min_count " + minCount, base().setMaxBytes(rowBytes)
            .setMinCount(minCount).setAdmissionSketchKib(sketchKib).build(), false),
        new Rule("max_bytes (LFU), admission_pressure " + pressure, base().setMaxBytes(rowBytes)
            .setAdmissionSketchKib(sketchKib).setAdmissionPressure(ap).build(), false));
    System.out.println("| memory, admission | second half covered | calls refused | rows held |"
        + " rows built | admission count at the end | seconds |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|");
    int n = 0;
    for (Rule r : rules) {
      ShardEngine engine = new ShardEngine(0, 1, dir.resolve("r" + n++));
      TableServer server = new TableServer(engine, "127.0.0.1", 0, 2);
      try (TableClient c = TableClients.connect(List.of("127.0.0.1:" + server.port()))) {
        EmbeddingTable t = c.createTable(r.config());
        if (r.budget()) { // the rows' room above what the empty table (and its sketch) holds
          engine.setMemoryBudget(engine.bytesInUse() + rowBytes);
        }
        long start = System.nanoTime();
        long covered = 0;
        long second = 0;
        int refused = 0;
        Set<String> built = new HashSet<>();
        for (int b = 0; b < batches.size(); b++) {
          String[] keys = batches.get(b);
          boolean late = b >= batches.size() / 2;
          try {
            KeyCounts kc = t.count(keys, true);
            for (int i = 0; i < keys.length; i++) {
              if (kc.admitted()[i]) {
                built.add(keys[i]);
                covered += late ? 1 : 0;
              }
            }
          } catch (TableException e) {
            refused++;
          }
          second += late ? keys.length : 0;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        TableCounters tc = t.describe().getCounters();
        System.out.printf(Locale.ROOT, "| %s | %.3f | %,d of %,d | %,d | %,d | %s | %.1f |%n",
            r.name(), (double) covered / second, refused, batches.size(), tc.getKeys(),
            built.size(), tc.getAdmissionCount() == 0 && r.config().hasAdmissionPressure()
                ? "none (full)" : String.valueOf(tc.getAdmissionCount()), secs);
      } finally {
        server.close();
        engine.close();
      }
    }
    return 0;
  }

  private TableConfig.Builder base() {
    return TableConfigs.builder("p", dim).setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 0f));
  }

  /** A row's bytes as the shard counts them (from 10,000 rows of a throwaway table). */
  private long bytesPerRow(Path dir) {
    ShardEngine e = new ShardEngine(0, 1, dir.resolve("size"));
    var t = e.create(TableConfigs.normalize(base().build()));
    long before = e.bytesInUse();
    String[] keys = new String[10_000];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = "size:" + i;
    }
    t.findOrInsert(dev.dynembed.table.common.PackedKeys.of(keys), null, (float[]) null);
    long per = (e.bytesInUse() - before) / keys.length;
    e.close();
    return per;
  }

  /** What the {@code n} most frequent keys cover of the stream's second half. */
  private static double topCoverage(List<String[]> batches, Map<String, Integer> truth, int n) {
    Set<String> top = new HashSet<>();
    truth.entrySet().stream().sorted((a, b) -> b.getValue() - a.getValue()).limit(n)
        .forEach(x -> top.add(x.getKey()));
    long hit = 0;
    long all = 0;
    for (int b = batches.size() / 2; b < batches.size(); b++) {
      for (String k : batches.get(b)) {
        hit += top.contains(k) ? 1 : 0;
        all++;
      }
    }
    return (double) hit / all;
  }
}
