package dev.dynembed.table.cluster;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.lease.LeaseKeepAliveResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.support.CloseableClient;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A shard process's entry in its cluster's map (docs/design/0019-cluster-map.md): the key {@code
 * /dynembed/clusters/NAME/shards/INDEX} under a lease that this process keeps alive, so that the
 * entry disappears within the lease's TTL of the process's death and clients ({@code etcd://}) find
 * the shard wherever it runs.
 *
 * <p>Claims are etcd transactions: an index is taken only if nobody holds it, or if its holder is
 * this shard's own earlier process (the same member id, kept in the state directory, whose lock
 * proves that process is gone). A holder with another id is waited for up to its lease's TTL (a
 * killed process's entry outlives it by that much) and then named in the refusal. A shard whose
 * shard count differs from the cluster's live shards is refused, unless it joins the cluster
 * (its index is past every live shard's count: a shard added for {@code table-cli reshard}) or
 * slots have moved (the cluster's slot map in etcd then says who owns what, and the shards'
 * counts are only where they started); of two registered at once with different counts, the
 * later withdraws. If etcd loses the lease (unreachable for longer than the TTL), a watchdog
 * registers the shard again once etcd answers.
 *
 * <p>The shard's slot map is published in etcd ({@code slot-map}) whenever it installs a newer
 * one, from the watchdog's thread; etcd keeps the newest any shard published.
 */
public final class ShardRegistration implements AutoCloseable {
  private final ClusterAddress address;
  private final Client client;
  private final ClusterMember me;
  private final Duration ttl;
  private final Consumer<String> log;
  private final ScheduledExecutorService watchdog;
  /** Publishes the shard's slot map (null: none published). */
  private final SlotMapPublisher slotMap;
  private volatile long lease;
  private volatile CloseableClient keepAlive;
  private volatile boolean closed;

  private ShardRegistration(ClusterAddress address, Client client, ClusterMember me,
      Duration ttl, Consumer<String> log,
      java.util.function.Supplier<dev.dynembed.table.common.SlotMap> slotMap) {
    this.address = address;
    this.slotMap = slotMap == null ? null : new SlotMapPublisher(client, address, slotMap, log);
    this.client = client;
    this.me = me;
    this.ttl = ttl;
    this.log = log;
    this.watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "cluster-registration");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Registers {@code me} in the cluster at {@code address} and keeps it registered until {@link
   * #close}.
   *
   * @param ttl the lease: how long the entry outlives a dead process (at least 2 s)
   * @param log told of waits and re-registrations
   * @throws ClusterException naming the conflict (index taken by a live process, another shard
   *     count) or etcd's failure
   */
  public static ShardRegistration register(ClusterAddress address, ClusterMember me,
      Duration ttl, Consumer<String> log) {
    return register(address, me, ttl, log, null);
  }

  /**
   * As above, publishing the shard's slot map ({@code slotMap}: its current one) now, and again
   * after each {@link #slotMapChanged}.
   */
  public static ShardRegistration register(ClusterAddress address, ClusterMember me,
      Duration ttl, Consumer<String> log,
      java.util.function.Supplier<dev.dynembed.table.common.SlotMap> slotMap) {
    if (ttl.toSeconds() < 2) {
      throw new IllegalArgumentException("the cluster lease must be at least 2 s but was "
          + ttl.toMillis() + " ms");
    }
    Client client = Etcd.client(address);
    ShardRegistration r = new ShardRegistration(address, client, me, ttl, log, slotMap);
    try {
      r.claim();
      r.publish();
    } catch (RuntimeException e) {
      r.close();
      throw e;
    }
    long period = Math.max(500, ttl.toMillis() / 3);
    r.watchdog.scheduleWithFixedDelay(r::check, period, period, TimeUnit.MILLISECONDS);
    return r;
  }

  private void claim() {
    long l = Etcd.await(client.getLeaseClient().grant(ttl.toSeconds()), address,
        "granting a lease").getID();
    lease = l;
    keepAlive = client.getLeaseClient().keepAlive(l, keepAliveLog(l));
    ByteSequence key = Etcd.bytes(address.shardKey(me.index()));
    long waitUntil = System.nanoTime() + ttl.toNanos() + 2_000_000_000L;
    boolean told = false;
    while (true) {
      Etcd.Shards shards = Etcd.readShards(client, address);
      boolean moved = slotsMoved();
      checkLayout(shards, Long.MAX_VALUE, moved);
      ClusterMember holder = shards.members().get(me.index());
      Cmp unchanged;
      if (holder == null) {
        unchanged = new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(0));
      } else if (holder.member().equals(me.member()) && holder.lease() != l) {
        // this shard's earlier process (its state directory's lock says it is gone)
        unchanged = new Cmp(key, Cmp.Op.EQUAL, CmpTarget.modRevision(holder.modRevision()));
      } else if (holder.lease() == l) {
        break;
      } else if (System.nanoTime() < waitUntil) {
        if (!told) {
          log.accept(String.format("shard index %d of cluster %s is held by %s; waiting up to"
              + " %d s for its lease to expire", me.index(), address.name(), holder.describe(),
              ttl.toSeconds() + 2));
          told = true;
        }
        sleep(250);
        continue;
      } else {
        throw new ClusterException(String.format("shard index %d of cluster %s is held by %s,"
            + " which keeps its lease alive: two processes cannot serve one shard index; stop"
            + " that one or start this one with another --shard-index", me.index(),
            address.name(), holder.describe()));
      }
      boolean won = Etcd.await(client.getKVClient().txn().If(unchanged)
          .Then(Op.put(key, ByteSequence.from(me.encode()),
              PutOption.builder().withLeaseId(l).build()))
          .commit(), address, "claiming shard index " + me.index()).isSucceeded();
      if (won) {
        break;
      }
    }
    // two shards with different counts may have registered at once: the older one stays
    Etcd.Shards after = Etcd.readShards(client, address);
    ClusterMember mine = after.members().get(me.index());
    if (mine != null && mine.lease() == l) {
      try {
        checkLayout(after, mine.createRevision(), slotsMoved());
      } catch (ClusterException e) {
        Etcd.await(client.getKVClient().txn()
            .If(new Cmp(key, Cmp.Op.EQUAL, CmpTarget.modRevision(mine.modRevision())))
            .Then(Op.delete(key, DeleteOption.DEFAULT)).commit(), address,
            "withdrawing shard index " + me.index());
        throw e;
      }
    }
  }

  /** Whether the cluster's slot map in etcd shows that slots have moved (epoch above 0). */
  private boolean slotsMoved() {
    dev.dynembed.table.common.SlotMap m = Etcd.readSlotMap(client, address).map();
    return m != null && m.epoch() > 0;
  }

  /**
   * Refuses a layout that differs from a live shard's, one registered before {@code
   * beforeRevision} (MAX_VALUE: any). Once slots moved ({@code moved}), the shards' counts are
   * only where they started: nothing is refused. A shard whose index is past another's count
   * joins the cluster (started with a larger count to be given slots); it is not refused, nor
   * is a shard of the original count beside such a joiner.
   */
  private void checkLayout(Etcd.Shards shards, long beforeRevision, boolean moved) {
    checkLayout(address, me, shards.members().values(), beforeRevision, moved);
  }

  /**
   * The layout rule of {@link #checkLayout(Etcd.Shards, long, boolean)} for process {@code me}
   * among the cluster's registered shards {@code members} (a replicated group's process uses
   * it too).
   */
  static void checkLayout(ClusterAddress address, ClusterMember me,
      java.util.Collection<ClusterMember> members, long beforeRevision, boolean moved) {
    if (moved) {
      return;
    }
    for (ClusterMember m : members) {
      if (m.createRevision() >= beforeRevision || m.member().equals(me.member())) {
        continue;
      }
      boolean meJoins = me.numShards() > m.numShards() && me.index() >= m.numShards();
      boolean itJoins = m.numShards() > me.numShards() && m.index() >= me.numShards();
      if (m.numShards() != me.numShards() && !meJoins && !itJoins) {
        throw new ClusterException(String.format("cluster %s has %d shards (shard %d at %s"
            + " says so), but this shard was started with --num-shards %d: every shard of a"
            + " cluster must be started with the same count (to add a shard, start it with an"
            + " index past the cluster's shards, then run table-cli reshard; a new count for"
            + " every shard takes a new cluster name, or stopping every shard, then a restore)",
            address.name(), m.numShards(), m.index(), m.describe(), me.numShards()));
      }
      if (m.index() >= me.numShards() && !itJoins) {
        throw new ClusterException(String.format("cluster %s has a shard %d at %s, which a"
            + " cluster of %d shards cannot have", address.name(), m.index(), m.describe(),
            me.numShards()));
      }
    }
  }

  /** Publishes the shard's slot map soon (it installed a newer one), off the caller's thread. */
  public void slotMapChanged() {
    if (!closed && slotMap != null) {
      try {
        watchdog.execute(slotMap::publishQuietly);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closing
      }
    }
  }

  /** Publishes the shard's map if it moved slots and etcd has not seen it (or a newer one). */
  private void publish() {
    if (slotMap != null) {
      slotMap.publish();
    }
  }

  /** The watchdog: the entry is still ours, else claim it again (etcd lost the lease). */
  private void check() {
    if (closed) {
      return;
    }
    try {
      publish(); // a map installed while etcd did not answer
      ClusterMember now = Etcd.readShards(client, address).members().get(me.index());
      if (now != null && now.lease() == lease) {
        return;
      }
      log.accept(String.format("shard %d is no longer in the map of cluster %s (%s); registering"
          + " again", me.index(), address.name(), now == null ? "its lease expired while etcd"
          + " did not answer" : "now held by " + now.describe()));
      CloseableClient old = keepAlive;
      if (old != null) {
        old.close();
      }
      long oldLease = lease;
      client.getLeaseClient().revoke(oldLease); // if etcd still has it; not waited for
      claim();
      log.accept(String.format("shard %d registered again in cluster %s", me.index(),
          address.name()));
    } catch (RuntimeException e) {
      log.accept("cluster " + address.name() + ": " + e.getMessage() + " (trying again)");
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ClusterException("interrupted while waiting for a shard index", e);
    }
  }

  /** Leaves the map at once (the lease is revoked, so the entry goes with it). */
  @Override
  public void close() {
    closed = true;
    watchdog.shutdownNow();
    CloseableClient k = keepAlive;
    if (k != null) {
      k.close();
    }
    Etcd.leave(client, lease);
  }

  /**
   * The keep-alive stream's end (etcd out of reach, the lease revoked) is not an error by itself:
   * the watchdog checks the entry and registers again if it lapsed. Logged, so that an operator
   * sees when the shard lost its lease's heartbeat.
   */
  private StreamObserver<LeaseKeepAliveResponse> keepAliveLog(long lease) {
    return new StreamObserver<>() {
      @Override
      public void onNext(LeaseKeepAliveResponse r) {}

      @Override
      public void onError(Throwable t) {
        log.accept(String.format("shard %d of cluster %s: the keep-alive of lease %x ended"
            + " (%s); the watchdog registers again if the entry lapses", me.index(),
            address.name(), lease, t));
      }

      @Override
      public void onCompleted() {}
    };
  }
}
