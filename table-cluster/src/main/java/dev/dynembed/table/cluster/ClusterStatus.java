package dev.dynembed.table.cluster;

import io.etcd.jetcd.Client;
import io.etcd.jetcd.options.LeaseOption;
import java.util.ArrayList;
import java.util.List;

/** What a cluster's map holds now, for operators ({@code table-cli cluster}). */
public record ClusterStatus(ClusterAddress address, List<Entry> shards,
    java.util.Map<Integer, ShardGroup.Record> groups, List<ClusterMember> replicas,
    dev.dynembed.table.common.SlotMap slotMap) {
  /**
   * A registered shard and the seconds left on its lease (-1 if etcd would not say): a dead
   * process's entry is still listed until that reaches 0.
   */
  public record Entry(ClusterMember member, long leaseSecondsLeft) {}

  /** Reads the map once. */
  public static ClusterStatus read(ClusterAddress address) {
    try (Client client = Etcd.client(address)) {
      List<Entry> out = new ArrayList<>();
      for (ClusterMember m : Etcd.readShards(client, address).members().values()) {
        long ttl = -1;
        try {
          ttl = Etcd.await(client.getLeaseClient().timeToLive(m.lease(), LeaseOption.DEFAULT),
              address, "reading a lease").getTTL();
        } catch (ClusterException e) {
          // shown as unknown
        }
        out.add(new Entry(m, ttl));
      }
      return new ClusterStatus(address, out, ShardGroup.records(client, address),
          ShardGroup.allReplicas(client, address), Etcd.readSlotMap(client, address).map());
    }
  }

  /**
   * Deletes the group record of shard {@code index} (operators, after losing every process that
   * could lead it: the last primary and its followers in sync, with their disks). Its remaining
   * processes then elect the one with the longest log, accepting that writes answered by the
   * lost ones may be missing. Refused while the shard has a live primary.
   *
   * @return whether a record was deleted
   */
  public static boolean forgetGroup(ClusterAddress address, int index) {
    try (Client client = Etcd.client(address)) {
      io.etcd.jetcd.ByteSequence pk = Etcd.bytes(address.shardKey(index));
      io.etcd.jetcd.ByteSequence gk = Etcd.bytes(address.groupKey(index));
      io.etcd.jetcd.kv.TxnResponse r = Etcd.await(client.getKVClient().txn()
          .If(new io.etcd.jetcd.op.Cmp(pk, io.etcd.jetcd.op.Cmp.Op.EQUAL,
              io.etcd.jetcd.op.CmpTarget.createRevision(0)))
          .Then(io.etcd.jetcd.op.Op.delete(gk, io.etcd.jetcd.options.DeleteOption.DEFAULT))
          .commit(), address, "forgetting the group of shard " + index);
      if (!r.isSucceeded()) {
        throw new ClusterException("shard " + index + " of cluster " + address.name()
            + " has a live primary: its group record is in use");
      }
      return r.getDeleteResponses().stream().anyMatch(d -> d.getDeleted() > 0);
    }
  }

  /**
   * The cluster's shard count: those its published slot map names once slots moved, else that of
   * its oldest registered shard (0: none registered).
   */
  public int numShards() {
    if (slotMap != null && !shards.isEmpty()) {
      return slotMap.numShards();
    }
    return shards.stream().min(java.util.Comparator.comparingLong(
        e -> e.member().createRevision())).map(e -> e.member().numShards()).orElse(0);
  }

  /** A table of the shards, with a line for every index of the layout that is not registered. */
  public String format() {
    StringBuilder b = new StringBuilder();
    int n = numShards();
    b.append(String.format("cluster %s (etcd %s): %s%n", address.name(),
        String.join(",", address.etcd()), n == 0 ? "no shard registered"
            : n + " shards, " + shards.size() + " registered"));
    if (n == 0) {
      return b.toString();
    }
    b.append(String.format("%-6s %-22s %-6s %-36s %-8s %-16s %-20s %s%n", "shard", "endpoint",
        "data", "member", "pid", "host", "since", "lease"));
    java.util.Map<Integer, Entry> byIndex = new java.util.TreeMap<>();
    for (Entry e : shards) {
      byIndex.put(e.member().index(), e);
    }
    for (int i = 0; i < Math.max(n, byIndex.isEmpty() ? 0 : ((java.util.TreeMap<Integer, Entry>)
        byIndex).lastKey() + 1); i++) {
      Entry e = byIndex.get(i);
      if (e == null) {
        b.append(String.format("%-6d (not registered)%n", i));
        continue;
      }
      ClusterMember m = e.member();
      b.append(String.format("%-6d %-22s %-6s %-36s %-8d %-16s %-20s %s%s%n", i, m.endpoint(),
          m.dataPort() < 0 ? "-" : String.valueOf(m.dataPort()), m.member(), m.pid(), m.host(),
          m.since(), e.leaseSecondsLeft() < 0 ? "?" : e.leaseSecondsLeft() + " s",
          m.numShards() != n && slotMap == null ? "  (registered as one of " + m.numShards()
              + " shards!)" : ""));
    }
    if (slotMap != null) {
      StringBuilder owners = new StringBuilder();
      for (int s = 0; s < slotMap.numShards(); s++) {
        owners.append(s == 0 ? "" : ", ").append(s).append(": ").append(slotMap.slotsOf(s));
      }
      b.append(String.format("slot map epoch %d: %d slots (shard: slots owned) %s%n",
          slotMap.epoch(), slotMap.slots(), owners));
    }
    if (!groups.isEmpty() || !replicas.isEmpty()) {
      b.append(String.format("%nreplicated groups:%n%-6s %-6s %-8s %-22s %-36s %s%n", "shard",
          "epoch", "role", "endpoint", "member", "log"));
      java.util.Map<Integer, List<ClusterMember>> byShard = new java.util.TreeMap<>();
      for (ClusterMember m : replicas) {
        byShard.computeIfAbsent(m.index(), k -> new ArrayList<>()).add(m);
      }
      java.util.Set<Integer> all = new java.util.TreeSet<>(byShard.keySet());
      all.addAll(groups.keySet());
      for (int i : all) {
        ShardGroup.Record g = groups.get(i);
        for (ClusterMember m : byShard.getOrDefault(i, List.of())) {
          String role = g == null ? "joining" : m.member().equals(g.primary()) ? "primary"
              : g.inSync().contains(m.member()) ? "in-sync" : "behind";
          b.append(String.format("%-6d %-6s %-8s %-22s %-36s %s%n", i,
              g == null ? "-" : String.valueOf(g.epoch()), role, m.endpoint(), m.member(),
              role.equals("primary") ? "-" : "record " + m.lsn()));
        }
        if (g != null) {
          for (String s : g.inSync()) {
            if (byShard.getOrDefault(i, List.of()).stream().noneMatch(
                m -> m.member().equals(s))) {
              b.append(String.format("%-6d %-6d %-8s %-22s %-36s %s%n", i, g.epoch(), "in-sync",
                  "(not running)", s, "-"));
            }
          }
        }
      }
    }
    return b.toString();
  }
}
