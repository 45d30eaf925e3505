package dev.dynembed.table.cluster;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.lease.LeaseKeepAliveResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * One process of a replicated shard group (docs/design/0019-cluster-map.md): the processes of one
 * shard index, one primary and its followers, agree through etcd on who leads.
 *
 * <p>Keys, under {@code /dynembed/clusters/NAME/}:
 * <ul>
 *   <li>{@code shards/I}: the primary's entry (under its lease), the one clients follow;
 *   <li>{@code replicas/I/MEMBER}: every process of the group (under its lease), with its last
 *       log record;
 *   <li>{@code groups/I}: the group's record, without a lease: its epoch, its primary and the
 *       followers in sync (those holding every record the primary acknowledged).
 * </ul>
 *
 * <p>When {@code shards/I} is empty (no process, or the primary's lease expired), a process may
 * take it only if the group record names it as the last primary or as in sync (a process that
 * missed acknowledged writes never leads), and only if no other such live process has more of the
 * log; it takes it in one transaction that also raises the epoch, so two never both win. A new
 * group (no record yet) goes to its process with the longest log. A primary that finds its entry
 * gone or taken, or whose last successful lease renewal was sent 90% of a TTL ago, is deposed:
 * {@link Roles#deposed}.
 */
public final class ShardGroup implements AutoCloseable {
  /** What the process does in each role; called on the group's thread. */
  public interface Roles {
    /** Lead as the primary of {@code epoch}: take calls, ship the log to followers. */
    void lead(long epoch);

    /** Follow {@code primary} of {@code epoch}; called again whenever the primary changes. */
    void follow(ClusterMember primary, long epoch);

    /** This process no longer leads (another does, or it may): it must stop serving at once. */
    void deposed(String why);
  }

  /** The group's record: its epoch, last primary and in-sync followers (member ids). */
  public record Record(long epoch, String primary, Set<String> inSync, long modRevision) {
    byte[] encode() {
      return ("epoch=" + epoch + "\nprimary=" + primary + "\nin_sync=" + String.join(",", inSync)
          + "\n").getBytes(StandardCharsets.UTF_8);
    }

    static Record decode(KeyValue kv) {
      java.util.Map<String, String> m = new java.util.HashMap<>();
      for (String line : kv.getValue().toString(StandardCharsets.UTF_8).split("\n")) {
        int eq = line.indexOf('=');
        if (eq > 0) {
          m.put(line.substring(0, eq), line.substring(eq + 1));
        }
      }
      Set<String> in = new LinkedHashSet<>();
      for (String s : m.getOrDefault("in_sync", "").split(",")) {
        if (!s.isBlank()) {
          in.add(s);
        }
      }
      return new Record(Long.parseLong(m.getOrDefault("epoch", "0")),
          m.getOrDefault("primary", ""), in, kv.getModRevision());
    }
  }

  private final ClusterAddress address;
  private final Client client;
  private final ClusterMember me;
  private final Duration ttl;
  private final Roles roles;
  private final LongSupplier lastLsn;
  private final Consumer<String> log;
  /** Publishes the shard's slot map (null: not published). */
  private final SlotMapPublisher slotMap;
  private final Thread thread;
  private final Object lock = new Object();
  private volatile long lease;
  /**
   * System.nanoTime when the last successful renewal was sent: etcd's expiry is at least a TTL
   * after it, so until then (less a margin for clock rates) no other process can lead.
   */
  private volatile long keptAliveAt;
  private final Thread renewer;
  private volatile boolean closed;
  // under lock
  private boolean leading;
  private long epoch;
  private long recordRevision; // the group record's modRevision as this primary last wrote it
  private Set<String> inSync = Set.of();

  private ShardGroup(ClusterAddress address, Client client, ClusterMember me, Duration ttl,
      Roles roles, LongSupplier lastLsn, Consumer<String> log,
      java.util.function.Supplier<dev.dynembed.table.common.SlotMap> slotMap) {
    this.slotMap = slotMap == null ? null : new SlotMapPublisher(client, address, slotMap, log);
    this.address = address;
    this.client = client;
    this.me = me;
    this.ttl = ttl;
    this.roles = roles;
    this.lastLsn = lastLsn;
    this.log = log;
    this.thread = new Thread(this::run, "shard-group-" + me.index());
    this.thread.setDaemon(true);
    this.renewer = new Thread(this::renew, "lease-" + me.index());
    this.renewer.setDaemon(true);
  }

  /**
   * Joins the group of shard {@code me.index()}; {@link #start} then starts deciding this
   * process's role, each decision told to {@code roles} on the group's thread.
   *
   * @param lastLsn this process's last log record (its claim to lead)
   */
  public static ShardGroup join(ClusterAddress address, ClusterMember me, Duration ttl,
      Roles roles, LongSupplier lastLsn, Consumer<String> log) {
    return join(address, me, ttl, roles, lastLsn, log, null);
  }

  /**
   * As above, also publishing the shard's slot map ({@code slotMap}: the one it routes by now)
   * in the cluster's slot-map key whenever it is newer than etcd's, as an unreplicated shard's
   * registration does (clients of {@code etcd://} start from it and follow it).
   */
  public static ShardGroup join(ClusterAddress address, ClusterMember me, Duration ttl,
      Roles roles, LongSupplier lastLsn, Consumer<String> log,
      java.util.function.Supplier<dev.dynembed.table.common.SlotMap> slotMap) {
    if (ttl.toSeconds() < 2) {
      throw new IllegalArgumentException("the cluster lease must be at least 2 s but was "
          + ttl.toMillis() + " ms");
    }
    Client client = Etcd.client(address);
    ShardGroup g = new ShardGroup(address, client, me, ttl, roles, lastLsn, log, slotMap);
    try {
      g.grant();
      g.checkLayout();
      g.publish();
    } catch (RuntimeException e) {
      g.close();
      throw e;
    }
    return g;
  }

  /** Starts the group's threads: elections and watching the primary; renewing the lease. */
  public void start() {
    renewer.start();
    thread.start();
  }

  private void grant() {
    long sent = System.nanoTime();
    long l = Etcd.await(client.getLeaseClient().grant(ttl.toSeconds()), address,
        "granting a lease").getID();
    keptAliveAt = sent;
    lease = l;
  }

  /**
   * Renews the lease every quarter TTL, one call at a time, noting when each successful call
   * was sent (jetcd's keep-alive stream does not say, and its answers arrive late on a loaded
   * machine: a primary must count from the send).
   */
  private void renew() {
    while (!closed) {
      long l = lease;
      long sent = System.nanoTime();
      try {
        LeaseKeepAliveResponse r = client.getLeaseClient().keepAliveOnce(l)
            .get(ttl.toMillis(), TimeUnit.MILLISECONDS);
        if (r.getTTL() > 0 && l == lease) {
          keptAliveAt = Math.max(keptAliveAt, sent);
        }
      } catch (InterruptedException e) {
        return;
      } catch (Exception e) {
        // etcd unreachable or the lease gone: the validity runs out by itself
      }
      try {
        Thread.sleep(Math.max(100, ttl.toMillis() / 4));
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /**
   * The cluster's layout rule ({@link ShardRegistration}): every live shard of this process's
   * count, except a group added past the others' count to be given slots; once slots moved, the
   * counts are only where the shards started and are not compared. The processes of one group
   * agree on it until then.
   */
  private void checkLayout() {
    dev.dynembed.table.common.SlotMap published = Etcd.readSlotMap(client, address).map();
    boolean moved = published != null && published.epoch() > 0;
    ShardRegistration.checkLayout(address, me, Etcd.readShards(client, address).members()
        .values(), Long.MAX_VALUE, moved);
    if (moved) {
      return;
    }
    for (ClusterMember m : replicas()) {
      if (m.numShards() != me.numShards()) {
        throw new ClusterException(String.format("shard %d of cluster %s has a process at %s"
            + " started with --num-shards %d, but this one was started with %d",
            me.index(), address.name(), m.describe(), m.numShards(), me.numShards()));
      }
    }
  }

  /** Writes this process's entry under {@code replicas/I/} with its last log record. */
  private void publish() {
    Etcd.await(client.getKVClient().put(Etcd.bytes(address.replicasPrefix(me.index())
        + me.member()), ByteSequence.from(me.withLsn(lastLsn.getAsLong()).encode()),
        PutOption.builder().withLeaseId(lease).build()), address, "registering a replica");
  }

  private List<ClusterMember> replicas() {
    List<ClusterMember> out = new ArrayList<>();
    for (KeyValue kv : Etcd.await(client.getKVClient().get(
        Etcd.bytes(address.replicasPrefix(me.index())), GetOption.builder().isPrefix(true)
            .build()), address, "reading the group's processes").getKvs()) {
      out.add(Etcd.member(kv));
    }
    return out;
  }

  private ClusterMember primaryEntry() {
    List<KeyValue> kvs = Etcd.await(client.getKVClient().get(
        Etcd.bytes(address.shardKey(me.index()))), address, "reading the primary").getKvs();
    return kvs.isEmpty() ? null : Etcd.member(kvs.get(0));
  }

  /** The group's record, or null for a group that never had a primary. */
  public Record record() {
    List<KeyValue> kvs = Etcd.await(client.getKVClient().get(
        Etcd.bytes(address.groupKey(me.index()))), address, "reading the group").getKvs();
    return kvs.isEmpty() ? null : Record.decode(kvs.get(0));
  }

  private void run() {
    long followingLease = 0;
    long vacantSince = 0;
    boolean toldWaiting = false;
    long lastPublish = 0;
    while (!closed) {
      try {
        if (slotMap != null) {
          // a flip's map reaches etcd within a turn of this loop; a failure is tried on the next
          slotMap.publishQuietly();
        }
        boolean lead;
        synchronized (lock) {
          lead = leading;
        }
        ClusterMember primary = primaryEntry();
        if (lead) {
          if (primary == null || primary.lease() != lease) {
            depose(primary == null ? "its entry in etcd is gone (lease expired)"
                : "shard " + me.index() + " is now led by " + primary.describe());
            return;
          }
          if (!leaseValid()) {
            depose("its lease was not renewed within " + ttl.toMillis() * 9 / 10 + " ms");
            return;
          }
          sleep(Math.max(200, ttl.toMillis() / 6));
          continue;
        }
        if (System.nanoTime() - keptAliveAt > ttl.toNanos()) {
          // not renewed for a whole TTL (this process was paused, or etcd unreachable): the
          // lease may be gone, and with it this process's entry; a new one
          log.accept("shard " + me.index() + ": the lease was not renewed for "
              + ttl.toSeconds() + " s; taking a new one");
          client.getLeaseClient().revoke(lease);
          grant();
          lastPublish = 0;
        }
        if (System.nanoTime() - lastPublish > 2_000_000_000L) {
          publish(); // progress for operators and for elections
          lastPublish = System.nanoTime();
        }
        boolean mineStale = primary != null && primary.member().equals(me.member())
            && primary.lease() != lease; // this member's earlier process: gone (state lock)
        if (primary != null && !mineStale) {
          vacantSince = 0;
          toldWaiting = false;
          if (primary.lease() != followingLease) {
            // a new primary: its claim wrote its entry and the group record in one transaction,
            // so the record read now holds its epoch
            Record rec = record();
            followingLease = primary.lease();
            roles.follow(primary, rec == null ? 0 : rec.epoch());
          }
          sleep(250);
          continue;
        }
        // no primary: an election
        if (vacantSince == 0) {
          vacantSince = System.nanoTime();
          publish(); // this process's log length, for the others to compare
          lastPublish = System.nanoTime();
          sleep(500); // the others publish theirs
          continue;
        }
        Record rec = record();
        String why = mayLead(rec, System.nanoTime() - vacantSince > 3 * ttl.toNanos());
        if (why == null && claim(rec, mineStale ? primary.modRevision() : 0)) {
          followingLease = 0;
          continue;
        }
        if (why != null && !toldWaiting) {
          log.accept("shard " + me.index() + " has no primary; this process waits: " + why);
          toldWaiting = true;
        }
        sleep(250);
      } catch (ClusterException e) {
        boolean lead;
        synchronized (lock) {
          lead = leading;
        }
        if (lead && !leaseValid()) {
          depose("etcd did not answer and the lease may have expired (" + e.getMessage() + ")");
          return;
        }
        log.accept("cluster " + address.name() + ": " + e.getMessage() + " (trying again)");
        sleep(1000);
      } catch (RuntimeException e) {
        log.accept("cluster " + address.name() + ": " + e + " (trying again)");
        sleep(1000);
      }
    }
  }

  /** Why this process may not lead now, or null if it may. */
  private String mayLead(Record rec, boolean waitedLong) {
    long mine = lastLsn.getAsLong();
    List<ClusterMember> live = replicas();
    if (rec != null && !rec.primary().equals(me.member()) && !rec.inSync().contains(me.member())) {
      return "it is not in sync with the last primary of epoch " + rec.epoch() + " (in sync: "
          + (rec.inSync().isEmpty() ? "none" : String.join(", ", rec.inSync())) + "; last"
          + " primary " + rec.primary() + "): it may lack acknowledged writes";
    }
    if (waitedLong) {
      return null; // a better candidate did not take it: this one does
    }
    for (ClusterMember m : live) {
      if (m.member().equals(me.member())) {
        continue;
      }
      boolean eligible = rec == null || rec.primary().equals(m.member())
          || rec.inSync().contains(m.member());
      if (eligible && (m.lsn() > mine || (m.lsn() == mine
          && m.member().compareTo(me.member()) < 0))) {
        return m.describe() + " holds more of the log (" + m.lsn() + " vs " + mine + ")";
      }
    }
    return null;
  }

  /** Takes the primary's entry and raises the epoch in one transaction; whether it won. */
  private boolean claim(Record rec, long staleModRevision) {
    ByteSequence pk = Etcd.bytes(address.shardKey(me.index()));
    ByteSequence gk = Etcd.bytes(address.groupKey(me.index()));
    long next = (rec == null ? 0 : rec.epoch()) + 1;
    Record mine = new Record(next, me.member(), Set.of(), 0);
    TxnResponse r = Etcd.await(client.getKVClient().txn().If(
            staleModRevision == 0 ? new Cmp(pk, Cmp.Op.EQUAL, CmpTarget.createRevision(0))
                : new Cmp(pk, Cmp.Op.EQUAL, CmpTarget.modRevision(staleModRevision)),
            rec == null ? new Cmp(gk, Cmp.Op.EQUAL, CmpTarget.createRevision(0))
                : new Cmp(gk, Cmp.Op.EQUAL, CmpTarget.modRevision(rec.modRevision())))
        .Then(Op.put(pk, ByteSequence.from(me.encode()),
                PutOption.builder().withLeaseId(lease).build()),
            Op.put(gk, ByteSequence.from(mine.encode()), PutOption.DEFAULT))
        .commit(), address, "taking the lead of shard " + me.index());
    if (!r.isSucceeded()) {
      return false;
    }
    synchronized (lock) {
      leading = true;
      epoch = next;
      recordRevision = r.getHeader().getRevision();
      inSync = Set.of();
    }
    log.accept(String.format("shard %d: this process leads, epoch %d (log at record %d)",
        me.index(), next, lastLsn.getAsLong()));
    roles.lead(next);
    return true;
  }

  /**
   * Records the followers in sync (a primary's call): a follower is added once it holds the log
   * to a recent record, and removed before any write is acknowledged without it. Fails with a
   * {@link ClusterException} (and deposes this process) if the group's record changed under it.
   */
  public void inSync(Set<String> members) {
    synchronized (lock) {
      if (!leading) {
        throw new ClusterException("shard " + me.index() + ": this process does not lead");
      }
      if (members.equals(inSync)) {
        return;
      }
      ByteSequence gk = Etcd.bytes(address.groupKey(me.index()));
      Record next = new Record(epoch, me.member(), new LinkedHashSet<>(members), 0);
      TxnResponse r = Etcd.await(client.getKVClient().txn()
          .If(new Cmp(gk, Cmp.Op.EQUAL, CmpTarget.modRevision(recordRevision)))
          .Then(Op.put(gk, ByteSequence.from(next.encode()), PutOption.DEFAULT)).commit(),
          address, "recording the followers in sync");
      if (!r.isSucceeded()) {
        leading = false;
        roles.deposed("the record of shard " + me.index() + " changed under this primary");
        throw new ClusterException("shard " + me.index() + ": deposed (the group record"
            + " changed)");
      }
      recordRevision = r.getHeader().getRevision();
      inSync = Set.copyOf(members);
    }
  }

  /**
   * Whether this process may still act as primary: a renewal of its lease sent less than 90% of
   * the TTL ago succeeded, so etcd has not let it expire and given the lead away (the 10% cover
   * clocks that run at different rates).
   */
  public boolean leaseValid() {
    return System.nanoTime() - keptAliveAt < ttl.toNanos() * 9 / 10;
  }

  private void depose(String why) {
    synchronized (lock) {
      if (!leading) {
        return;
      }
      leading = false;
    }
    log.accept("shard " + me.index() + ": this process no longer leads: " + why);
    roles.deposed(why);
  }

  private void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      closed = true;
    }
  }

  /** The group records of a cluster (operators), by shard index. */
  static TreeMap<Integer, Record> records(Client client, ClusterAddress address) {
    TreeMap<Integer, Record> out = new TreeMap<>();
    for (KeyValue kv : Etcd.await(client.getKVClient().get(Etcd.bytes(address.groupsPrefix()),
        GetOption.builder().isPrefix(true).build()), address, "reading the groups").getKvs()) {
      String k = kv.getKey().toString(StandardCharsets.UTF_8);
      try {
        out.put(Integer.parseInt(k.substring(address.groupsPrefix().length())), Record.decode(kv));
      } catch (NumberFormatException ignored) {
        // not a group's key
      }
    }
    return out;
  }

  /** Every process of a cluster's groups (operators). */
  static List<ClusterMember> allReplicas(Client client, ClusterAddress address) {
    List<ClusterMember> out = new ArrayList<>();
    String prefix = address.replicasPrefix(0);
    prefix = prefix.substring(0, prefix.length() - "0/".length());
    for (KeyValue kv : Etcd.await(client.getKVClient().get(Etcd.bytes(prefix),
        GetOption.builder().isPrefix(true).build()), address, "reading the replicas").getKvs()) {
      out.add(Etcd.member(kv));
    }
    return out;
  }

  /** Leaves the group: the lease is revoked, so this process's entries go at once. */
  @Override
  public void close() {
    closed = true;
    thread.interrupt();
    renewer.interrupt();
    Etcd.leave(client, lease);
  }

}
