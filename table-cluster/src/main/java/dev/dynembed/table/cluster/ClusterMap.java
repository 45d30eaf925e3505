package dev.dynembed.table.cluster;

import io.etcd.jetcd.Client;
import io.etcd.jetcd.Watch;
import io.etcd.jetcd.options.WatchOption;
import io.etcd.jetcd.watch.WatchEvent;
import io.etcd.jetcd.watch.WatchResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Logger;

/**
 * A client's view of a cluster's shard map (docs/design/0019-cluster-map.md): read from etcd
 * when opened, then kept current by watches on {@code /dynembed/clusters/NAME/shards/} and on the
 * cluster's slot map ({@code slot-map}, published by the shards once slots moved: design 0021).
 * {@link #numShards} is what a client starts with: the shards that own slots in the published
 * map, or before any slot moved the count of the cluster's oldest live shard. Shards registered
 * past it (added to the cluster) are followed too, for when a slot map gives them slots.
 *
 * <p>A shard's last known address is kept after its entry goes (its process died and its lease
 * expired): a process restarted on the same address serves again before it registers, and one
 * restarted elsewhere is followed as soon as it registers. Before any slot moved, an entry of
 * another shard count at an index below the cluster's count (the cluster was restarted with more
 * or fewer shards) is not followed: calls to that index fail with a message saying so.
 */
public final class ClusterMap implements AutoCloseable {
  private static final Logger log = Logger.getLogger(ClusterMap.class.getName());

  private final ClusterAddress address;
  private final Client client;
  private final int numShards;
  private final Map<Integer, ClusterMember> current = new ConcurrentHashMap<>();
  private final Map<Integer, List<Runnable>> listeners = new ConcurrentHashMap<>();
  /** The cluster's published slot map (null: no slot moved yet). */
  private volatile dev.dynembed.table.common.SlotMap slotMap;
  private volatile Watch.Watcher watcher;
  private volatile Watch.Watcher slotMapWatcher;
  private volatile boolean closed;

  private ClusterMap(ClusterAddress address, Client client, Etcd.Shards shards,
      Etcd.PublishedSlotMap published) {
    this.address = address;
    this.client = client;
    ClusterMember oldest = shards.members().values().stream()
        .min(java.util.Comparator.comparingLong(ClusterMember::createRevision)).orElseThrow();
    adopt(published.map());
    this.numShards = slotMap != null ? slotMap.shardsInUse() : oldest.numShards();
    for (ClusterMember member : shards.members().values()) {
      apply(member);
    }
    watch(shards.revision() + 1);
    watchSlotMap(shards.revision() + 1);
  }

  /**
   * Reads the map of the cluster at {@code address}, waiting up to {@code waitFor} for its first
   * shard to register.
   *
   * @throws ClusterException etcd does not answer, or no shard registered in time
   */
  public static ClusterMap open(ClusterAddress address, Duration waitFor) {
    Client client = Etcd.client(address);
    try {
      long deadline = System.nanoTime() + waitFor.toNanos();
      while (true) {
        Etcd.Shards shards = Etcd.readShards(client, address);
        if (!shards.members().isEmpty()) {
          return new ClusterMap(address, client, shards, Etcd.readSlotMap(client, address));
        }
        if (System.nanoTime() >= deadline) {
          throw new ClusterException(String.format("no shard of cluster %s is registered in"
              + " etcd at %s (waited %d s): start the shards with table-server --cluster %s",
              address.name(), String.join(",", address.etcd()), waitFor.toSeconds(), address));
        }
        Thread.sleep(200);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      client.close();
      throw new ClusterException("interrupted while reading the map of cluster "
          + address.name(), e);
    } catch (RuntimeException e) {
      client.close();
      throw e;
    }
  }

  public ClusterAddress address() {
    return address;
  }

  /** The shards a client of this view starts with (see the class comment). */
  public int numShards() {
    return numShards;
  }

  /** The slot map the shards published when slots moved (null: none moved yet). */
  public dev.dynembed.table.common.SlotMap slotMap() {
    return slotMap;
  }

  /** Shard {@code index}'s last known entry (null: never registered while this view watched). */
  public ClusterMember member(int index) {
    return current.get(index);
  }

  /** Why shard {@code index}'s entry is not followed (another layout), or null. */
  public String refusal(int index) {
    ClusterMember m = current.get(index);
    if (m == null || slotMap != null || index >= numShards || m.numShards() == numShards
        || m.numShards() > numShards && m.index() >= numShards) {
      return null;
    }
    return String.format("shard %d of cluster %s is now %s, registered as one of %d shards, but"
        + " this client routes keys over %d: open a new client", m.index(), address.name(),
        m.describe(), m.numShards(), numShards);
  }

  /**
   * Waits up to {@code waitFor} for shard {@code index} to register (a shard added to the
   * cluster).
   *
   * @throws ClusterException it did not
   */
  public ClusterMember awaitMember(int index, java.time.Duration waitFor) {
    long deadline = System.nanoTime() + waitFor.toNanos();
    while (current.get(index) == null) {
      if (System.nanoTime() > deadline) {
        throw new ClusterException(String.format("shard %d of cluster %s has not registered in"
            + " etcd (waited %d s): start it with table-server --cluster %s --shard-index %d"
            + " --num-shards %d", index, address.name(), waitFor.toSeconds(), address, index,
            index + 1));
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ClusterException("interrupted while waiting for shard " + index, e);
      }
    }
    return current.get(index);
  }

  /** Shard {@code index}'s last known host:port, or a placeholder naming the cluster. */
  public String endpoint(int index) {
    ClusterMember m = current.get(index);
    return m != null ? m.endpoint() : "shard-" + index + "." + address.name() + ":0";
  }

  /** Runs {@code r} whenever shard {@code index}'s entry changes (on etcd's watch thread). */
  public void listen(int index, Runnable r) {
    listeners.computeIfAbsent(index, k -> new CopyOnWriteArrayList<>()).add(r);
  }

  public void unlisten(int index, Runnable r) {
    List<Runnable> l = listeners.get(index);
    if (l != null) {
      l.remove(r);
    }
  }

  private void apply(ClusterMember m) {
    if (m.index() < 0) {
      return;
    }
    ClusterMember before = current.put(m.index(), m);
    String why = refusal(m.index());
    if (why != null) {
      log.warning(why);
    } else if (before != null && !before.endpoint().equals(m.endpoint())) {
      log.info(String.format("cluster %s: shard %d moved from %s to %s", address.name(),
          m.index(), before.endpoint(), m.endpoint()));
    }
    notify(m.index());
  }

  private void notify(int index) {
    for (Runnable r : listeners.getOrDefault(index, List.of())) {
      r.run();
    }
  }

  private void watch(long fromRevision) {
    if (closed) {
      return;
    }
    watcher = client.getWatchClient().watch(Etcd.bytes(address.shardsPrefix()),
        WatchOption.builder().isPrefix(true).withRevision(fromRevision).build(),
        Watch.listener(this::onEvents, this::onWatchError));
  }

  private void watchSlotMap(long fromRevision) {
    if (closed) {
      return;
    }
    slotMapWatcher = client.getWatchClient().watch(Etcd.bytes(address.slotMapKey()),
        WatchOption.builder().withRevision(fromRevision).build(),
        Watch.listener(this::onSlotMap, this::onWatchError));
  }

  private void onSlotMap(WatchResponse r) {
    for (WatchEvent e : r.getEvents()) {
      if (e.getEventType() != WatchEvent.EventType.PUT) {
        continue;
      }
      try {
        adopt(Etcd.slotMap(address, e.getKeyValue()));
      } catch (ClusterException bad) {
        log.warning(bad.getMessage());
      }
    }
  }

  /** Keeps {@code m} if slots moved in it and it is newer than the map kept. */
  private synchronized void adopt(dev.dynembed.table.common.SlotMap m) {
    dev.dynembed.table.common.SlotMap had = slotMap;
    if (m == null || m.epoch() == 0 || had != null && m.epoch() <= had.epoch()) {
      return;
    }
    slotMap = m;
    if (had == null) { // entries of other counts are followed from now on
      current.keySet().forEach(this::notify);
    }
  }

  private void onEvents(WatchResponse r) {
    // a deleted entry (its process's lease expired) changes nothing: the last address stays
    for (WatchEvent e : r.getEvents()) {
      if (e.getEventType() == WatchEvent.EventType.PUT) {
        try {
          apply(Etcd.member(e.getKeyValue()));
        } catch (ClusterException bad) {
          log.warning(bad.getMessage());
        }
      }
    }
  }

  /** A broken watch (etcd restarted, history compacted): read the map again and watch anew. */
  private final java.util.concurrent.atomic.AtomicBoolean rewatching =
      new java.util.concurrent.atomic.AtomicBoolean();

  private void onWatchError(Throwable t) {
    if (closed || !rewatching.compareAndSet(false, true)) {
      return; // the other watch broke too: one thread reads and watches both again
    }
    log.warning("cluster " + address.name() + ": the watch on etcd broke (" + t.getMessage()
        + "); reading the map again");
    Thread th = new Thread(() -> {
      while (!closed) {
        try {
          for (Watch.Watcher w : new Watch.Watcher[] {watcher, slotMapWatcher}) {
            if (w != null) {
              w.close();
            }
          }
          Etcd.Shards s = Etcd.readShards(client, address);
          adopt(Etcd.readSlotMap(client, address).map());
          s.members().values().forEach(this::apply);
          rewatching.set(false);
          watch(s.revision() + 1);
          watchSlotMap(s.revision() + 1);
          return;
        } catch (RuntimeException e) {
          try {
            Thread.sleep(1000);
          } catch (InterruptedException ie) {
            return;
          }
        }
      }
    }, "cluster-map-rewatch");
    th.setDaemon(true);
    th.start();
  }

  @Override
  public void close() {
    closed = true;
    for (Watch.Watcher w : new Watch.Watcher[] {watcher, slotMapWatcher}) {
      if (w != null) {
        w.close();
      }
    }
    client.close();
  }
}
