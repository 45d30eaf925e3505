package dev.dynembed.table.client.cli;

import com.google.protobuf.util.JsonFormat;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
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

/** {@code bin/table-cli}: operator commands against running shards. */
@Command(name = "table-cli", mixinStandardHelpOptions = true,
    description = "Operate embedding tables on running table-server shards.",
    subcommands = {TableCli.Create.class, TableCli.Describe.class, TableCli.Stats.class,
        TableCli.Find.class, TableCli.Save.class, TableCli.Restore.class, TableCli.Drop.class})
public final class TableCli {
  static class Common {
    @Option(names = "--endpoints", required = true,
        description = "host:port of every shard, in shard order, comma-separated")
    String endpoints;

    TableClient connect() {
      return TableClients.connect(TableClients.parseEndpoints(endpoints));
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
      } catch (TableException | IllegalArgumentException e) {
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
    @Option(names = "--table", required = true) String table;
    @Option(names = "--dim", required = true) int dim;
    @Option(names = "--optimizer", defaultValue = "sgd",
        description = "sgd, momentum, adagrad, adam, ftrl (default ${DEFAULT-VALUE})")
    String optimizer;
    @Option(names = "--lr", defaultValue = "0", description = "learning rate (0 = default 0.01)")
    float lr;
    @Option(names = "--init", defaultValue = "uniform",
        description = "zeros, uniform, normal (default ${DEFAULT-VALUE})")
    String init;
    @Option(names = "--init-scale", defaultValue = "0.05",
        description = "uniform: [-s, s]; normal: stddev s (default ${DEFAULT-VALUE})")
    float scale;
    @Option(names = "--seed", defaultValue = "0") long seed;

    @Override
    void run(TableClient c) throws Exception {
      OptimizerConfig opt = switch (optimizer.toLowerCase(Locale.ROOT)) {
        case "sgd" -> TableConfigs.sgd(lr);
        case "momentum" -> TableConfigs.momentum(lr, 0f);
        case "adagrad" -> TableConfigs.adagrad(lr, 0f, 0f);
        case "adam" -> TableConfigs.adam(lr, 0f, 0f, 0f);
        case "ftrl" -> TableConfigs.ftrl(lr, 0f, 0f, 0f, 0f);
        default -> throw new IllegalArgumentException("--optimizer must be one of sgd, momentum,"
            + " adagrad, adam, ftrl but was '" + optimizer + "'");
      };
      InitializerConfig ini = switch (init.toLowerCase(Locale.ROOT)) {
        case "zeros" -> TableConfigs.zeros();
        case "uniform" -> TableConfigs.uniform(-scale, scale, seed);
        case "normal" -> TableConfigs.normal(0f, scale, seed);
        default -> throw new IllegalArgumentException(
            "--init must be one of zeros, uniform, normal but was '" + init + "'");
      };
      EmbeddingTable t = c.createTable(TableConfigs.builder(table, dim).setOptimizer(opt)
          .setInitializer(ini).build());
      System.out.println(json(t.describe()));
    }
  }

  @Command(name = "describe", description = "Config and counters of a table, summed over shards.")
  static final class Describe extends Base {
    @Option(names = "--table", required = true) String table;

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
    @Option(names = "--table", required = true) String table;
    @Parameters(arity = "1..*", paramLabel = "KEY") List<String> keys;

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
    @Option(names = "--table", required = true) String table;
    @Option(names = "--dir", required = true, description = "directory visible to every shard")
    Path dir;
    @Option(names = "--step", defaultValue = "0") long step;

    @Override
    void run(TableClient c) throws Exception {
      System.out.println(json(c.openTable(table).save(dir, step)));
    }
  }

  @Command(name = "restore", description = "Restore a table from a checkpoint (any shard count).")
  static final class Restore extends Base {
    @Option(names = "--table", required = true) String table;
    @Option(names = "--dir", required = true) Path dir;

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
      try {
        dev.dynembed.table.v1.CheckpointManifest.Builder b =
            dev.dynembed.table.v1.CheckpointManifest.newBuilder();
        JsonFormat.parser().merge(java.nio.file.Files.readString(
            dir.resolve(table + ".manifest.json")), b);
        return b.getConfig();
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException("cannot read the manifest of table '" + table
            + "' in " + dir + ": " + e.getMessage());
      }
    }
  }

  @Command(name = "drop", description = "Drop a table on every shard.")
  static final class Drop extends Base {
    @Option(names = "--table", required = true) String table;

    @Override
    void run(TableClient c) {
      c.dropTable(table);
      System.out.println("dropped table '" + table + "'");
    }
  }

  public static void main(String[] args) {
    System.exit(new CommandLine(new TableCli()).execute(args));
  }
}
