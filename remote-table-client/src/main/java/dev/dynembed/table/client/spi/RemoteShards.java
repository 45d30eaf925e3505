package dev.dynembed.table.client.spi;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.internal.GrpcShard;
import java.util.function.Supplier;

/**
 * Our shards over gRPC (and their native data plane), for providers that find shards by other
 * means than a fixed endpoint list: the cluster map in etcd ({@code table-cluster}).
 */
public final class RemoteShards {
  private RemoteShards() {}

  /**
   * Shard {@code index} reached through a gRPC channel {@code target}: "host:port", or a URI that
   * a registered {@link io.grpc.NameResolver} resolves (the shard may then move: calls resent
   * after a move reach its new address with their call ids, so they are still applied once).
   *
   * @param endpoint where the shard is now (host:port), for messages and the data plane's host
   */
  public static Shard open(int index, String target, Supplier<String> endpoint,
      ClientOptions options) {
    return new GrpcShard(index, target, endpoint, options);
  }
}
