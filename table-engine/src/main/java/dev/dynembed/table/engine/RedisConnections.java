package dev.dynembed.table.engine;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.UnifiedJedis;

/**
 * Redis addresses as the project writes them: {@code redis://[user:password@]host:port} (one
 * node) or {@code redis-cluster://[user:password@]host:port,host:port,...} (a Cluster, any of its
 * nodes to start from), then {@code ?name=value&...} parameters. Shared by the Redis backend
 * ({@code redis-table}) and the shards' Redis tier ({@link RedisTier}).
 */
public final class RedisConnections {
  private RedisConnections() {}

  /**
   * An open connection: the client, the address without its password (for messages), the
   * parameters given.
   */
  public record Connection(UnifiedJedis redis, String shown, Map<String, String> parameters) {}

  /**
   * Connects (lazily: the first command reaches the server).
   *
   * @param known the parameter names accepted; any other is refused by name
   * @throws IllegalArgumentException naming what is wrong with {@code uri}
   */
  public static Connection open(String uri, Set<String> known) {
    int sep = uri.indexOf("://");
    String scheme = sep < 0 ? "" : uri.substring(0, sep);
    if (!scheme.equals("redis") && !scheme.equals("redis-cluster")) {
      throw new IllegalArgumentException("'" + uri + "' is not redis://host:port or"
          + " redis-cluster://host:port,...");
    }
    String rest = uri.substring(sep + 3);
    Map<String, String> params = new LinkedHashMap<>();
    int q = rest.indexOf('?');
    if (q >= 0) {
      for (String kv : rest.substring(q + 1).split("&")) {
        String[] p = kv.split("=", 2);
        if (p.length != 2 || !known.contains(p[0])) {
          throw new IllegalArgumentException("'" + uri + "': unknown parameter '" + kv
              + "' (known: " + String.join(", ", known.stream().map(k -> k + "=...").toList())
              + ")");
        }
        params.put(p[0], p[1]);
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
    for (String e : rest.split(",")) {
      String h = e.trim();
      int colon = h.lastIndexOf(':');
      int port = -1;
      try {
        port = colon < 1 ? -1 : Integer.parseInt(h.substring(colon + 1));
      } catch (NumberFormatException ignored) {
        // refused below
      }
      if (port < 1 || port > 65535) {
        throw new IllegalArgumentException("'" + uri + "': '" + h + "' is not host:port");
      }
      nodes.add(new HostAndPort(h.substring(0, colon), port));
    }
    UnifiedJedis redis;
    if (scheme.equals("redis")) {
      if (nodes.size() != 1) {
        throw new IllegalArgumentException("'" + uri + "': redis:// takes one host:port; a"
            + " Redis Cluster is redis-cluster://host:port,...");
      }
      redis = new JedisPooled(nodes.iterator().next(), config.build());
    } else {
      redis = new JedisCluster(nodes, config.build());
    }
    return new Connection(redis, scheme + "://" + rest, params);
  }

  /** Reads Cluster pipelines' per-node replies: one pool for the process, daemon threads. */
  private static volatile java.util.concurrent.ExecutorService clusterSync;

  /**
   * A pipeline of {@code redis}: on a Cluster its per-node replies are read by one pool kept for
   * the process (Jedis' {@code pipelined()} starts and stops a pool of threads on every sync:
   * redis/jedis#4141; a step over a 3-master Cluster took 4x longer for it here).
   */
  public static redis.clients.jedis.AbstractPipeline pipelined(UnifiedJedis redis) {
    if (!(redis instanceof JedisCluster c)) {
      return redis.pipelined();
    }
    java.util.concurrent.ExecutorService e = clusterSync;
    if (e == null) {
      synchronized (RedisConnections.class) {
        e = clusterSync;
        if (e == null) {
          e = java.util.concurrent.Executors.newFixedThreadPool(3, r -> {
            Thread t = new Thread(r, "redis-cluster-pipeline-sync");
            t.setDaemon(true);
            return t;
          });
          clusterSync = e;
        }
      }
    }
    return c.pipelined(e);
  }

  /** Every key matching {@code pattern} (SCAN, over every node of a Cluster), as UTF-8 bytes. */
  public static void scanKeys(UnifiedJedis redis, byte[] pattern,
      java.util.function.Consumer<byte[]> out) {
    redis.clients.jedis.ScanIteration it =
        redis.scanIteration(1000, new String(pattern, StandardCharsets.UTF_8));
    while (!it.isIterationCompleted()) {
      for (String k : it.nextBatchList()) {
        out.accept(k.getBytes(StandardCharsets.UTF_8));
      }
    }
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }
}
