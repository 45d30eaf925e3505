package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bin/table-server}: runs one shard until interrupted. The options are checked alone and
 * together before anything starts ({@link #checkOptions}: a wrong one exits 2 naming it); then,
 * in order ({@link #serve}): the engine with its budgets and tiers, the gRPC server, the native
 * data plane and the metrics endpoint (calls refused as NOT_SERVING until the tables are back),
 * recovery from the write-ahead log (docs/design/0008), the cluster (a registration in etcd, or
 * a replicated group's election: docs/design/0019), then serving. A shutdown leaves the cluster
 * map first, lets running calls finish, flushes the log, closes the engine ({@link
 * #closeOnExit}).
 */
@Command(name = "table-server", mixinStandardHelpOptions = true,
    description = "Serves one shard of the embedding tables over gRPC.")
public final class TableServerMain implements Callable<Integer> {
  @Option(names = "--port", required = true, description = "TCP port (0 = any free port)")
  int port;

  @Option(names = "--data-port", defaultValue = "0", description = "TCP port of the native data"
      + " plane for Read and Write calls (docs/design/0015-data-plane.md; 0 = any free port,"
      + " announced to clients through gRPC; -1 = none: Read and Write on gRPC only; default"
      + " ${DEFAULT-VALUE})")
  int dataPort;

  @Option(names = "--host", defaultValue = "127.0.0.1", description = "address to bind (default ${DEFAULT-VALUE})")
  String host;

  @Option(names = "--shard-index", defaultValue = "0", description = "this shard, 0..num-shards-1")
  int shardIndex;

  @Option(names = "--num-shards", defaultValue = "1", description = "shards of the deployment")
  int numShards;

  @Option(names = "--data-dir", description = "base of relative checkpoint directories, and of"
      + " the write-ahead log and snapshots (state/) unless --state-dir says otherwise (default:"
      + " $XDG_DATA_HOME/dynembed, else ~/.local/share/dynembed: never the working directory;"
      + " shards of one table on one machine share it, so that a checkpoint's files meet)")
  Path dataDir;

  /** The default data directory: the XDG data home's dynembed/, never the working directory. */
  static Path defaultDataDir(java.util.Map<String, String> env, String userHome) {
    String xdg = env.get("XDG_DATA_HOME");
    Path base = xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute() ? Path.of(xdg)
        : Path.of(userHome, ".local", "share");
    return base.resolve("dynembed");
  }

  @Option(names = "--threads", description = "request threads (default: 2 x cores)")
  Integer threads;

  @Option(names = "--exit-with", description = "exit when the process of this PID is gone (a"
      + " trainer that started this shard: the shard never outlives it, even a kill -9)")
  Long exitWith;

  @Option(names = "--wal", defaultValue = "on", description = "write-ahead log and snapshots"
      + " under STATE_DIR/shard-I: on (every acknowledged write survives a crash of this"
      + " process; the tables come back on restart) or off (the tables live in memory only);"
      + " default ${DEFAULT-VALUE}")
  String wal;

  @Option(names = "--state-dir", description = "where the write-ahead log and snapshots live"
      + " (STATE_DIR/shard-I; default DATA_DIR/state): one shard process per directory")
  Path stateDir;

  @Option(names = "--fsync", defaultValue = "everysec", description = "when logged writes are"
      + " forced to the disk: always (before the reply; a power loss loses nothing answered),"
      + " everysec (a power loss loses up to ~1 s), no (the OS decides); a crash of the process"
      + " loses nothing answered in any of them. Default ${DEFAULT-VALUE}")
  String fsync;

  @Option(names = "--snapshot-every-mb", defaultValue = "1024", description = "take a snapshot"
      + " (and drop the log before it) after this many MiB of log; bounds the disk the log"
      + " takes and the time a restart replays (default ${DEFAULT-VALUE})")
  long snapshotEveryMb;

  @Option(names = "--snapshot-on-exit", negatable = true, defaultValue = "true",
      fallbackValue = "true", description = "on SIGTERM, snapshot if the log grew since the last"
      + " snapshot, so the next start replays nothing (default ${DEFAULT-VALUE})")
  boolean snapshotOnExit;

  @Option(names = "--cold-dir", description = "where tables with disk_tier keep their cold rows"
      + " (an embedded RocksDB, wiped at start: the log and snapshots hold both tiers; default: a"
      + " new directory under java.io.tmpdir)")
  Path coldDir;

  @Option(names = "--cold-cache-mb", defaultValue = "64", description = "block cache of the"
      + " disk tier, MiB (default ${DEFAULT-VALUE})")
  long coldCacheMb;

  @Option(names = "--redis-tier", description = "Redis under this shard for tables with"
      + " redis_tier: redis://[user:password@]host:port or redis-cluster://host:port,... (changed"
      + " rows written behind every --redis-tier-flush-ms, a cap's victims kept there only; a"
      + " shard started on an empty state directory loads its tables from there)")
  String redisTier;

  @Option(names = "--redis-tier-prefix", description = "this shard's key prefix in Redis"
      + " (default dynembed:shard-INDEX-of-N; each shard needs its own)")
  String redisTierPrefix;

  @Option(names = "--redis-tier-flush-ms", defaultValue = ""
      + dev.dynembed.table.engine.RedisTier.DEFAULT_FLUSH_MILLIS, description = "write-behind"
      + " period of the Redis tier: a shard whose disk is lost loses at most about this much of"
      + " its updates (default ${DEFAULT-VALUE})")
  long redisTierFlushMs;

  @Option(names = "--memory-budget-mb", defaultValue = "0", description = "refuse calls that"
      + " could take this shard's tables past this many MiB (RESOURCE_EXHAUSTED, nothing"
      + " changed; 0 = no budget: the heap is the limit)")
  long memoryBudgetMb;

  @Option(names = "--max-tables", defaultValue = "1024", description = "tables this shard"
      + " accepts (default ${DEFAULT-VALUE})")
  int maxTables;

  @Option(names = "--tls-cert", description = "PEM certificate chain of this shard: serve TLS")
  Path tlsCert;

  @Option(names = "--tls-key", description = "PEM private key (PKCS#8) of --tls-cert")
  Path tlsKey;

  @Option(names = "--tls-client-ca", description = "PEM CA that signs client certificates:"
      + " mutual TLS, every client must present one")
  Path tlsClientCa;

  @Option(names = "--tls-reload-seconds", defaultValue = "60", description = "re-read the"
      + " certificate files this often (renewals need no restart; default ${DEFAULT-VALUE})")
  long tlsReloadSeconds;

  @Option(names = "--admin-clients", split = ",", description = "client certificate CNs with"
      + " the admin role (create, drop, save, restore); other verified clients are trainers")
  java.util.Set<String> adminClients = java.util.Set.of();

  @Option(names = "--tokens", description = "bearer tokens, one 'trainer TOKEN' or 'admin TOKEN'"
      + " per line; with this file or --tls-client-ca every caller must authenticate")
  Path tokensFile;

  @Option(names = "--insecure", description = "allow a non-loopback --host without TLS (anyone"
      + " who reaches the port can read, change and drop tables)")
  boolean insecure;

  @Option(names = "--cluster", description = "register this shard in the map of a cluster in"
      + " etcd, etcd://host:port[,host:port...]/CLUSTER, under a lease this process renews:"
      + " clients of that URI find the shard wherever it runs and follow it when it restarts"
      + " elsewhere (docs/design/0019-cluster-map.md)")
  String cluster;

  @Option(names = "--advertise", description = "host that clients reach this"
      + " shard at, as registered with --cluster (default: --host, which must then not be a"
      + " wildcard address)")
  String advertise;

  @Option(names = "--cluster-lease-s", defaultValue = "5", description = "lease of the"
      + " registration: a dead shard's entry goes after this long, and a shard index held by a"
      + " live process is refused after waiting this long (default ${DEFAULT-VALUE})")
  long clusterLeaseS;

  @Option(names = "--replication", description = "replicate this shard (needs --cluster): the"
      + " processes started with the same --cluster and --shard-index form a group, one primary"
      + " that takes the calls and ships its log, followers that apply it and take over when the"
      + " primary's lease expires. sync: a call is answered once every follower in sync holds"
      + " it (and at least --min-sync-replicas do); async: once the primary's log does (a"
      + " failover loses what the followers had not received)")
  String replication;

  @Option(names = "--min-sync-replicas", description = "with --replication sync, followers"
      + " that must hold a write before it is answered (default 1: losing the primary's disk"
      + " loses nothing answered; calls wait while no follower is in sync; 0: the primary"
      + " alone may answer)")
  Integer minSyncReplicas;

  @Option(names = "--replication-timeout-ms", defaultValue = "5000", description = "a follower"
      + " in sync that acknowledges nothing new for this long is cut off (it reconnects: it"
      + " rejoins from its own log, or loads a snapshot when the records it lacks outweigh one);"
      + " default ${DEFAULT-VALUE}")
  long replicationTimeoutMs;

  @Option(names = "--follower-rejoin", defaultValue = "log", description = "what a primary sends"
      + " a follower that reconnects after following it: log (the records it lacks, read from"
      + " this log, when they are fewer bytes than a snapshot; otherwise a snapshot) or"
      + " snapshot (always a snapshot, as before rejoins from the log); default ${DEFAULT-VALUE}")
  String followerRejoin;

  @Option(names = "--serve-from", paramLabel = "HOST:PORT|etcd://HOST:PORT/CLUSTER",
      description = "run as a serving replica of the training shard at HOST:PORT, or of shard"
      + " --shard-index of a cluster in etcd (its primary, followed through failovers; same"
      + " --shard-index and --num-shards):"
      + " read-only (writes, inserting reads and admin calls refused by name), its tables loaded"
      + " from that shard's snapshot and kept up to date from its write-ahead log, with no effect"
      + " on the training shard's answers; reconnects when the shard restarts"
      + " (docs/design/0024-vectors-in.md). Needs --wal on (the replica's own copy)")
  String serveFrom;

  @Option(names = "--max-lag-ms", defaultValue = "5000", description = "with --serve-from:"
      + " refuse reads (UNAVAILABLE, resend) while this replica may lack writes its training"
      + " shard answered more than this long ago (0: serve however stale); default"
      + " ${DEFAULT-VALUE}")
  long maxLagMs;

  @Option(names = "--start-from", paramLabel = "DIR", description = "with --serve-from: a"
      + " replica whose state holds no tables yet first restores every table of this checkpoint"
      + " directory (as `restore` does, inside --data-dir; its shard's part of any shard count)"
      + " and answers reads from it, however old, until its first load from the training shard;"
      + " from then on --max-lag-ms applies (docs/design/0024-vectors-in.md)")
  String startFrom;

  @Option(names = "--peer-tls-ca", description = "with --replication and TLS: the PEM CA that"
      + " signs the other processes' certificates (default --tls-client-ca); a follower presents"
      + " --tls-cert as its client certificate, whose CN the primary must list in"
      + " --admin-clients")
  Path peerTlsCa;

  @Option(names = "--peer-token-file", description = "with --replication and --tokens: a file"
      + " holding a token with the admin role on the other processes of the group (a follower"
      + " reads the whole log)")
  Path peerTokenFile;

  @Option(names = "--metrics-port", description = "serve /metrics (Prometheus), /live and /ready"
      + " over HTTP on this port of --host (0 = any free port; omitted = no HTTP)")
  Integer metricsPort;

  @Option(names = "--reply-budget-mb", defaultValue = "0", description = "bytes of replies the"
      + " shard builds and sends at once; a call whose reply does not fit now is UNAVAILABLE"
      + " (resent later), one larger than the budget RESOURCE_EXHAUSTED (0 = a quarter of the"
      + " heap; default ${DEFAULT-VALUE})")
  long replyBudgetMb;

  @Option(names = "--max-connections", defaultValue = "1024", description = "data-plane"
      + " connections open at once, at most a quarter of the process's file descriptors"
      + " (default ${DEFAULT-VALUE})")
  int maxConnections;

  @Option(names = "--max-connections-before-hello", defaultValue = "128", description = "of"
      + " them, connections that have not sent a valid HELLO yet (default ${DEFAULT-VALUE})")
  int maxConnectionsBeforeHello;

  @Option(names = "--hello-timeout-s", defaultValue = "10", description = "close a data-plane"
      + " connection without a valid HELLO, and a gRPC connection without its handshake, after"
      + " this many seconds (default ${DEFAULT-VALUE})")
  int helloTimeoutS;

  @Option(names = "--idle-timeout-s", defaultValue = "600", description = "close a connection"
      + " that sent nothing for this many seconds (its client reconnects on its next call;"
      + " 0 = never; default ${DEFAULT-VALUE})")
  int idleTimeoutS;

  /** The data plane's connection limits from the options, or null after telling what is wrong. */
  private DataPlaneServer.ConnectionLimits connectionLimits() {
    if (replyBudgetMb < 0 || (replyBudgetMb > 0 && replyBudgetMb < 8)) {
      System.err.printf("table-server: --reply-budget-mb must be 0 (a quarter of the heap) or"
          + " >= 8; got %d%n", replyBudgetMb);
      return null;
    }
    try {
      return new DataPlaneServer.ConnectionLimits(maxConnections, maxConnectionsBeforeHello,
          java.time.Duration.ofSeconds(helloTimeoutS), java.time.Duration.ofSeconds(idleTimeoutS));
    } catch (IllegalArgumentException e) {
      System.err.printf("table-server: --max-connections (%d) and --max-connections-before-hello"
          + " (%d) must be >= 1, the second at most the first; --hello-timeout-s (%d) >= 1 and"
          + " --idle-timeout-s (%d) >= 0%n", maxConnections, maxConnectionsBeforeHello,
          helloTimeoutS, idleTimeoutS);
      return null;
    }
  }

  /** A wrong option or combination: its message (after "table-server: ") and exit code 2. */
  private static final class UsageError extends Exception {
    UsageError(String message) {
      super(message, null, false, false);
    }
  }

  private static UsageError usage(String format, Object... args) {
    return new UsageError(String.format(java.util.Locale.ROOT, format, args));
  }

  // what the options parse into (checkOptions)
  private ShardLog.Fsync policy;
  private dev.dynembed.table.cluster.ClusterAddress clusterAddress;
  private ShardReplicas.Mode replicationMode;
  private java.util.Map<String, AccessControl.Role> tokens = java.util.Map.of();
  private Path states;

  /**
   * Runs the shard: checks the options, builds the engine, starts the servers (gRPC, data plane,
   * metrics), recovers the tables from the log, joins the cluster (a registration, or a
   * replicated group's election), serves until the process is stopped.
   */
  @Override
  public Integer call() throws Exception {
    DataPlaneServer.ConnectionLimits limits = connectionLimits();
    if (limits == null) {
      return 2;
    }
    try {
      checkOptions();
      if (dataDir == null) {
        dataDir = defaultDataDir(System.getenv(), System.getProperty("user.home"));
      }
      Files.createDirectories(dataDir);
      states = stateDir != null ? stateDir : dataDir.resolve("state");
      return serve(limits);
    } catch (UsageError e) {
      System.err.println("table-server: " + e.getMessage());
      return 2;
    }
  }

  /** Every option alone and in combination; parses those that need it into the fields above. */
  private void checkOptions() throws UsageError {
    if (numShards < 1 || shardIndex < 0 || shardIndex >= numShards) {
      throw usage("--shard-index must be in [0, %d) and --num-shards >= 1; got --shard-index %d"
          + " --num-shards %d", Math.max(numShards, 1), shardIndex, numShards);
    }
    if (port < 0 || port > 65535) {
      throw usage("--port must be in [0, 65535]; got %d", port);
    }
    if (dataPort < -1 || dataPort > 65535) {
      throw usage("--data-port must be in [0, 65535], or -1 for none; got %d", dataPort);
    }
    try {
      policy = ShardLog.Fsync.valueOf(fsync.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw usage("--fsync must be always, everysec or no; got '%s'", fsync);
    }
    if (!wal.equals("on") && !wal.equals("off")) {
      throw usage("--wal must be on or off; got '%s'", wal);
    }
    if (metricsPort != null && (metricsPort < 0 || metricsPort > 65535)) {
      throw usage("--metrics-port must be in [0, 65535]; got %d", metricsPort);
    }
    if (snapshotEveryMb < 1) {
      throw usage("--snapshot-every-mb must be >= 1; got %d", snapshotEveryMb);
    }
    if (memoryBudgetMb < 0 || maxTables < 1) {
      throw usage("--memory-budget-mb must be >= 0 and --max-tables >= 1; got %d and %d",
          memoryBudgetMb, maxTables);
    }
    checkTls();
    checkCluster();
    checkReplication();
    if (tokensFile != null) {
      try {
        tokens = AccessControl.readTokens(tokensFile);
      } catch (IllegalArgumentException | java.io.IOException e) {
        throw usage("--tokens: %s", e.getMessage());
      }
    }
  }

  private void checkTls() throws UsageError {
    if ((tlsCert == null) != (tlsKey == null)) {
      throw usage("--tls-cert and --tls-key go together");
    }
    if (tlsClientCa != null && tlsCert == null) {
      throw usage("--tls-client-ca needs --tls-cert and --tls-key");
    }
    if (tlsCert == null && !insecure && !isLoopback(host)) {
      throw usage("--host %s serves other machines in plaintext: anyone who reaches it can read,"
          + " change and drop tables. Give --tls-cert/--tls-key (and --tls-client-ca or"
          + " --tokens), or --insecure to accept that", host);
    }
  }

  private void checkCluster() throws UsageError {
    if (cluster == null) {
      if (advertise != null) {
        throw usage("--advertise is what --cluster registers; give --cluster");
      }
      return;
    }
    try {
      clusterAddress = dev.dynembed.table.cluster.ClusterAddress.parse(cluster);
    } catch (IllegalArgumentException e) {
      throw usage("--cluster: %s", e.getMessage());
    }
    if (clusterLeaseS < 2) {
      throw usage("--cluster-lease-s must be >= 2; got %d", clusterLeaseS);
    }
    if (advertise == null && isWildcard(host)) {
      throw usage("--host %s is every interface of this machine: give --advertise HOST, the"
          + " address clients reach this shard at, to register it with --cluster", host);
    }
  }

  private void checkReplication() throws UsageError {
    if (serveFrom != null) {
      String refusal = replication != null ? "--serve-from and --replication do not go together:"
          + " a serving replica is in no group"
          : cluster != null ? "--serve-from and --cluster do not go together: a serving replica"
              + " registers nowhere (give --serve-from etcd://.../CLUSTER to follow a cluster's"
              + " shard)"
          : !wal.equals("on") ? "--serve-from keeps a copy of the training shard's log: it needs"
              + " --wal on"
          : redisTier != null || coldDir != null ? "--serve-from with a storage tier is not"
              + " built yet"
          : maxLagMs < 0 ? "--max-lag-ms must be >= 0"
          : !serveFrom.startsWith("etcd://") && !serveFrom.matches("[^:/\\s]+:\\d{1,5}")
              ? "--serve-from takes HOST:PORT or etcd://HOST:PORT/CLUSTER; got '" + serveFrom
              + "'"
          : null;
      if (refusal != null) {
        throw new UsageError(refusal);
      }
    }
    if (startFrom != null && serveFrom == null) {
      throw usage("--start-from is for a serving replica (--serve-from): a training shard"
          + " restores checkpoints with `table-cli restore`");
    }
    if (replication == null) {
      if (minSyncReplicas != null) {
        throw usage("--min-sync-replicas is for --replication sync");
      }
      return;
    }
    try {
      replicationMode = ShardReplicas.Mode.valueOf(replication.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw usage("--replication must be sync or async; got '%s'", replication);
    }
    String refusal = cluster == null ? "--replication needs --cluster (the group agrees on its"
        + " primary in etcd)"
        : !wal.equals("on") ? "--replication ships the write-ahead log: it needs --wal on"
        : redisTier != null ? "--replication and --redis-tier do not go together yet (every"
            + " process of a group would write the same rows behind)"
        : tlsCert != null && peerTlsCa == null && tlsClientCa == null ? "--replication with"
            + " TLS needs --peer-tls-ca (or --tls-client-ca): the CA a follower checks its"
            + " primary's certificate with"
        : tokensFile != null && peerTokenFile == null ? "--replication with --tokens needs"
            + " --peer-token-file: a follower's admin token on its primary"
        : minSyncReplicas != null && minSyncReplicas < 0 ? "--min-sync-replicas must be >= 0"
        : replicationTimeoutMs < 100 ? "--replication-timeout-ms must be >= 100"
        : !followerRejoin.equals("log") && !followerRejoin.equals("snapshot")
            ? "--follower-rejoin must be log or snapshot; got '" + followerRejoin + "'"
        : null;
    if (refusal != null) {
      throw new UsageError(refusal);
    }
  }

  private Integer serve(DataPlaneServer.ConnectionLimits limits) throws Exception {
    ShardEngine engine = newEngine();
    if (serveFrom != null) { // until it follows: neither its own state's tables nor none served
      engine.refuse("shard " + shardIndex + ": this serving replica is starting; resend later");
    }
    ShardMetrics metrics = metricsPort == null ? null : new ShardMetrics(engine);
    java.util.List<io.grpc.ServerInterceptor> interceptors = new java.util.ArrayList<>();
    if (metrics != null) {
      interceptors.add(metrics); // outermost: refused calls are counted too
    }
    if (tokensFile != null || tlsClientCa != null) {
      interceptors.add(new AccessControl(adminClients, tokens, shardIndex));
    }
    ServerTls tls = tlsCert == null ? null
        : ServerTls.load(tlsCert, tlsKey, tlsClientCa, tlsReloadSeconds);
    java.util.concurrent.atomic.AtomicReference<ShardState> state =
        new java.util.concurrent.atomic.AtomicReference<>();
    java.util.function.Consumer<java.io.IOException> onLogFailure = e -> {
      // crash-only: a log that cannot be written cannot promise anything; the restart replays
      // what the disk holds
      System.err.println("table-server: write-ahead log failed, exiting: " + e);
      Runtime.getRuntime().halt(70);
    };
    String member = replicationMode == null && serveFrom == null ? null
        : memberId(ShardState.root(states, shardIndex));
    // every shard with a log can have serving replicas: unreplicated ones as their source
    ShardReplicas replicas = replicationMode != null || serveFrom != null || wal.equals("on")
        ? newReplicas(engine, state, onLogFailure, member) : null;
    try {
      Path root = ShardState.root(states, shardIndex);
      Files.createDirectories(root);
      engine.keepSlotMapIn(root.resolve("slot-map"));
    } catch (java.io.IOException e) {
      throw usage("%s", e.getMessage());
    }
    // a checkpoint saved into the log's own directories would be taken for its files
    engine.reserveDirectory(states);
    if (coldDir != null) {
      engine.reserveDirectory(coldDir);
    }
    int n = threads != null ? threads : 2 * Runtime.getRuntime().availableProcessors();
    TableServer server = new TableServer(engine, host, port, n, interceptors,
        tls == null ? null : tls.credentials(), dataPort,
        replicas == null ? java.util.List.of() : java.util.List.of(replicas), limits);
    if (metrics != null) {
      if (replicas != null && (replicationMode != null || serveFrom != null)) {
        metrics.replication(replicas);
      }
      metrics.serve(host, metricsPort, server::serving);
    }
    java.util.concurrent.atomic.AtomicReference<AutoCloseable> registration =
        new java.util.concurrent.atomic.AtomicReference<>();
    closeOnExit(engine, server, state, registration);
    if (exitWith != null) {
      watchParent(exitWith);
    }
    printListening(server, tls, metrics);
    recover(engine, state, onLogFailure);
    boolean fromCheckpoint = startFrom != null && startFromCheckpoint(engine);
    if (serveFrom != null && serveFrom.startsWith("etcd://")) {
      // the shard's entry in the map: its primary, for a replicated group; read at every
      // connection, so that the replica follows a failover or a restart elsewhere
      dev.dynembed.table.cluster.ClusterMap map;
      try {
        map = dev.dynembed.table.cluster.ClusterMap.open(
            dev.dynembed.table.cluster.ClusterAddress.parse(serveFrom),
            java.time.Duration.ofSeconds(60));
      } catch (dev.dynembed.table.cluster.ClusterException e) {
        throw usage("--serve-from %s: %s", serveFrom, e.getMessage());
      }
      if (map.numShards() != numShards) {
        throw usage("--serve-from %s: the cluster has %d shards but this replica was started"
            + " with --num-shards %d", serveFrom, map.numShards(), numShards);
      }
      replicas.serve(serveFrom, () -> map.endpoint(shardIndex), maxLagMs, fromCheckpoint);
      System.out.printf("table-server shard %d is a serving replica of shard %d of %s (reads"
          + " refused while it may lag by more than %d ms)%n", shardIndex, shardIndex, serveFrom,
          maxLagMs);
    } else if (serveFrom != null) {
      replicas.serve(serveFrom, () -> serveFrom, maxLagMs, fromCheckpoint);
      System.out.printf("table-server shard %d is a serving replica of %s (reads refused while"
          + " it may lag by more than %d ms)%n", shardIndex, serveFrom, maxLagMs);
    } else if (replicationMode != null) {
      joinGroup(engine, server, state, replicas, member, registration);
    } else {
      if (replicas != null) {
        replicas.serveAsSource();
      }
      if (clusterAddress != null) {
        register(engine, server, registration);
      }
    }
    System.out.flush();
    server.markServing();
    server.awaitTermination();
    return 0;
  }

  /** The engine with its budgets, tiers and readiness as the options say. */
  private ShardEngine newEngine() throws UsageError {
    ShardEngine engine = new ShardEngine(shardIndex, numShards, dataDir);
    engine.setMemoryBudget(memoryBudgetMb << 20);
    if (replyBudgetMb > 0) {
      engine.setReplyBudget(replyBudgetMb << 20);
    }
    if (coldDir != null || coldCacheMb != 64) {
      engine.setColdDirectory(coldDir == null ? null
          : coldDir.resolve("shard-" + shardIndex), coldCacheMb << 20);
    }
    engine.setMaxTables(maxTables);
    if (wal.equals("on")) {
      engine.setReady(false); // NOT_SERVING until the tables are back
    }
    if (redisTier != null) {
      try {
        engine.setRedisTier(dev.dynembed.table.engine.RedisTier.open(redisTier,
            redisTierPrefix != null ? redisTierPrefix
                : dev.dynembed.table.engine.RedisTier.defaultPrefix(shardIndex, numShards),
            redisTierFlushMs, shardIndex));
      } catch (dev.dynembed.table.common.TableException e) {
        throw usage("--redis-tier: %s", e.getMessage());
      }
    }
    return engine;
  }

  /** A replicated shard's role: refuses calls until it joined its group (joinGroup). */
  private ShardReplicas newReplicas(ShardEngine engine,
      java.util.concurrent.atomic.AtomicReference<ShardState> state,
      java.util.function.Consumer<java.io.IOException> onLogFailure, String member)
      throws UsageError, java.io.IOException {
    ShardReplicas.Peers peers;
    try {
      peers = new ShardReplicas.Peers(tlsCert == null ? null
          : peerTlsCa != null ? peerTlsCa : tlsClientCa, tlsCert, tlsKey,
          peerTokenFile == null ? null : Files.readString(peerTokenFile).strip());
    } catch (java.io.IOException e) {
      throw usage("--peer-token-file: cannot read %s", peerTokenFile);
    }
    ShardReplicas.cleanUp(ShardState.root(states, shardIndex));
    if (replicationMode != null) {
      engine.refuse("shard " + shardIndex + ": joining its replicated group; resend later");
    }
    return new ShardReplicas(engine, state, () -> ShardState.recover(engine, states,
        policy, snapshotEveryMb << 20, onLogFailure), states, member, peers,
        replicationMode != null ? replicationMode : ShardReplicas.Mode.ASYNC,
        minSyncReplicas != null ? minSyncReplicas
            : replicationMode == ShardReplicas.Mode.SYNC ? 1 : 0,
        java.time.Duration.ofMillis(replicationTimeoutMs), followerRejoin.equals("log"), () -> {
          Runtime.getRuntime().halt(ShardReplicas.DEPOSED_EXIT_CODE);
        });
  }

  /**
   * On exit (SIGTERM, SIGINT): out of the cluster map first (clients stop choosing this
   * process), then the servers (running calls finish), then the log (flushed, a snapshot if
   * asked), then the engine (the disk tier, after the exit snapshot has read it).
   */
  private void closeOnExit(ShardEngine engine, TableServer server,
      java.util.concurrent.atomic.AtomicReference<ShardState> state,
      java.util.concurrent.atomic.AtomicReference<AutoCloseable> registration) {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      AutoCloseable reg = registration.get();
      if (reg != null) {
        try {
          reg.close();
        } catch (Exception e) {
          System.err.println("table-server: leaving the cluster map failed: " + e);
        }
      }
      server.close();
      ShardState s = state.get();
      if (s != null) {
        try {
          s.close(snapshotOnExit);
        } catch (Exception e) {
          System.err.println("table-server: closing the write-ahead log failed: " + e);
        }
      }
      engine.close();
    }));
  }

  private void printListening(TableServer server, ServerTls tls, ShardMetrics metrics) {
    System.out.printf("table-server shard %d of %d listening on %s:%d (data dir %s; %s)%n",
        shardIndex, numShards, host, server.port(), dataDir.toAbsolutePath(),
        tls == null ? "plaintext" : tlsClientCa != null ? "mutual TLS" : "TLS");
    if (server.dataPort() >= 0) {
      System.out.printf("table-server shard %d data plane on %s:%d (%s)%n", shardIndex, host,
          server.dataPort(), dev.dynembed.table.common.dataplane.DataPlaneFrames.epoll()
              ? "epoll" : "nio");
    }
    if (metrics != null) {
      System.out.printf("table-server shard %d metrics on http://%s:%d/metrics (/live, /ready)%n",
          shardIndex, host, metrics.port());
    }
    System.out.flush();
  }

  /** The tables back: from the log and its snapshot, or (no log) from the Redis tier. */
  private void recover(ShardEngine engine,
      java.util.concurrent.atomic.AtomicReference<ShardState> state,
      java.util.function.Consumer<java.io.IOException> onLogFailure) throws java.io.IOException {
    if (wal.equals("on")) {
      ShardState s = ShardState.recover(engine, states, policy, snapshotEveryMb << 20,
          onLogFailure);
      state.set(s);
      ShardState.Recovery r = s.recovery();
      System.out.printf("table-server shard %d ready: %d tables from snapshot at log record %d"
          + " + %d records replayed in %.2f s (fsync %s)%s%n", shardIndex, r.tables(),
          r.snapshotLsn(), r.replayedRecords(), r.seconds(), fsync, r.redisTables() == 0 ? ""
              : "; no state on disk: " + r.redisTables() + " tables from the Redis tier");
    } else {
      engine.setReady(false);
      int loaded = engine.loadFromRedisTier();
      engine.setReady(true);
      System.out.printf("table-server shard %d ready (no write-ahead log: %s)%n", shardIndex,
          engine.redisTier() == null ? "tables live in memory only"
              : loaded + " tables from the Redis tier, which is the only copy");
    }
    if (engine.redisTier() != null) {
      System.out.printf("table-server shard %d redis tier %s prefix %s, written behind every %d"
          + " ms%n", shardIndex, engine.redisTier().address(), engine.redisTier().prefix(),
          redisTierFlushMs);
    }
  }

  /**
   * A serving replica's start from a checkpoint (--start-from): every table of the directory
   * restored, this shard's part, unless the replica's own state already holds tables (what it
   * followed before a restart is newer than any checkpoint). Returns whether it restored.
   */
  private boolean startFromCheckpoint(ShardEngine engine) throws UsageError {
    if (!engine.tables().isEmpty()) {
      System.out.printf("table-server shard %d: --start-from %s ignored: its own state holds %d"
          + " tables (what it followed before it stopped)%n", shardIndex, startFrom,
          engine.tables().size());
      return false;
    }
    Path dir;
    java.util.List<String> tables;
    try {
      dir = engine.resolve(startFrom);
      tables = dev.dynembed.table.common.CheckpointFormat.tablesIn(dir);
    } catch (dev.dynembed.table.common.TableException | java.io.IOException e) {
      throw usage("--start-from %s: %s", startFrom, e.getMessage());
    }
    if (tables.isEmpty()) {
      throw usage("--start-from %s: no checkpoint manifest (TABLE.manifest.json) in %s",
          startFrom, dir);
    }
    long rows = 0;
    for (String table : tables) {
      try {
        rows += engine.restore(table, startFrom,
            dev.dynembed.table.common.CheckpointFormat.readManifest(dir, table).getFilesList());
      } catch (dev.dynembed.table.common.TableException e) {
        throw usage("--start-from %s: table '%s': %s", startFrom, table, e.getMessage());
      }
    }
    System.out.printf("table-server shard %d: started from checkpoint %s: %d tables, %d rows;"
        + " reads answer from it until the first load from the training shard%n", shardIndex,
        startFrom, tables.size(), rows);
    return true;
  }

  /** A replicated shard joins its group in etcd: the election makes it primary or follower. */
  private void joinGroup(ShardEngine engine, TableServer server,
      java.util.concurrent.atomic.AtomicReference<ShardState> state, ShardReplicas replicas,
      String member, java.util.concurrent.atomic.AtomicReference<AutoCloseable> registration)
      throws UsageError {
    String ep = advertisedEndpoint(server.port());
    try {
      dev.dynembed.table.cluster.ShardGroup group = dev.dynembed.table.cluster.ShardGroup.join(
          clusterAddress, dev.dynembed.table.cluster.ClusterMember.of(shardIndex, numShards,
              ep, server.dataPort(), member), java.time.Duration.ofSeconds(clusterLeaseS),
          replicas, () -> {
            ShardState s = state.get();
            return s == null ? 0 : s.lastLsn();
          }, m -> System.err.println("table-server: " + m), engine::slotMap);
      registration.set(group);
      replicas.joined(group);
      group.start();
    } catch (dev.dynembed.table.cluster.ClusterException e) {
      throw usage("--cluster: %s", e.getMessage());
    }
    System.out.printf("table-server shard %d joined the replicated group of cluster %s as %s"
        + " (member %s, lease %d s, replication %s)%n", shardIndex, clusterAddress, ep, member,
        clusterLeaseS, replication);
  }

  /** An unreplicated shard registers in its cluster's map and publishes its slot map there. */
  private void register(ShardEngine engine, TableServer server,
      java.util.concurrent.atomic.AtomicReference<AutoCloseable> registration)
      throws UsageError, java.io.IOException {
    String ep = advertisedEndpoint(server.port());
    String id = memberId(wal.equals("on") ? ShardState.root(states, shardIndex) : null);
    try {
      dev.dynembed.table.cluster.ShardRegistration reg =
          dev.dynembed.table.cluster.ShardRegistration.register(clusterAddress,
              dev.dynembed.table.cluster.ClusterMember.of(shardIndex, numShards, ep,
                  server.dataPort(), id),
              java.time.Duration.ofSeconds(clusterLeaseS),
              m -> System.err.println("table-server: " + m), engine::slotMap);
      registration.set(reg);
      engine.onSlotMapInstalled(reg::slotMapChanged); // published in etcd: its slot-map key
    } catch (dev.dynembed.table.cluster.ClusterException e) {
      throw usage("--cluster: %s", e.getMessage());
    }
    System.out.printf("table-server shard %d registered in cluster %s as %s (member %s, lease"
        + " %d s)%n", shardIndex, clusterAddress, ep, id, clusterLeaseS);
  }

  static boolean isWildcard(String host) {
    try {
      return java.net.InetAddress.getByName(host).isAnyLocalAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
  }

  /** host:port registered with --cluster: --advertise (else --host) and the bound port. */
  private String advertisedEndpoint(int boundPort) {
    String h = advertise != null ? advertise : host;
    return (h.contains(":") && !h.startsWith("[") ? "[" + h + "]" : h) + ":" + boundPort;
  }

  /**
   * This shard's identity in the cluster map, kept in its state directory so that a restarted
   * process takes its index back at once (the directory's lock proves the earlier one gone);
   * without a write-ahead log, a new one per process.
   */
  private static String memberId(Path stateRoot) throws java.io.IOException {
    if (stateRoot == null) {
      return java.util.UUID.randomUUID().toString();
    }
    Files.createDirectories(stateRoot);
    Path f = stateRoot.resolve("cluster-member");
    if (Files.exists(f)) {
      String id = Files.readString(f).strip();
      if (!id.isEmpty()) {
        return id;
      }
    }
    String id = java.util.UUID.randomUUID().toString();
    Path tmp = stateRoot.resolve("cluster-member.tmp");
    Files.writeString(tmp, id + "\n");
    Files.move(tmp, f, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    return id;
  }

  static boolean isLoopback(String host) {
    try {
      return java.net.InetAddress.getByName(host).isLoopbackAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
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
    configureLogging();
    System.exit(new CommandLine(new TableServerMain()).execute(args));
  }

  /** Log levels and one line per log record (with its time and source), unless set already. */
  static void configureLogging() {
    if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
      System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"); // jetcd's, jedis'
    }
    // one line per log record, with its time and source (audit lines included)
    if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
      System.setProperty("java.util.logging.SimpleFormatter.format",
          "%1$tF %1$tT %4$s %3$s: %5$s%6$s%n");
    }
  }
}
