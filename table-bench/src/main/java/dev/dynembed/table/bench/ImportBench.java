package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.VectorImport;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Issue 54's import benchmark: a file of N random vectors (word2vec text and binary, written
 * once) imported by {@link VectorImport} into the in-process table and into 2 loopback shard
 * processes (Adagrad tables, so that slots are set too): rows/s of the check pass, of the import
 * pass, and overall, and the file's size.
 */
@Command(name = "table-bench import", mixinStandardHelpOptions = true)
public final class ImportBench implements Callable<Integer> {
  @Option(names = "--rows", defaultValue = "1000000",
      description = "vectors in the file (default ${DEFAULT-VALUE})") int rows;
  @Option(names = "--dim", defaultValue = "100",
      description = "values per vector (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--formats", defaultValue = "word2vec-text,word2vec-binary", split = ",",
      description = "file formats (default ${DEFAULT-VALUE})") String[] formats;
  @Option(names = "--shards", defaultValue = "0,2", split = ",",
      description = "cases: 0 = in process, N = N loopback shard processes (default"
          + " ${DEFAULT-VALUE})") int[] shards;
  @Option(names = "--shard-args", defaultValue = "", split = " ", description = "extra"
      + " table-server options of the shard processes, e.g. '--fsync no' (default: none, the"
      + " durable default: logged, fsync every second)") List<String> shardArgs;
  @Option(names = "--shard-java-opts", defaultValue = "", description = "JVM options of the"
      + " shard processes ({shard}: its index), e.g. a flight recording") String shardJavaOpts;
  @Option(names = "--batch", defaultValue = "4096",
      description = "rows per assign call (default ${DEFAULT-VALUE})") int batch;
  @Option(names = "--base-port", defaultValue = "17800",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;

  public static void main(String[] args) {
    System.exit(new CommandLine(new ImportBench()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "import of %,d random vectors of dim %d (Gaussian, as"
        + " word2vec writes them), Adagrad tables, %,d rows per call; JDK %s, %d cores%n", rows,
        dim, batch,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
    System.out.println("| format | file | table | check rows/s | import rows/s | overall |"
        + " shards' CPU s (import) |");
    System.out.println("|---|---:|---|---:|---:|---:|---:|");
    Path work = Files.createTempDirectory("import-bench");
    try {
      for (String name : formats) {
        VectorImport.Format format = VectorImport.Format.parse(name);
        Path file = work.resolve("vectors." + name);
        write(file, format);
        for (int n : shards) {
          Path dir = Files.createTempDirectory(work, "shards");
          VectorImport.Result r;
          double[] cpu = {Double.NaN};
          if (n == 0) {
            try (TableClient c = TableClients.inProcess()) {
              r = run(c, file, format, null, cpu);
            }
          } else {
            try (LocalShardProcesses p = new LocalShardProcesses(n, basePort, dir, "4g", shardJavaOpts,
                List.of(), shardArgs.stream().filter(a -> !a.isEmpty()).toList());
                TableClient c = TableClients.connect(p.endpoints())) {
              r = run(c, file, format, p, cpu);
            }
          }
          System.out.printf(Locale.ROOT, "| %s | %,d MB | %s | %,.0f | %,.0f | %,.0f | %s |%n",
              name, Files.size(file) >> 20, n == 0 ? "in process" : n + " shard processes",
              r.rows() / (r.checkNanos() / 1e9), r.rows() / (r.importNanos() / 1e9),
              r.rowsPerSecond(), Double.isNaN(cpu[0]) ? "-"
                  : String.format(Locale.ROOT, "%.1f of %.1f wall", cpu[0],
                      r.importNanos() / 1e9));
        }
        Files.delete(file);
      }
    } finally {
      try (var s = Files.walk(work)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
    return 0;
  }

  /** Imports; {@code cpu[0]}: the shards' CPU seconds over the whole run (check pass idle). */
  private VectorImport.Result run(TableClient c, Path file, VectorImport.Format format,
      LocalShardProcesses p, double[] cpu) throws IOException {
    EmbeddingTable t = c.createTable(TableConfigs.builder("imported", dim)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f)).build());
    double before = p == null ? 0 : p.cpuSeconds();
    VectorImport.Result r = VectorImport.run(t, file, format,
        new VectorImport.Options(0, -1, batch));
    if (p != null) {
      cpu[0] = p.cpuSeconds() - before;
    }
    if (t.describe().getCounters().getKeys() != rows) {
      throw new IllegalStateException("imported " + t.describe().getCounters().getKeys()
          + " rows, expected " + rows);
    }
    return r;
  }

  private void write(Path file, VectorImport.Format format) throws IOException {
    SplittableRandom random = new SplittableRandom(1);
    ByteBuffer row = ByteBuffer.allocate(dim * 4).order(ByteOrder.LITTLE_ENDIAN);
    try (OutputStream o = new BufferedOutputStream(Files.newOutputStream(file), 1 << 20)) {
      o.write((rows + " " + dim + "\n").getBytes(StandardCharsets.UTF_8));
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < rows; i++) {
        String key = "w" + i;
        if (format == VectorImport.Format.WORD2VEC_BINARY) {
          o.write((key + " ").getBytes(StandardCharsets.UTF_8));
          row.clear();
          for (int j = 0; j < dim; j++) {
            row.putFloat((float) (gaussian(random) * 0.1));
          }
          o.write(row.array());
          o.write('\n');
        } else {
          b.setLength(0);
          b.append(key);
          for (int j = 0; j < dim; j++) {
            b.append(' ');
            sixDecimals(b, gaussian(random) * 0.1);
          }
          b.append(" \n"); // word2vec's C tool: "%lf " per value
          o.write(b.toString().getBytes(StandardCharsets.UTF_8));
        }
      }
    }
  }

  /** {@code %.6f} without String.format's cost (100M values). */
  static void sixDecimals(StringBuilder b, double v) {
    long m = Math.round(Math.abs(v) * 1e6);
    if (v < 0 && m != 0) {
      b.append('-');
    }
    b.append(m / 1_000_000).append('.');
    String frac = Long.toString(m % 1_000_000);
    for (int k = frac.length(); k < 6; k++) {
      b.append('0');
    }
    b.append(frac);
  }

  private static double gaussian(SplittableRandom r) {
    return Math.sqrt(-2 * Math.log(1 - r.nextDouble())) * Math.cos(2 * Math.PI * r.nextDouble());
  }
}
