package dev.dynembed.table.client;

import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** N real table servers on loopback ports (any free port), sharing one data directory. */
final class LoopbackCluster implements AutoCloseable {
  final List<TableServer> servers = new ArrayList<>();
  final List<String> endpoints = new ArrayList<>();

  LoopbackCluster(int shards, Path dataDir) throws IOException {
    for (int i = 0; i < shards; i++) {
      TableServer s = new TableServer(new ShardEngine(i, shards, dataDir), "127.0.0.1", 0, 4);
      servers.add(s);
      endpoints.add("127.0.0.1:" + s.port());
    }
  }

  TableClient client() {
    return TableClients.connect(endpoints);
  }

  ShardEngine engine(int shard) {
    return servers.get(shard).engine();
  }

  /**
   * A client of the in-process table (shards 0) or of a new cluster of that many shards, which
   * joins {@code keep} (the caller closes it).
   */
  static TableClient client(int shards, Path dir, List<AutoCloseable> keep) throws IOException {
    if (shards == 0) {
      return TableClients.inProcess(dir);
    }
    LoopbackCluster c = new LoopbackCluster(shards, dir);
    keep.add(c);
    return c.client();
  }

  /** The engines behind a client made by {@link #client(int, Path, List)}. */
  static List<ShardEngine> engines(TableClient c, List<AutoCloseable> keep) {
    if (keep.isEmpty()) {
      return List.of(dev.dynembed.table.embedded.EmbeddedTables.engineOf(c));
    }
    LoopbackCluster cl = (LoopbackCluster) keep.get(0);
    List<ShardEngine> out = new ArrayList<>();
    for (TableServer s : cl.servers) {
      out.add(s.engine());
    }
    return out;
  }

  @Override
  public void close() {
    for (TableServer s : servers) {
      s.close();
      s.engine().close(); // a disk tier's directory
    }
  }
}
