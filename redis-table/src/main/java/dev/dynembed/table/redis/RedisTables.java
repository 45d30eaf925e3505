package dev.dynembed.table.redis;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClientProvider;
import dev.dynembed.table.client.spi.ShardedTableClient;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.UnifiedJedis;

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
    int sep = uri.indexOf("://");
    String scheme = sep < 0 ? "" : uri.substring(0, sep);
    if (!scheme.equals("redis") && !scheme.equals("redis-cluster")) {
      throw new IllegalArgumentException("'" + uri + "' is not redis://host:port or"
          + " redis-cluster://host:port,...");
    }
    String rest = uri.substring(sep + 3);
    long refresh = DEFAULT_SAMPLER_REFRESH_MILLIS;
    int q = rest.indexOf('?');
    if (q >= 0) {
      for (String kv : rest.substring(q + 1).split("&")) {
        String[] p = kv.split("=", 2);
        if (p.length != 2 || !p[0].equals("sampler-refresh-ms")) {
          throw new IllegalArgumentException("'" + uri + "': unknown parameter '" + kv
              + "' (known: sampler-refresh-ms=N)");
        }
        try {
          refresh = Long.parseLong(p[1]);
        } catch (NumberFormatException e) {
          refresh = -1;
        }
        if (refresh < 0) {
          throw new IllegalArgumentException("'" + uri + "': sampler-refresh-ms must be a"
              + " number of milliseconds >= 0");
        }
      }
      rest = rest.substring(0, q);
    }
    DefaultJedisClientConfig.Builder config = DefaultJedisClientConfig.builder()
        .timeoutMillis(30_000);
    int at = rest.lastIndexOf('@');
    if (at >= 0) {
      String userInfo = rest.substring(0, at);
      rest = rest.substring(at + 1);
      int colon = userInfo.indexOf(':');
      String user = colon < 0 ? "" : decode(userInfo.substring(0, colon));
      String password = decode(colon < 0 ? userInfo : userInfo.substring(colon + 1));
      if (!user.isEmpty()) {
        config.user(user);
      }
      config.password(password);
    }
    Set<HostAndPort> nodes = new LinkedHashSet<>();
    for (String e : dev.dynembed.table.client.TableClients.parseEndpoints(rest)) {
      int colon = e.lastIndexOf(':');
      nodes.add(new HostAndPort(e.substring(0, colon), Integer.parseInt(e.substring(colon + 1))));
    }
    JedisClientConfig c = config.build();
    UnifiedJedis redis;
    if (scheme.equals("redis")) {
      if (nodes.size() != 1) {
        throw new IllegalArgumentException("'" + uri + "': redis:// takes one host:port; a"
            + " Redis Cluster is redis-cluster://host:port,...");
      }
      redis = new JedisPooled(nodes.iterator().next(), c);
    } else {
      redis = new JedisCluster(nodes, c);
    }
    String shown = scheme + "://" + rest; // no password in messages
    return new ShardedTableClient(List.of(new RedisShard(redis, shown, refresh)));
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }
}
