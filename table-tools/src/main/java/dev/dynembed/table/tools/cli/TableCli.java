package dev.dynembed.table.tools.cli;

import com.google.protobuf.util.JsonFormat;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.VectorImport;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.InitializerConfig;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableInfo;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import dev.dynembed.table.tools.DevCertificates;

/** {@code bin/table-cli}: operator commands against running shards. */
@Command(name = "table-cli", mixinStandardHelpOptions = true,
    description = "Operate embedding tables on running table-server shards.",
    subcommands = {TableCli.Create.class, TableCli.Describe.class, TableCli.Stats.class,
        TableCli.Find.class, TableCli.Save.class, TableCli.Restore.class, TableCli.Drop.class, TableCli.Grow.class,
        TableCli.Evict.class, TableCli.Export.class, TableCli.Import.class, TableCli.Ingest.class, TableCli.Sample.class,
        TableCli.Index.class, TableCli.Cluster.class, TableCli.DevCerts.class,
        TableCli.Reshard.class, TableCli.SlotMapShow.class})
public final class TableCli {
  static class Common {
    @Option(names = "--endpoints", required = true,
        description = "host:port of every shard, in shard order, comma-separated; or a cluster"
            + " in etcd, etcd://host:port/CLUSTER (or redis://, redis-cluster://)")
    String endpoints;

    @CommandLine.Mixin ConnectionOptions connection = new ConnectionOptions();

    TableClient connect() {
      return TableClients.open(endpoints,
          connection.apply(dev.dynembed.table.client.ClientOptions.builder()).build());
    }
  }

  abstract static class Base implements Callable<Integer> {
    @CommandLine.Mixin Common common;

    abstract void run(TableClient c) throws Exception;

    @Override
    public Integer call() throws Exception {
      try (TableClient c = common.connect()) {
        run(c);
        return 0;
      } catch (TableException | IllegalArgumentException | java.io.UncheckedIOException
          | dev.dynembed.table.cluster.ClusterException e) {
        System.err.println("table-cli: " + e.getMessage());
        return 1;
      }
    }
  }

  static String json(com.google.protobuf.MessageOrBuilder m) throws Exception {
    return JsonFormat.printer().print(m);
  }

  @Command(name = "create", description = "Create a table on every shard (idempotent).")
  static final class Create extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--dim", required = true, description = "values per row, 1..4096") int dim;
    @Option(names = "--optimizer", defaultValue = "sgd",
        description = "sgd, momentum, adagrad, adam, ftrl, or a row-update rule on the shards'"
            + " class path: moving_average, surprise_decay, a user's (default ${DEFAULT-VALUE})")
    String optimizer;
    @Option(names = "--rule-param", paramLabel = "NAME=VALUE", description = "a parameter of"
        + " the --optimizer rule (repeatable; a rule fills the ones left out)")
    java.util.Map<String, Double> ruleParams = new java.util.LinkedHashMap<>();
    @Option(names = "--lr", defaultValue = "0", description = "learning rate (0 = default 0.01)")
    float lr;
    @Option(names = "--init", defaultValue = "uniform",
        description = "zeros, uniform, normal (default ${DEFAULT-VALUE})")
    String init;
    @Option(names = "--init-scale", defaultValue = "0.05",
        description = "uniform: [-s, s]; normal: stddev s (default ${DEFAULT-VALUE})")
    float scale;
    @Option(names = "--seed", defaultValue = "0", description = "seed of the row initializer"
        + " (default ${DEFAULT-VALUE})") long seed;
    @Option(names = "--min-count", defaultValue = "0", description = "a key gets its row once"
        + " counted this many times (0 or 1: at first sight)") int minCount;
    @Option(names = "--admission-sketch-kib", defaultValue = "0", description = "count keys"
        + " awaiting admission in a count-min sketch of this many KiB per shard (0: exact)")
    int sketchKib;
    @Option(names = "--max-keys", defaultValue = "0", description = "soft cap on the table's"
        + " rows, kept by every shard for its share (0: none)") long maxKeys;
    @Option(names = "--max-bytes", defaultValue = "0", description = "soft cap on the table's"
        + " memory in bytes, kept by every shard for its share (0: none)") long maxBytes;
    @Option(names = "--eviction-policy", defaultValue = "LFU", description = "victims past a"
        + " cap: LFU or LRU (default ${DEFAULT-VALUE})")
    dev.dynembed.table.v1.EvictionPolicy evictionPolicy;
    @Option(names = "--admission-pressure", paramLabel = "FROM:MAX_COUNT", description = "the"
        + " count a key needs for a row rises from max(min-count, 1) at this fraction of the"
        + " memory (shard budget, or the table's max-bytes share) to MAX_COUNT when full, e.g."
        + " 0.8:64; needs --admission-sketch-kib") String pressure;
    @Option(names = "--cooccurrence", paramLabel = "PARTNERS:ANCHORS:SKETCH_KIB", description =
        "keep co-occurrence counts of the key pairs trainers report: per shard, up to ANCHORS"
        + " anchor keys with their PARTNERS most frequent partners, the partners' counts in a"
        + " sketch of SKETCH_KIB KiB (e.g. 64:200000:4096); draws of partners by PPMI or count")
    String cooccurrence;

    @Override
    void run(TableClient c) throws Exception {
      if (minCount < 0 || sketchKib < 0 || maxKeys < 0 || maxBytes < 0) {
        throw new IllegalArgumentException("--min-count, --admission-sketch-kib, --max-keys and"
            + " --max-bytes must be >= 0");
      }
      OptimizerConfig opt = switch (optimizer.toLowerCase(Locale.ROOT)) {
        case "sgd" -> TableConfigs.sgd(lr);
        case "momentum" -> TableConfigs.momentum(lr, 0f);
        case "adagrad" -> TableConfigs.adagrad(lr, 0f, 0f);
        case "adam" -> TableConfigs.adam(lr, 0f, 0f, 0f);
        case "ftrl" -> TableConfigs.ftrl(lr, 0f, 0f, 0f, 0f);
        default -> TableConfigs.rule(optimizer, lr, ruleParams); // the shards check the name
      };
      if (!ruleParams.isEmpty() && opt.getKind() != dev.dynembed.table.v1.OptimizerKind.RULE) {
        throw new IllegalArgumentException("--rule-param is for a row-update rule, not the"
            + " built-in optimizer " + optimizer);
      }
      InitializerConfig ini = switch (init.toLowerCase(Locale.ROOT)) {
        case "zeros" -> TableConfigs.zeros();
        case "uniform" -> TableConfigs.uniform(-scale, scale, seed);
        case "normal" -> TableConfigs.normal(0f, scale, seed);
        default -> throw new IllegalArgumentException(
            "--init must be one of zeros, uniform, normal but was '" + init + "'");
      };
      var b = TableConfigs.builder(table, dim).setOptimizer(opt)
          .setInitializer(ini).setMinCount(minCount).setAdmissionSketchKib(sketchKib)
          .setMaxKeys(maxKeys).setMaxBytes(maxBytes).setEvictionPolicy(evictionPolicy);
      if (pressure != null) {
        b.setAdmissionPressure(admissionPressure(pressure));
      }
      if (cooccurrence != null) {
        b.setCooccurrence(cooccurrence(cooccurrence));
      }
      EmbeddingTable t = c.createTable(b.build());
      System.out.println(json(t.describe()));
    }
  }

  /** {@code FROM:MAX_COUNT} of --admission-pressure; the shards check the ranges. */
  public static dev.dynembed.table.v1.AdmissionPressure admissionPressure(String s) {
    String[] p = s.split(":", -1);
    try {
      if (p.length == 2) {
        return dev.dynembed.table.v1.AdmissionPressure.newBuilder()
            .setFrom(Float.parseFloat(p[0])).setMaxCount(Integer.parseInt(p[1])).build();
      }
    } catch (NumberFormatException e) {
      // refused below
    }
    throw new IllegalArgumentException("--admission-pressure must be FROM:MAX_COUNT (e.g."
        + " 0.8:64) but was '" + s + "'");
  }

  /** {@code PARTNERS:ANCHORS:SKETCH_KIB} of --cooccurrence; the shards check the ranges. */
  public static dev.dynembed.table.v1.Cooccurrence cooccurrence(String s) {
    String[] p = s.split(":", -1);
    try {
      if (p.length == 3) {
        return dev.dynembed.table.v1.Cooccurrence.newBuilder()
            .setPartnersPerKey(Integer.parseInt(p[0])).setMaxAnchors(Integer.parseInt(p[1]))
            .setSketchKib(Integer.parseInt(p[2])).build();
      }
    } catch (NumberFormatException e) {
      // refused below
    }
    throw new IllegalArgumentException("--cooccurrence must be PARTNERS:ANCHORS:SKETCH_KIB (e.g."
        + " 64:200000:4096) but was '" + s + "'");
  }

  @Command(name = "describe", description = "Config and counters of a table, summed over shards.")
  static final class Describe extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;

    @Override
    void run(TableClient c) throws Exception {
      TableInfo info = c.openTable(table).describe();
      System.out.println(json(info));
      long keys = info.getCounters().getKeys();
      if (keys > 0) {
        System.out.printf("bytes per key: %.1f (raw floats %.1f)%n",
            (double) info.getCounters().getBytesUsed() / keys,
            (double) info.getCounters().getBytesRaw() / keys);
      }
    }
  }

  @Command(name = "stats", description = "Every table of every shard.")
  static final class Stats extends Base {
    @Override
    void run(TableClient c) throws Exception {
      for (StatsResponse s : c.stats()) {
        System.out.println(json(s));
      }
    }
  }

  @Command(name = "find", description = "Print the rows of keys (no row is created).")
  static final class Find extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Parameters(arity = "1..*", paramLabel = "KEY", description = "the keys whose rows to print"
        + " (a key the table does not hold prints as not found)") List<String> keys;

    @Override
    void run(TableClient c) {
      EmbeddingTable t = c.openTable(table);
      FindResult r = t.find(keys.toArray(new String[0]));
      int dim = t.dim();
      for (int i = 0; i < keys.size(); i++) {
        if (!r.found()[i]) {
          System.out.printf("%s\tNOT FOUND%n", keys.get(i));
          continue;
        }
        StringBuilder sb = new StringBuilder(keys.get(i)).append('\t');
        for (int j = 0; j < dim; j++) {
          sb.append(j == 0 ? "" : " ").append(r.rows()[i * dim + j]);
        }
        System.out.println(sb);
      }
    }
  }

  @Command(name = "save", description = "Checkpoint a table (every shard) with a manifest.")
  static final class Save extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--dir", required = true, description = "directory visible to every shard")
    Path dir;
    @Option(names = "--step", defaultValue = "0", description = "training step the checkpoint"
        + " records (default ${DEFAULT-VALUE})") long step;

    @Override
    void run(TableClient c) throws Exception {
      System.out.println(json(c.openTable(table).save(dir, step)));
    }
  }

  @Command(name = "restore", description = "Restore a table from a checkpoint (any shard count).")
  static final class Restore extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--dir", required = true, description = "the checkpoint's directory, as"
        + " the shards see it") Path dir;

    @Override
    void run(TableClient c) {
      EmbeddingTable t;
      try {
        t = c.openTable(table);
      } catch (TableException.TableNotFoundException e) {
        // restore creates the table from the checkpoint's own config
        t = c.createTable(readConfig(dir, table));
      }
      System.out.printf("restored %d keys of table '%s' from %s%n", t.restore(dir), table, dir);
    }

    private static dev.dynembed.table.v1.TableConfig readConfig(Path dir, String table) {
      return dev.dynembed.table.common.CheckpointFormat.readManifest(dir, table).getConfig();
    }
  }

  @Command(name = "index", description = "Build (or rebuild) a table's approximate top-k index"
      + " on every shard (HNSW, docs/design/0016-approximate-top-k.md) and print each shard's"
      + " index; --status only prints them.")
  static final class Index extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--metric", defaultValue = "COSINE", description = "what the index serves:"
        + " COSINE or DOT (default ${DEFAULT-VALUE})") dev.dynembed.table.v1.Metric metric;
    @Option(names = "--bias-last-dim", description = "the [c, 1] option: queries of dim - 1"
        + " columns scored as [query, 1] . row") boolean bias;
    @Option(names = "--max-conn", defaultValue = "16", description = "graph neighbours per row"
        + " (default ${DEFAULT-VALUE})") int maxConn;
    @Option(names = "--beam-width", defaultValue = "100", description = "candidates explored per"
        + " insertion (default ${DEFAULT-VALUE})") int beamWidth;
    @Option(names = "--no-wait", description = "return once the builds have started") boolean
        noWait;
    @Option(names = "--status", description = "print the shards' indexes, build nothing")
    boolean status;

    @Override
    void run(TableClient c) throws Exception {
      EmbeddingTable t = c.openTable(table);
      java.util.List<dev.dynembed.table.v1.IndexInfo> infos = status ? t.indexInfo()
          : t.buildIndex(metric, bias, maxConn, beamWidth, !noWait);
      JsonFormat.Printer p = JsonFormat.printer().omittingInsignificantWhitespace();
      for (int i = 0; i < infos.size(); i++) {
        System.out.println("shard " + i + ": " + p.print(infos.get(i)));
      }
    }
  }

  @Command(name = "reshard", description = "Move slots between running shards while clients"
      + " read and write (docs/design/0021-slot-moves-proposal.md): spread them evenly over the"
      + " first --shards shards. With host:port endpoints, a new shard is started with"
      + " --num-shards set to the endpoint count and named last; with a cluster in etcd"
      + " (etcd://h:p/NAME), it is started with --cluster, --shard-index N and --num-shards N+1,"
      + " and its clients open it when it gets slots. To retire the last shards, give fewer."
      + " Safe to interrupt: running it again finishes an interrupted step.")
  static final class Reshard extends Base {
    @Option(names = "--shards", required = true,
        description = "shards to spread the slots over (shards 0..N-1)")
    int shards;

    @Override
    void run(TableClient c) {
      dev.dynembed.table.client.Resharding.Result r = dev.dynembed.table.client.Resharding
          .rebalance(c, shards, m -> System.out.println(m));
      System.out.printf("slot map epoch %d: %d rows moved in %d steps, longest cutover pause"
          + " %.1f ms%n", r.map().epoch(), r.rowsMoved(), r.steps(), r.longestPauseMillis());
    }
  }

  @Command(name = "slot-map", description = "Each shard's slot map: epoch, slots, and how many"
      + " slots each shard owns.")
  static final class SlotMapShow extends Base {
    @Override
    void run(TableClient c) {
      if (!(c instanceof dev.dynembed.table.client.spi.ShardedTableClient sc)) {
        throw new IllegalArgumentException("slot maps are kept by table-server shards");
      }
      for (int i = 0; i < sc.shards().size(); i++) {
        dev.dynembed.table.v1.SlotMap p = dev.dynembed.table.client.spi.Shard.await(
            sc.shards().get(i).slotMap());
        dev.dynembed.table.common.SlotMap m = dev.dynembed.table.common.SlotMap.fromProto(p);
        StringBuilder owners = new StringBuilder();
        for (int s = 0; s < m.numShards(); s++) {
          owners.append(s == 0 ? "" : ", ").append(s).append(": ").append(m.slotsOf(s));
        }
        System.out.printf("shard %d: epoch %d, %d slots over %d shards (%s)%n", i, m.epoch(),
            m.slots(), m.numShards(), owners);
      }
    }
  }

  @Command(name = "grow", description = "Widen every row of a table to a larger dim on every"
      + " shard: old columns kept, new ones from the table's initializer (or zeros), optimizer"
      + " slots widened alike (logged; run again to finish an interrupted grow). Trainers reading"
      + " the old width are refused afterwards: restart them at the new dim.")
  static final class Grow extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--dim", required = true, description = "the new dim (at least the"
        + " table's, at most 4096)") int dim;
    @Option(names = "--new-columns", defaultValue = "initializer", description = "how the"
        + " held rows' new columns start: initializer (as a fresh row of the key would hold"
        + " them) or zeros (every row's values, norms and cosines as before the grow); new"
        + " keys always start from the initializer (default: ${DEFAULT-VALUE})")
    String newColumns;

    @Override
    void run(TableClient c) throws Exception {
      dev.dynembed.table.v1.GrowTableRequest.Builder req = dev.dynembed.table.v1.GrowTableRequest
          .newBuilder().setTable(table).setDim(dim);
      switch (newColumns) {
        case "initializer" -> { }
        case "zeros" -> req.setNewColumns(dev.dynembed.table.common.TableConfigs.zeros());
        default -> throw new IllegalArgumentException(
            "--new-columns must be initializer or zeros but was '" + newColumns + "'");
      }
      System.out.println(json(c.growTable(req.build()).describe()));
    }
  }

  @Command(name = "drop", description = "Drop a table on every shard.")
  static final class Drop extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;

    @Override
    void run(TableClient c) {
      c.dropTable(table);
      System.out.println("dropped table '" + table + "'");
    }
  }

  @Command(name = "evict", description = "Evict rows of a table on every shard: by TTL in steps,"
      + " by a cap with LFU or LRU victims, or the listed keys (docs/design/0012).")
  static final class Evict extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--ttl-steps", defaultValue = "0", description = "rows not updated within"
        + " this many steps go (0: no TTL)") long ttlSteps;
    @Option(names = "--now-step", defaultValue = "0", description = "the step TTLs count from"
        + " (0: each shard's last update step)") long nowStep;
    @Option(names = "--max-keys", defaultValue = "0", description = "then keep at most this many"
        + " rows in all (each shard ceil(N / shards); 0: no cap)") long maxKeys;
    @Option(names = "--policy", defaultValue = "LFU", description = "victims past the cap:"
        + " LFU or LRU") dev.dynembed.table.v1.EvictionPolicy policy;
    @Option(names = "--keys", split = ",", description = "evict exactly these keys instead")
    List<String> keys;

    @Override
    void run(TableClient c) {
      EmbeddingTable t = c.openTable(table);
      long n = keys != null ? t.remove(keys.toArray(new String[0]))
          : t.evict(ttlSteps, nowStep, maxKeys, policy);
      System.out.printf("evicted %d rows of table '%s'; %d left%n", n, table,
          t.describe().getCounters().getKeys());
    }
  }

  @Command(name = "import", description = "Set rows of a table from vectors trained elsewhere"
      + " (word2vec text or binary, GloVe, fastText .vec): the file is checked whole first, so a"
      + " bad file changes nothing; then its rows are assigned in batches over the shards. Keys"
      + " get rows whatever the table's admission; their optimizer slots start afresh.")
  static final class Import extends Base {
    @Option(names = "--table", required = true, description = "the table's name (its dim must"
        + " be the file's)")
    String table;
    @Option(names = "--format", required = true, description = "word2vec-text, word2vec-binary,"
        + " glove or fasttext (a .vec file)")
    String format;
    @CommandLine.Parameters(index = "0", paramLabel = "FILE", description = "the vectors")
    Path file;
    @Option(names = "--frequency", defaultValue = "-1", description = "set every imported key's"
        + " frequency to this (sampling and subsampling weigh keys by it); default: counts stay"
        + " as they are (0 for a new key) and training counts them")
    long frequency;
    @Option(names = "--step", defaultValue = "0", description = "the last-update step recorded"
        + " for the imported keys (TTL eviction reads it)")
    long step;
    @Option(names = "--batch", defaultValue = "4096", description = "rows per assign call")
    int batch;
    @Option(names = "--check-only", description = "check the file against the table and stop")
    boolean checkOnly;

    @Override
    void run(TableClient c) {
      EmbeddingTable t = c.openTable(table);
      VectorImport.Format f = VectorImport.Format.parse(format);
      if (checkOnly) {
        long rows = VectorImport.check(file, f, t.dim(), t.config().getMaxKeyBytes());
        System.out.printf("%s: %,d rows of dim %d, no errors%n", file, rows, t.dim());
        return;
      }
      VectorImport.Result r = VectorImport.run(t, file, f,
          new VectorImport.Options(step, frequency, batch));
      System.out.printf("imported %,d rows of dim %d into table '%s' in %.1f s (check %.1f s,"
          + " import %.1f s; %,.0f rows/s)%n", r.rows(), r.dim(), table,
          (r.checkNanos() + r.importNanos()) / 1e9, r.checkNanos() / 1e9, r.importNanos() / 1e9,
          r.rowsPerSecond());
    }
  }

  @Command(name = "export", description = "Write every row of a table (a live scan over the"
      + " shards) in word2vec's text format: a 'keys dim' line, then 'key v1 .. vdim' per key.")
  static final class Export extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--out", required = true, description = "output file") Path out;
    @Option(names = "--page", defaultValue = "4096", description = "keys per scan page") int page;

    @Override
    void run(TableClient c) {
      EmbeddingTable t = c.openTable(table);
      Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
      long[] n = {0};
      long[] skipped = {0};
      try (java.io.Writer w = java.nio.file.Files.newBufferedWriter(tmp,
          java.nio.charset.StandardCharsets.UTF_8)) {
        java.io.IOException[] failed = {null};
        t.scan(page, p -> {
          StringBuilder b = new StringBuilder();
          for (int i = 0; i < p.keys().length; i++) {
            if (p.keys()[i].chars().anyMatch(Character::isWhitespace)) {
              skipped[0]++; // the text format cannot hold it
              continue;
            }
            b.setLength(0);
            b.append(p.keys()[i]);
            for (int j = 0; j < t.dim(); j++) {
              b.append(' ').append(p.rows()[i * t.dim() + j]);
            }
            b.append('\n');
            try {
              w.write(b.toString());
            } catch (java.io.IOException e) {
              failed[0] = e;
            }
            n[0]++;
          }
        });
        if (failed[0] != null) {
          throw failed[0];
        }
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException("writing " + tmp, e);
      }
      try (java.io.OutputStream o = java.nio.file.Files.newOutputStream(out)) {
        // the header holds the count, known only at the end
        o.write((n[0] + " " + t.dim() + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        java.nio.file.Files.copy(tmp, o);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException("writing " + out, e);
      }
      try {
        java.nio.file.Files.delete(tmp);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException("deleting " + tmp, e);
      }
      if (skipped[0] > 0) {
        System.out.printf("skipped %,d keys with whitespace (word2vec's text format cannot hold"
            + " them)%n", skipped[0]);
      }
      System.out.printf("exported %,d rows of table '%s' to %s%n", n[0], table, out);
    }
  }

  @Command(name = "cluster", description = "The shard map of a cluster in etcd: every shard's"
      + " endpoint, data-plane port, member, process and lease (docs/design/0019-cluster-map.md).")
  static final class Cluster implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "URI", description = "etcd://host:port[,...]/CLUSTER")
    String uri;

    @Option(names = "--forget-group", paramLabel = "INDEX", description = "delete the record of"
        + " a replicated shard's group that has lost its last primary and every follower in sync"
        + " (with their disks): its other processes then elect the one with the longest log,"
        + " accepting that answered writes may be missing; refused while it has a primary")
    Integer forgetGroup;

    @Override
    public Integer call() {
      try {
        var address = dev.dynembed.table.cluster.ClusterAddress.parse(uri);
        if (forgetGroup != null) {
          boolean deleted = dev.dynembed.table.cluster.ClusterStatus.forgetGroup(address,
              forgetGroup);
          System.out.printf("shard %d: %s%n", forgetGroup, deleted ? "group record deleted;"
              + " its processes elect a primary by log length" : "no group record");
        }
        System.out.print(dev.dynembed.table.cluster.ClusterStatus.read(address).format());
        return 0;
      } catch (IllegalArgumentException | dev.dynembed.table.cluster.ClusterException e) {
        System.err.println("table-cli: " + e.getMessage());
        return 1;
      }
    }
  }

  @Command(name = "dev-certs", description = "Make a throw-away CA with a shard certificate"
      + " (127.0.0.1, localhost) and client certificates, to try TLS on one machine. Not for"
      + " production: the keys are unencrypted.")
  static final class DevCerts implements Callable<Integer> {
    @Option(names = "--dir", required = true, description = "where the PEM files go") Path dir;
    @Option(names = "--clients", split = ",", defaultValue = "trainer,admin",
        description = "client certificate CNs (default ${DEFAULT-VALUE})") List<String> clients;

    @Override
    public Integer call() throws Exception {
      DevCertificates ca = new DevCertificates(dir);
      DevCertificates.Identity shard = ca.issue("shard", true);
      System.out.printf("CA         %s%nshard      %s  %s%n", ca.caPem, shard.chain(), shard.key());
      for (String cn : clients) {
        DevCertificates.Identity c = ca.issue(cn, false);
        System.out.printf("client %-4s %s  %s%n", cn.length() > 4 ? cn.substring(0, 4) : cn,
            c.chain(), c.key());
      }
      System.out.printf("%nbin/table-server ... --tls-cert %s --tls-key %s --tls-client-ca %s"
          + " --admin-clients admin%nbin/table-cli ... --tls-ca %s --tls-cert %s/admin.pem"
          + " --tls-key %s/admin.key%n", shard.chain(), shard.key(), ca.caPem, ca.caPem, dir, dir);
      return 0;
    }
  }

  @Command(name = "ingest", description = "Stream the whitespace-separated tokens of text files"
      + " through findOrInsert (rows created, frequencies counted). Files of any size, one line"
      + " or many; never loaded whole.")
  static final class Ingest extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--batch", defaultValue = "4096", description = "tokens per findOrInsert"
        + " call (default ${DEFAULT-VALUE})") int batch;
    @Parameters(arity = "1..*", paramLabel = "FILE", description = "text files (UTF-8), read in"
        + " the order given") List<Path> files;

    @Override
    void run(TableClient c) throws Exception {
      EmbeddingTable t = c.openTable(table);
      long tokens = 0;
      long start = System.nanoTime();
      java.util.ArrayList<String> buf = new java.util.ArrayList<>(batch);
      for (Path f : files) {
        if (!java.nio.file.Files.isReadable(f)) {
          throw new IllegalArgumentException("cannot read " + f);
        }
        try (java.io.Reader r = new java.io.BufferedReader(new java.io.InputStreamReader(
            java.nio.file.Files.newInputStream(f), java.nio.charset.StandardCharsets.UTF_8),
            1 << 16)) {
          StringBuilder word = new StringBuilder();
          int ch;
          while ((ch = r.read()) >= 0) {
            if (Character.isWhitespace(ch)) {
              if (word.length() > 0) {
                buf.add(word.toString());
                word.setLength(0);
                if (buf.size() == batch) {
                  t.findOrInsert(buf.toArray(new String[0]));
                  tokens += buf.size();
                  buf.clear();
                }
              }
            } else {
              word.append((char) ch);
            }
          }
          if (word.length() > 0) {
            buf.add(word.toString());
          }
        }
      }
      if (!buf.isEmpty()) {
        t.findOrInsert(buf.toArray(new String[0]));
        tokens += buf.size();
      }
      double secs = (System.nanoTime() - start) / 1e9;
      System.out.printf("ingested %,d tokens into table '%s' in %.1f s (%,.0f tokens/s);"
          + " the table now holds %,d keys%n", tokens, table, secs, tokens / secs,
          t.describe().getCounters().getKeys());
    }
  }

  @Command(name = "sample", description = "Draw candidates with a table's sampler and print the"
      + " most drawn keys with their probabilities.")
  static final class Sample extends Base {
    @Option(names = "--table", required = true, description = "the table's name")
    String table;
    @Option(names = "--sampler", defaultValue = "unigram",
        description = "uniform, log-uniform, unigram (default ${DEFAULT-VALUE})")
    String sampler;
    @Option(names = "--alpha", defaultValue = "0.75", description = "exponent of the unigram"
        + " sampler (default ${DEFAULT-VALUE})") float alpha;
    @Option(names = "-n", defaultValue = "100000", description = "draws") int n;
    @Option(names = "--top", defaultValue = "10", description = "most drawn keys to print"
        + " (default ${DEFAULT-VALUE})") int top;
    @Option(names = "--seed", defaultValue = "1", description = "seed of the draws (default"
        + " ${DEFAULT-VALUE})") long seed;

    @Override
    void run(TableClient c) {
      dev.dynembed.table.v1.SamplerKind kind = switch (sampler.toLowerCase(Locale.ROOT)) {
        case "uniform" -> dev.dynembed.table.v1.SamplerKind.UNIFORM_SAMPLER;
        case "log-uniform" -> dev.dynembed.table.v1.SamplerKind.LOG_UNIFORM_SAMPLER;
        case "unigram" -> dev.dynembed.table.v1.SamplerKind.UNIGRAM_SAMPLER;
        default -> throw new IllegalArgumentException("--sampler must be uniform, log-uniform or"
            + " unigram but was '" + sampler + "'");
      };
      dev.dynembed.table.client.SampleResult r =
          c.openTable(table).sample(new String[0], n, kind, alpha, seed);
      java.util.Map<String, Integer> counts = new java.util.HashMap<>();
      java.util.Map<String, Double> prob = new java.util.HashMap<>();
      for (int i = 0; i < r.keys().length; i++) {
        counts.merge(r.keys()[i], 1, Integer::sum);
        prob.put(r.keys()[i], r.probability()[i]);
      }
      System.out.printf("%-20s %10s %12s %12s%n", "key", "drawn", "drawn/n", "probability");
      counts.entrySet().stream()
          .sorted(java.util.Map.Entry.<String, Integer>comparingByValue().reversed())
          .limit(top)
          .forEach(e -> System.out.printf("%-20s %10d %12.5f %12.5f%n", e.getKey(), e.getValue(),
              (double) e.getValue() / n, prob.get(e.getKey())));
    }
  }

  public static void main(String[] args) {
    if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
      System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"); // jetcd's, jedis'
    }
    if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
      System.setProperty("java.util.logging.SimpleFormatter.format", "%4$s: %5$s%6$s%n");
    }
    System.exit(new CommandLine(new TableCli()).execute(args));
  }
}
