package dev.dynembed.table.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Cluster URIs and the map's entries: what parses, and what is refused by name. */
class ClusterAddressTest {
  @Test
  void etcdUris_parseIntoEndpointsAndName() {
    ClusterAddress a = ClusterAddress.parse("etcd://e1:2379,10.0.0.2:2379,[::1]:2379/prod-1.a_b/");
    assertEquals(List.of("e1:2379", "10.0.0.2:2379", "[::1]:2379"), a.etcd());
    assertEquals("prod-1.a_b", a.name());
    assertEquals("/dynembed/clusters/prod-1.a_b/shards/3", a.shardKey(3));
    assertEquals("/dynembed/clusters/prod-1.a_b/replicas/3/", a.replicasPrefix(3));
    assertEquals("/dynembed/clusters/prod-1.a_b/groups/3", a.groupKey(3));
    assertEquals("etcd://e1:2379,10.0.0.2:2379,[::1]:2379/prod-1.a_b", a.toString());
  }

  @Test
  void badUris_areRefusedNamingTheProblem() {
    String[][] cases = {
        {"redis://h:1/c", "etcd://host:port"},
        {"etcd://h:2379", "names no cluster"},
        {"etcd://h:2379/", "must be 1 to 128"},
        {"etcd://h:2379/a/b", "must be 1 to 128"},
        {"etcd://h:2379/x y", "must be 1 to 128"},
        {"etcd://h/c", "is not an etcd host:port"},
        {"etcd://h:0/c", "invalid port"},
        {"etcd://h:70000/c", "invalid port"},
        {"etcd://h:1,,g:2/c", "is not an etcd host:port"},
    };
    for (String[] c : cases) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> ClusterAddress.parse(c[0]), c[0]);
      assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
    }
    assertThrows(IllegalArgumentException.class, () -> ClusterAddress.parse(null));
  }

  @Test
  void entries_roundTrip_andForeignValuesAreNamed() {
    ClusterMember m = ClusterMember.of(1, 4, "h:7000", 7001, "m-1").withLsn(42);
    ClusterMember back = ClusterMember.decode("k", m.encode(), 9, 10, 11);
    assertEquals(1, back.index());
    assertEquals(4, back.numShards());
    assertEquals("h:7000", back.endpoint());
    assertEquals(7001, back.dataPort());
    assertEquals("m-1", back.member());
    assertEquals(42, back.lsn());
    assertEquals(m.pid(), back.pid());
    assertEquals(m.since(), back.since());
    assertEquals(9, back.lease());
    assertEquals(10, back.createRevision());
    ClusterException e = assertThrows(ClusterException.class, () -> ClusterMember.decode(
        "/dynembed/clusters/c/shards/0", "hello".getBytes(StandardCharsets.UTF_8), 0, 0, 0));
    assertTrue(e.getMessage().contains("/dynembed/clusters/c/shards/0")
        && e.getMessage().contains("written by something else"), e.getMessage());
  }
}
