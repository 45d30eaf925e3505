package dev.dynembed.table.tools.cli;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.io.IOException;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * Where a command's tables live, with one meaning per option name across the CLIs
 * ({@code bin/word2vec}, {@code bin/bownet}; {@code bin/table-cli} has {@code --endpoints} too):
 * {@code --endpoints} names a running table service (shards, or Redis), {@code --shards N} starts
 * N shard processes on this machine for the run, neither keeps the tables in process. A picocli
 * mixin, as {@link ConnectionOptions} is for credentials and transport.
 */
public final class TableServiceOptions {
  @Option(names = "--endpoints", description = "running table service: shards at"
      + " host:port,host:port,... (in shard order), or tables in Redis at redis://host:port or"
      + " redis-cluster://host:port,... (the optimizer then runs here)")
  String endpoints;

  @Option(names = "--shards", defaultValue = "0", description = "start N shard processes on"
      + " this machine for the run (default 0: none)")
  int shards;

  @Option(names = "--shard-heap", description = "heap of each shard started by --shards"
      + " (default ${DEFAULT-VALUE})")
  String shardHeap;

  /** Options whose started shards get {@code defaultHeap} unless --shard-heap says otherwise. */
  public TableServiceOptions(String defaultHeap) {
    this.shardHeap = defaultHeap;
  }

  /** The running service named by --endpoints, or null. */
  public String endpoints() {
    return endpoints;
  }

  /** Shard processes to start here (0: none). */
  public int shards() {
    return shards;
  }

  /** Whether the tables live outside this process (--endpoints or --shards). */
  public boolean remote() {
    return endpoints != null || shards > 0;
  }

  /** Whether --endpoints names Redis (redis:// or redis-cluster://). */
  public boolean redis() {
    return endpoints != null && endpoints.contains("://");
  }

  /** Refuses contradictory or out-of-range values, naming the option. */
  public void check() {
    if (endpoints != null && shards > 0) {
      throw new IllegalArgumentException("--endpoints (a running service) and --shards N"
          + " (started here) exclude each other");
    }
    if (shards < 0 || shards > 64) {
      throw new IllegalArgumentException("--shards must be in [0, 64] but was " + shards);
    }
    if (endpoints != null && endpoints.isBlank()) {
      throw new IllegalArgumentException("--endpoints is empty");
    }
  }

  /**
   * Starts the --shards processes with their data under {@code dataDir} (null without
   * --shards); {@code extraArgs} go to every table-server.
   */
  public LocalShardProcesses start(Path dataDir, String extraArgs) throws IOException {
    check();
    return shards == 0 ? null
        : new LocalShardProcesses(shards, 0, dataDir, shardHeap, extraArgs);
  }

  /**
   * A client of the tables: the started processes, else --endpoints, else null (the caller's
   * in-process default).
   */
  public TableClient open(LocalShardProcesses started, ClientOptions options) {
    if (started != null) {
      return TableClients.connect(started.endpoints(), options);
    }
    return endpoints == null ? null : TableClients.open(endpoints, options);
  }
}
