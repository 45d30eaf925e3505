package dev.dynembed.table.cluster.client;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClientProvider;
import dev.dynembed.table.client.spi.RemoteShards;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.cluster.ClusterAddress;
import dev.dynembed.table.cluster.ClusterMap;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code etcd://host:port[,host:port...]/CLUSTER}: the shards of a cluster, found through its
 * map in etcd and followed when they move ({@code TableClients.open} picks this provider by its
 * scheme). The client waits up to {@link ClientOptions#retryFor()} for the cluster's first shard
 * to register; shards that register later are reached once they do (calls to them are resent
 * meanwhile, as to a shard that does not answer). It starts with the shards that own slots in
 * the cluster's published slot map and routes by that map; when the shards' map gives slots to a
 * shard added since (live resharding), the client opens it through the same watched map.
 */
public final class EtcdTables implements TableClientProvider {
  @Override
  public List<String> schemes() {
    return List.of(ClusterAddress.SCHEME);
  }

  @Override
  public TableClient open(String uri, ClientOptions options) {
    return open(ClusterAddress.parse(uri), options);
  }

  /** A client of the cluster at {@code address}. */
  public static TableClient open(ClusterAddress address, ClientOptions options) {
    ClusterMap map = ClusterMap.open(address, options.retryFor());
    String view = ClusterNameResolvers.add(map);
    java.util.function.IntFunction<Shard> opener = index -> {
      map.awaitMember(index, options.retryFor()); // a shard added to the cluster registers first
      return RemoteShards.open(index, ClusterNameResolvers.target(view, index),
          () -> map.endpoint(index), options);
    };
    List<Shard> shards = new ArrayList<>();
    try {
      for (int i = 0; i < map.numShards(); i++) {
        int index = i;
        shards.add(RemoteShards.open(i, ClusterNameResolvers.target(view, i),
            () -> map.endpoint(index), options));
      }
      return ShardedTableClient.growing(shards, map.slotMap(), opener, () -> {
        ClusterNameResolvers.remove(view);
        map.close();
      }).withRowCache(options.rowCache());
    } catch (RuntimeException e) {
      shards.forEach(Shard::close);
      ClusterNameResolvers.remove(view);
      map.close();
      throw e;
    }
  }
}
