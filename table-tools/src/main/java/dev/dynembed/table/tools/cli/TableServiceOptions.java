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
      + " host:port,host:port,... (in shard order), a cluster of shards in etcd at"
      + " etcd://host:port/CLUSTER (followed when shards move or fail over), or tables in Redis"
      + " at redis://host:port or redis-cluster://host:port,... (the optimizer then runs here)")
  String endpoints;

  @Option(names = "--shards", defaultValue = "0", description = "start N shard processes on"
      + " this machine for the run (default 0: none)")
  int shards;

  @Option(names = "--shard-heap", description = "heap of each shard started by --shards"
      + " (default ${DEFAULT-VALUE})")
  String shardHeap;

  @Option(names = "--shard-wal", defaultValue = "on", description = "write-ahead log of the"
      + " shards --shards starts: on (a shard that crashes is restarted and recovers every"
      + " answered write from it) or off (rows live in memory only, as in process; a crashed"
      + " shard is left down and the run fails: resume from the last checkpoint). Default"
      + " ${DEFAULT-VALUE}")
  String shardWal;

  @Option(names = "--shard-fsync", defaultValue = "everysec", description = "with --shard-wal"
      + " on: when the started shards force their log to the disk: always, everysec or no"
      + " (table-server --fsync; default ${DEFAULT-VALUE})")
  String shardFsync;

  @Option(names = "--shards-in-one-process", description = "with --shards N: run the N shards"
      + " in one process (each its own ports, log and state, one JVM: one JIT and one collector"
      + " instead of N; a crash takes all of them down, and all restart from their logs);"
      + " for machines with few cores")
  boolean shardsInOneProcess;

  @Option(names = "--shard-java-opts", defaultValue = "", description = "extra JVM options of"
      + " the shards --shards starts, space-separated, after the defaults (heap, collector), so a"
      + " repeated option overrides them; {shard} becomes the shard's index (e.g."
      + " \"-XX:StartFlightRecording=filename=shard-{shard}.jfr\")")
  String shardJavaOpts;

  @Option(names = "--redis-tier", description = "keep the tables' rows in Redis under the"
      + " shards too (redis_tier: written behind, a memory cap's victims live there only, a shard"
      + " that loses its disk serves them): redis://host:port or redis-cluster://host:port,..."
      + " given to the shards --shards starts; with --endpoints, the shards were started with it")
  String redisTier;

  @Option(names = "--replicas", defaultValue = "0", description = "with --shards N: each"
      + " shard gets this many followers that take over when its primary dies (processes of"
      + " their own, agreeing through an etcd started here; docs/design/0019-cluster-map.md;"
      + " default 0)")
  int replicas;

  @Option(names = "--replication", defaultValue = "sync", description = "with --replicas:"
      + " sync (a step is answered once a follower holds it: losing a primary with its disk"
      + " loses nothing) or async (default ${DEFAULT-VALUE})")
  String replication;

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
    return endpoints != null && endpoints.startsWith("redis");
  }

  /** The Redis under the shards (--redis-tier), or null. */
  public String redisTier() {
    return redisTier;
  }

  /** Refuses contradictory or out-of-range values, naming the option. */
  public void check() {
    if (redisTier != null && !remote()) {
      throw new IllegalArgumentException("--redis-tier puts Redis under table shards: it needs"
          + " --shards N or --endpoints (the in-process table has no Redis tier)");
    }
    if (redisTier != null && redis()) {
      throw new IllegalArgumentException("--redis-tier is for shards; --endpoints " + endpoints
          + " keeps the tables in Redis with the optimizer here (one or the other)");
    }
    if (redisTier != null && !redisTier.startsWith("redis://")
        && !redisTier.startsWith("redis-cluster://")) {
      throw new IllegalArgumentException("--redis-tier must be redis://host:port or"
          + " redis-cluster://host:port,... but was '" + redisTier + "'");
    }
    if (endpoints != null && shards > 0) {
      throw new IllegalArgumentException("--endpoints (a running service) and --shards N"
          + " (started here) exclude each other");
    }
    if (shards < 0 || shards > 64) {
      throw new IllegalArgumentException("--shards must be in [0, 64] but was " + shards);
    }
    if (replicas < 0 || replicas > 4) {
      throw new IllegalArgumentException("--replicas must be in [0, 4] but was " + replicas);
    }
    if (replicas > 0 && shards == 0) {
      throw new IllegalArgumentException("--replicas is for the shards --shards N starts (shards"
          + " started elsewhere were given --replication there)");
    }
    if (replicas > 0 && redisTier != null) {
      throw new IllegalArgumentException("--replicas and --redis-tier do not go together yet");
    }
    if (!shardWal.equals("on") && !shardWal.equals("off")) {
      throw new IllegalArgumentException("--shard-wal must be on or off but was '" + shardWal
          + "'");
    }
    if (!java.util.List.of("always", "everysec", "no").contains(shardFsync)) {
      throw new IllegalArgumentException("--shard-fsync must be always, everysec or no but was '"
          + shardFsync + "'");
    }
    if (shardsInOneProcess && (shards == 0 || replicas > 0)) {
      throw new IllegalArgumentException("--shards-in-one-process is for the shards --shards N"
          + " starts without --replicas (a replicated group needs a process per member)");
    }
    if (shardWal.equals("off") && replicas > 0) {
      throw new IllegalArgumentException("--replicas ship the write-ahead log to their"
          + " followers: they need --shard-wal on");
    }
    if (!replication.equals("sync") && !replication.equals("async")) {
      throw new IllegalArgumentException("--replication must be sync or async but was '"
          + replication + "'");
    }
    if (!shardJavaOpts.isBlank() && shards == 0) {
      throw new IllegalArgumentException("--shard-java-opts is for the shards --shards N starts");
    }
    for (String o : shardJavaOpts.trim().split("\\s+")) {
      if (!o.isEmpty() && !o.startsWith("-")) {
        throw new IllegalArgumentException("--shard-java-opts takes JVM options, each starting"
            + " with '-', but was '" + shardJavaOpts + "' (a main class or argument there would"
            + " replace the shard's own)");
      }
    }
    if (endpoints != null && endpoints.isBlank()) {
      throw new IllegalArgumentException("--endpoints is empty");
    }
  }

  /**
   * Starts the --shards processes with their data under {@code dataDir} (null without
   * --shards; with --redis-tier over that Redis); {@code extraArgs} are JVM options of every
   * table-server, before --shard-java-opts.
   */
  public LocalShardProcesses start(Path dataDir, String extraArgs) throws IOException {
    check();
    extraArgs = (extraArgs + " " + shardJavaOpts).trim();
    if (shards > 0 && replicas > 0) {
      return LocalShardProcesses.replicated(shards, replicas, replication, dataDir, shardHeap,
          extraArgs, java.util.List.of(), java.util.List.of("--fsync", shardFsync));
    }
    if (shards == 0) {
      return null;
    }
    java.util.List<String> serverArgs = new java.util.ArrayList<>(
        java.util.List.of("--wal", shardWal, "--fsync", shardFsync));
    if (redisTier != null) {
      serverArgs.addAll(java.util.List.of("--redis-tier", redisTier));
    }
    return shardsInOneProcess
        ? LocalShardProcesses.inOneProcess(shards, dataDir, shardHeap, extraArgs,
            java.util.List.of(), serverArgs)
        : new LocalShardProcesses(shards, 0, dataDir, shardHeap, extraArgs, java.util.List.of(),
            serverArgs);
  }

  /**
   * A client of the tables: the started processes, else --endpoints, else null (the caller's
   * in-process default).
   */
  public TableClient open(LocalShardProcesses started, ClientOptions options) {
    if (started != null) {
      return TableClients.open(started.spec(), options);
    }
    return endpoints == null ? null : TableClients.open(endpoints, options);
  }
}
