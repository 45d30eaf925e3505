package dev.dynembed.table.cluster;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One shard process in the map: the value of {@code /dynembed/clusters/NAME/shards/INDEX}, held
 * under the process's lease (it disappears when the process stops renewing it). Stored as sorted
 * {@code key=value} lines, readable with {@code etcdctl get --prefix /dynembed/clusters/}.
 *
 * @param member the process's identity across restarts: kept in its state directory, so a
 *     restarted shard takes its index back at once instead of waiting for its old lease to expire
 * @param dataPort the native data plane's port, or -1 for none
 * @param lsn a follower's last log record (its progress; 0 for a primary's entry)
 * @param lease the etcd lease holding the key (0 before it is stored); {@code createRevision}
 *     orders registrations (the older of two conflicting ones wins)
 */
public record ClusterMember(int index, int numShards, String endpoint, int dataPort,
    String member, long pid, String host, Instant since, long lease, long createRevision,
    long modRevision, long lsn) {

  /** A member about to register (no lease or revisions yet). */
  public static ClusterMember of(int index, int numShards, String endpoint, int dataPort,
      String member) {
    String host;
    try {
      host = java.net.InetAddress.getLocalHost().getHostName();
    } catch (java.io.IOException e) {
      host = "unknown";
    }
    return new ClusterMember(index, numShards, endpoint, dataPort, member,
        ProcessHandle.current().pid(), host, Instant.now().truncatedTo(
            java.time.temporal.ChronoUnit.SECONDS), 0, 0, 0, 0);
  }

  byte[] encode() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("data_port", String.valueOf(dataPort));
    m.put("endpoint", endpoint);
    m.put("host", host);
    m.put("index", String.valueOf(index));
    if (lsn > 0) {
      m.put("lsn", String.valueOf(lsn));
    }
    m.put("member", member);
    m.put("num_shards", String.valueOf(numShards));
    m.put("pid", String.valueOf(pid));
    m.put("since", since.toString());
    StringBuilder b = new StringBuilder();
    m.forEach((k, v) -> b.append(k).append('=').append(v.replace('\n', ' ')).append('\n'));
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** A stored member; a value that is not one (written by something else) is named. */
  static ClusterMember decode(String key, byte[] value, long lease, long createRevision,
      long modRevision) {
    Map<String, String> m = new LinkedHashMap<>();
    for (String line : new String(value, StandardCharsets.UTF_8).split("\n")) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        m.put(line.substring(0, eq), line.substring(eq + 1));
      }
    }
    try {
      return new ClusterMember(Integer.parseInt(m.get("index")),
          Integer.parseInt(m.get("num_shards")), require(m, "endpoint"),
          Integer.parseInt(m.getOrDefault("data_port", "-1")), require(m, "member"),
          Long.parseLong(m.getOrDefault("pid", "0")), m.getOrDefault("host", "?"),
          Instant.parse(m.getOrDefault("since", "1970-01-01T00:00:00Z")), lease, createRevision,
          modRevision, Long.parseLong(m.getOrDefault("lsn", "0")));
    } catch (RuntimeException e) {
      throw new ClusterException("the etcd key " + key + " does not hold a shard's registration"
          + " (" + e.getMessage() + "): was it written by something else?", e);
    }
  }

  private static String require(Map<String, String> m, String k) {
    String v = m.get(k);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("no " + k);
    }
    return v;
  }

  /** "endpoint (member M, pid P on HOST)", for messages. */
  String describe() {
    return endpoint + " (member " + member + ", pid " + pid + " on " + host + ")";
  }

  /** This entry with the last log record its process holds (a follower's progress). */
  public ClusterMember withLsn(long lsn) {
    return new ClusterMember(index, numShards, endpoint, dataPort, member, pid, host, since,
        lease, createRevision, modRevision, lsn);
  }
}
