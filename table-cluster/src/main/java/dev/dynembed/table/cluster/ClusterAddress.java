package dev.dynembed.table.cluster;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a cluster's shard map lives: {@code etcd://host:port[,host:port...]/CLUSTER}, the etcd
 * members to ask and the cluster's name (its keys are under {@code /dynembed/clusters/CLUSTER/}).
 */
public record ClusterAddress(List<String> etcd, String name) {
  public static final String SCHEME = "etcd";
  private static final String ROOT = "/dynembed/clusters/";

  public ClusterAddress {
    etcd = List.copyOf(etcd);
  }

  /** Parses {@code etcd://host:port[,host:port...]/CLUSTER}; names what is wrong otherwise. */
  public static ClusterAddress parse(String uri) {
    String usage = "a cluster is etcd://host:port[,host:port...]/CLUSTER";
    if (uri == null || !uri.startsWith(SCHEME + "://")) {
      throw new IllegalArgumentException(usage + " but was '" + uri + "'");
    }
    String rest = uri.substring((SCHEME + "://").length());
    int slash = rest.indexOf('/');
    if (slash < 0) {
      throw new IllegalArgumentException(usage + ": '" + uri + "' names no cluster");
    }
    String name = rest.substring(slash + 1);
    if (name.endsWith("/")) {
      name = name.substring(0, name.length() - 1);
    }
    if (!name.matches("[A-Za-z0-9._-]{1,128}")) {
      throw new IllegalArgumentException("the cluster name in '" + uri + "' must be 1 to 128"
          + " letters, digits, '.', '_' or '-' but was '" + name + "'");
    }
    List<String> hosts = new ArrayList<>();
    for (String h : rest.substring(0, slash).split(",")) {
      String e = h.trim();
      if (!e.matches("[A-Za-z0-9.\\-]+:\\d{1,5}|\\[[0-9A-Fa-f:.]+\\]:\\d{1,5}")) {
        throw new IllegalArgumentException(usage + ": '" + e + "' in '" + uri
            + "' is not an etcd host:port");
      }
      int port = Integer.parseInt(e.substring(e.lastIndexOf(':') + 1));
      if (port < 1 || port > 65535) {
        throw new IllegalArgumentException("etcd endpoint '" + e + "' has an invalid port");
      }
      hosts.add(e);
    }
    return new ClusterAddress(hosts, name);
  }

  /** The etcd endpoints as the client's URIs. */
  URI[] uris() {
    return etcd.stream().map(e -> URI.create("http://" + e)).toArray(URI[]::new);
  }

  /** The prefix of the shards' keys: {@code /dynembed/clusters/NAME/shards/}. */
  String shardsPrefix() {
    return ROOT + name + "/shards/";
  }

  /** The prefix of shard {@code index}'s processes (primary and followers) of a replicated group. */
  String replicasPrefix(int index) {
    return ROOT + name + "/replicas/" + index + "/";
  }

  /** The group record of shard {@code index} (epoch, primary, in-sync followers): no lease. */
  String groupKey(int index) {
    return ROOT + name + "/groups/" + index;
  }

  /** The prefix of every group record. */
  String groupsPrefix() {
    return ROOT + name + "/groups/";
  }

  /**
   * The cluster's slot map (docs/design/0021-slot-moves-proposal.md): the newest map a shard
   * installed, as its protobuf; absent while no slot moved. No lease.
   */
  String slotMapKey() {
    return ROOT + name + "/slot-map";
  }

  /** The key of shard {@code index}. */
  String shardKey(int index) {
    return shardsPrefix() + index;
  }

  @Override
  public String toString() {
    return SCHEME + "://" + String.join(",", etcd) + "/" + name;
  }
}
