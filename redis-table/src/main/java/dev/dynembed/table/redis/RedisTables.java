package dev.dynembed.table.redis;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClientProvider;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.engine.RedisConnections;
import java.util.List;
import java.util.Set;

/**
 * Embedding tables in Redis: {@code redis://[user:password@]host:port} (one node) or {@code
 * redis-cluster://[user:password@]host:port,host:port,...} (a Redis Cluster, any of its nodes to
 * start from), with an optional {@code ?sampler-refresh-ms=N} (default 1000). The tables behave
 * as those of {@link dev.dynembed.table.client.TableClients} (same rows, optimizers, checkpoints)
 * except that the optimizer runs in this client: see {@link RedisShard}.
 */
public final class RedisTables implements TableClientProvider {
  /** The default least age of a sampling snapshot before it is rebuilt. */
  public static final long DEFAULT_SAMPLER_REFRESH_MILLIS = 1000;

  @Override
  public List<String> schemes() {
    return List.of("redis", "redis-cluster");
  }

  @Override
  public TableClient open(String uri, ClientOptions options) {
    return connect(uri);
  }

  /** A client of the tables in the Redis of {@code uri}. */
  public static TableClient connect(String uri) {
    RedisConnections.Connection c = RedisConnections.open(uri, Set.of("sampler-refresh-ms"));
    long refresh = DEFAULT_SAMPLER_REFRESH_MILLIS;
    String r = c.parameters().get("sampler-refresh-ms");
    if (r != null) {
      try {
        refresh = Long.parseLong(r);
      } catch (NumberFormatException e) {
        refresh = -1;
      }
      if (refresh < 0) {
        c.redis().close();
        throw new IllegalArgumentException("'" + uri + "': sampler-refresh-ms must be a"
            + " number of milliseconds >= 0");
      }
    }
    return new ShardedTableClient(List.of(new RedisShard(c.redis(), c.shown(), refresh)));
  }
}
