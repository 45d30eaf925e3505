package dev.dynembed.table.client;

import dev.dynembed.table.client.internal.GrpcShard;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.client.spi.ShardedTableClient;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Factories of {@link TableClient}s. */
public final class TableClients {
  private TableClients() {}

  /** The embedded default: the table engine in this process, no server to start. */
  public static TableClient inProcess() {
    return inProcess(Path.of("."));
  }

  /**
   * In-process, with relative checkpoint directories resolved against {@code dataDir}. The
   * engine comes from the {@code table-embedded} module (found on the class path: this module
   * compiles against the table contract only).
   */
  public static TableClient inProcess(Path dataDir) {
    return inProcessTables().open(dataDir);
  }

  private static InProcessTables inProcessTables() {
    for (InProcessTables p : java.util.ServiceLoader.load(InProcessTables.class)) {
      return p;
    }
    throw new IllegalStateException("the in-process table needs the table-embedded module"
        + " (dev.dynembed:table-embedded) on the class path");
  }

  /**
   * Sharded gRPC client. Endpoint i must be the server started with {@code --shard-index i
   * --num-shards endpoints.size()}.
   *
   * @param endpoints "host:port", in shard order
   */
  public static TableClient connect(List<String> endpoints, ClientOptions options) {
    if (endpoints.isEmpty()) {
      throw new IllegalArgumentException("at least one endpoint is needed");
    }
    List<Shard> shards = new ArrayList<>();
    for (int i = 0; i < endpoints.size(); i++) {
      shards.add(new GrpcShard(i, endpoints.get(i), options));
    }
    return new ShardedTableClient(shards).withRowCache(options.rowCache());
  }

  public static TableClient connect(List<String> endpoints) {
    return connect(endpoints, ClientOptions.DEFAULTS);
  }

  /**
   * A client of the tables at {@code spec}: our shards as "host:port,host:port" (in shard order,
   * as {@link #connect}), or a URI {@code scheme://...} served by a {@link TableClientProvider} on
   * the class path (the {@code redis-table} module serves {@code redis://host:port} and {@code
   * redis-cluster://host:port,...}).
   */
  public static TableClient open(String spec, ClientOptions options) {
    int sep = spec.indexOf("://");
    if (sep < 0) {
      return connect(parseEndpoints(spec), options);
    }
    String scheme = spec.substring(0, sep);
    java.util.List<String> known = new ArrayList<>();
    for (TableClientProvider p : java.util.ServiceLoader.load(TableClientProvider.class)) {
      if (p.schemes().contains(scheme)) {
        return p.open(spec, options);
      }
      known.addAll(p.schemes());
    }
    throw new IllegalArgumentException("no table storage serves '" + scheme + "://' (known: "
        + (known.isEmpty() ? "none; add the module that serves it, e.g. redis-table"
        : String.join(", ", known)) + "; or give shards as host:port,host:port)");
  }

  /**
   * What {@code table}'s client moved to and from the shards so far, with its row cache's
   * counters; null for a table that is not over shards of this project.
   */
  public static RowTraffic traffic(EmbeddingTable table) {
    return table instanceof dev.dynembed.table.client.internal.ShardedTable st ? st.traffic()
        : null;
  }

  /** Parses "host:port,host:port". */
  public static List<String> parseEndpoints(String csv) {
    List<String> out = new ArrayList<>();
    for (String s : csv.split(",")) {
      String e = s.trim();
      int colon = e.lastIndexOf(':');
      if (colon <= 0 || colon == e.length() - 1) {
        throw new IllegalArgumentException("endpoint '" + e + "' is not host:port");
      }
      try {
        int port = Integer.parseInt(e.substring(colon + 1));
        if (port < 1 || port > 65535) {
          throw new NumberFormatException();
        }
      } catch (NumberFormatException ex) {
        throw new IllegalArgumentException("endpoint '" + e + "' has an invalid port");
      }
      out.add(e);
    }
    return out;
  }

  /**
   * Reads a table's checkpoint (any shard count) into a table of its own in this process,
   * without a server: for offline tools such as exporters, which {@link EmbeddingTable#scan} it.
   * Every row is held in memory: the table's memory caps, TTL and tiers are not applied.
   * Verified as a restore is; a corrupt checkpoint throws DATA_LOSS.
   */
  public static EmbeddingTable loadCheckpoint(Path directory, String table) {
    Path dir = directory.toAbsolutePath().normalize();
    dev.dynembed.table.v1.CheckpointManifest m =
        dev.dynembed.table.client.internal.Manifests.read(dir, table);
    // a reader of the whole checkpoint: its rows in memory, without the caps and tiers of the
    // table that wrote it (a cap would start evicting while the reader scans)
    return inProcessTables().loadCheckpoint(dir, m);
  }
}
