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
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.logging.Logger;

/**
 * A client's view of a cluster's shard map (docs/design/0019-cluster-map.md): read from etcd
 * when opened, then kept current by a watch on {@code /dynembed/clusters/NAME/shards/}. The shard
 * count is the cluster's (its oldest live shard's) when opened and stays fixed for this view.
 *
 * <p>A shard's last known address is kept after its entry goes (its process died and its lease
 * expired): a process restarted on the same address serves again before it registers, and one
 * restarted elsewhere is followed as soon as it registers. An entry of another shard count (the
 * cluster was restarted with more or fewer shards) is not followed: calls to that index fail
 * with a message saying so.
 */
public final class ClusterMap implements AutoCloseable {
  private static final Logger log = Logger.getLogger(ClusterMap.class.getName());

  private final ClusterAddress address;
  private final Client client;
  private final int numShards;
  private final AtomicReferenceArray<ClusterMember> current;
  private final AtomicReferenceArray<String> refused;
  private final Map<Integer, List<Runnable>> listeners = new ConcurrentHashMap<>();
  private volatile Watch.Watcher watcher;
  private volatile boolean closed;

  private ClusterMap(ClusterAddress address, Client client, Etcd.Shards shards) {
    this.address = address;
    this.client = client;
    ClusterMember oldest = shards.members().values().stream()
        .min(java.util.Comparator.comparingLong(ClusterMember::createRevision)).orElseThrow();
    this.numShards = oldest.numShards();
    this.current = new AtomicReferenceArray<>(numShards);
    this.refused = new AtomicReferenceArray<>(numShards);
    for (ClusterMember m : shards.members().values()) {
      apply(m);
    }
    watch(shards.revision() + 1);
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
          return new ClusterMap(address, client, shards);
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

  public int numShards() {
    return numShards;
  }

  /** Shard {@code index}'s last known entry (null: never registered while this view watched). */
  public ClusterMember member(int index) {
    return current.get(index);
  }

  /** Why shard {@code index}'s entry is not followed (another layout), or null. */
  public String refusal(int index) {
    return refused.get(index);
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
    if (m.index() < 0 || m.index() >= numShards || m.numShards() != numShards) {
      if (m.index() >= 0 && m.index() < numShards) {
        refused.set(m.index(), String.format("shard %d of cluster %s is now %s, registered as one"
            + " of %d shards, but this client routes keys over %d: open a new client",
            m.index(), address.name(), m.describe(), m.numShards(), numShards));
        notify(m.index());
      } else {
        log.warning(String.format("cluster %s: ignoring shard %d of %d at %s (this client routes"
            + " over %d shards)", address.name(), m.index(), m.numShards(), m.endpoint(),
            numShards));
      }
      return;
    }
    ClusterMember before = current.getAndSet(m.index(), m);
    refused.set(m.index(), null);
    if (before != null && !before.endpoint().equals(m.endpoint())) {
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
  private void onWatchError(Throwable t) {
    if (closed) {
      return;
    }
    log.warning("cluster " + address.name() + ": the watch on etcd broke (" + t.getMessage()
        + "); reading the map again");
    Thread th = new Thread(() -> {
      while (!closed) {
        try {
          Watch.Watcher w = watcher;
          if (w != null) {
            w.close();
          }
          Etcd.Shards s = Etcd.readShards(client, address);
          s.members().values().forEach(this::apply);
          watch(s.revision() + 1);
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
    Watch.Watcher w = watcher;
    if (w != null) {
      w.close();
    }
    client.close();
  }
}
