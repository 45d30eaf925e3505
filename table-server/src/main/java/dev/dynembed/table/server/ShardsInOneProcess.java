package dev.dynembed.table.server;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import picocli.CommandLine;

/**
 * Several shards of one deployment in one JVM: {@code ShardsInOneProcess --shard-indexes 0,1
 * --ports P0,P1 [table-server options]} runs one {@link TableServerMain} per index, each with its
 * own ports, engine, state directory and write-ahead log, so that clients cannot tell them from
 * shards in processes of their own. What they share is the JVM: one JIT compiling the same code
 * once, one heap and its collector (on 2 cores a second shard process cost a 3-epoch word2vec run
 * on Brown 12 s of CPU more than one shard did; docs/benchmarks.md). What they lose is isolation:
 * a crash of the process is a crash of all of them (each recovers from its own log).
 * {@code LocalShardProcesses.inOneProcess} starts it ({@code bin/word2vec --shards N
 * --shards-in-one-process}). The process ends when any of its shards does, with that shard's
 * exit code.
 */
public final class ShardsInOneProcess {
  private ShardsInOneProcess() {}

  public static void main(String[] args) {
    TableServerMain.configureLogging();
    System.exit(run(args));
  }

  /** Starts the shards and returns the exit code of the first that ends. */
  static int run(String[] args) {
    List<Integer> indexes = null;
    List<Integer> ports = null;
    List<String> common = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      String name = a.contains("=") ? a.substring(0, a.indexOf('=')) : a;
      switch (name) {
        case "--shard-indexes", "--ports" -> {
          String v = a.contains("=") ? a.substring(a.indexOf('=') + 1)
              : i + 1 < args.length ? args[++i] : null;
          List<Integer> list = ints(name, v);
          if (list == null) {
            return 2;
          }
          if (name.equals("--ports")) {
            ports = list;
          } else {
            indexes = list;
          }
        }
        case "--shard-index", "--port", "--metrics-port", "--cluster", "--replication" -> {
          System.err.println("shards-in-one-process: " + name + " is not for several shards in"
              + " one process (--shard-indexes and --ports name each shard's; metrics and"
              + " clusters need a process per shard)");
          return 2;
        }
        default -> common.add(a);
      }
    }
    if (indexes == null || indexes.isEmpty()) {
      System.err.println("shards-in-one-process: --shard-indexes I,J,... is required");
      return 2;
    }
    if (ports == null) {
      ports = new ArrayList<>(java.util.Collections.nCopies(indexes.size(), 0));
    }
    if (ports.size() != indexes.size()) {
      System.err.printf("shards-in-one-process: --ports names %d ports for %d shards%n",
          ports.size(), indexes.size());
      return 2;
    }
    if (new java.util.HashSet<>(indexes).size() != indexes.size()) {
      System.err.println("shards-in-one-process: --shard-indexes names a shard twice: " + indexes);
      return 2;
    }
    CompletableFuture<Integer> firstEnd = new CompletableFuture<>();
    for (int s = 0; s < indexes.size(); s++) {
      List<String> argv = new ArrayList<>(common);
      argv.addAll(List.of("--shard-index", String.valueOf(indexes.get(s)),
          "--port", String.valueOf(ports.get(s))));
      Thread t = new Thread(() -> {
        int code;
        try {
          code = new CommandLine(new TableServerMain()).execute(argv.toArray(new String[0]));
        } catch (RuntimeException | Error e) {
          System.err.println("shards-in-one-process: shard " + argv + " failed: " + e);
          code = 1;
        }
        firstEnd.complete(code);
      }, "shard-main-" + indexes.get(s));
      t.start();
    }
    return firstEnd.join();
  }

  private static List<Integer> ints(String name, String v) {
    List<Integer> out = new ArrayList<>();
    try {
      for (String p : v.split(",")) {
        out.add(Integer.parseInt(p.trim()));
      }
    } catch (RuntimeException e) {
      System.err.println("shards-in-one-process: " + name + " takes integers separated by"
          + " commas; got '" + v + "'");
      return null;
    }
    return out;
  }
}
