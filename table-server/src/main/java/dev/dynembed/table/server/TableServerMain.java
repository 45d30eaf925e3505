package dev.dynembed.table.server;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code bin/table-server}: runs one shard until interrupted. */
@Command(name = "table-server", mixinStandardHelpOptions = true,
    description = "Serves one shard of the embedding tables over gRPC.")
public final class TableServerMain implements Callable<Integer> {
  @Option(names = "--port", required = true, description = "TCP port (0 = any free port)")
  int port;

  @Option(names = "--host", defaultValue = "127.0.0.1", description = "address to bind (default ${DEFAULT-VALUE})")
  String host;

  @Option(names = "--shard-index", defaultValue = "0", description = "this shard, 0..num-shards-1")
  int shardIndex;

  @Option(names = "--num-shards", defaultValue = "1", description = "shards of the deployment")
  int numShards;

  @Option(names = "--data-dir", defaultValue = ".", description = "base of relative checkpoint directories")
  Path dataDir;

  @Option(names = "--threads", description = "request threads (default: 2 x cores)")
  Integer threads;

  @Option(names = "--exit-with", description = "exit when the process of this PID is gone (a"
      + " trainer that started this shard: the shard never outlives it, even a kill -9)")
  Long exitWith;

  @Override
  public Integer call() throws Exception {
    if (numShards < 1 || shardIndex < 0 || shardIndex >= numShards) {
      System.err.printf("table-server: --shard-index must be in [0, %d) and --num-shards >= 1;"
          + " got --shard-index %d --num-shards %d%n", Math.max(numShards, 1), shardIndex, numShards);
      return 2;
    }
    if (port < 0 || port > 65535) {
      System.err.printf("table-server: --port must be in [0, 65535]; got %d%n", port);
      return 2;
    }
    Files.createDirectories(dataDir);
    int n = threads != null ? threads : 2 * Runtime.getRuntime().availableProcessors();
    TableServer server = new TableServer(new ShardEngine(shardIndex, numShards, dataDir), host, port, n);
    Runtime.getRuntime().addShutdownHook(new Thread(server::close));
    if (exitWith != null) {
      watchParent(exitWith);
    }
    System.out.printf("table-server shard %d of %d listening on %s:%d (data dir %s)%n",
        shardIndex, numShards, host, server.port(), dataDir.toAbsolutePath());
    System.out.flush();
    server.awaitTermination();
    return 0;
  }

  /** Exits (running the shutdown hooks) once the process {@code pid} has ended. */
  private static void watchParent(long pid) {
    java.util.Optional<ProcessHandle> parent = ProcessHandle.of(pid);
    Thread t = new Thread(() -> {
      while (parent.map(ProcessHandle::isAlive).orElse(false)) {
        try {
          Thread.sleep(500);
        } catch (InterruptedException e) {
          return;
        }
      }
      System.err.printf("table-server: process %d is gone; exiting%n", pid);
      System.exit(0);
    }, "exit-with-" + pid);
    t.setDaemon(true);
    t.start();
  }

  public static void main(String[] args) {
    System.exit(new CommandLine(new TableServerMain()).execute(args));
  }
}
