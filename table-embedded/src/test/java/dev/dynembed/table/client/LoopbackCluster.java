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

  @Override
  public void close() {
    for (TableServer s : servers) {
      s.close();
      s.engine().close(); // a disk tier's directory
    }
  }
}
