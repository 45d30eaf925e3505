package dev.dynembed.table.cluster;

import dev.dynembed.table.common.SlotMap;
import io.etcd.jetcd.Client;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Publishes a shard's slot map in its cluster's {@code slot-map} key whenever the shard routes by
 * a newer one than it last saw there (docs/design/0021-slot-moves-proposal.md): for an
 * unreplicated shard's {@link ShardRegistration} and a replicated group's {@link ShardGroup}.
 */
final class SlotMapPublisher {
  private final Client client;
  private final ClusterAddress address;
  private final Supplier<SlotMap> slotMap;
  private final Consumer<String> log;
  /** The newest epoch this process saw in etcd or published there. */
  private volatile long publishedEpoch = -1;
  private volatile long failedEpoch = -1;

  SlotMapPublisher(Client client, ClusterAddress address, Supplier<SlotMap> slotMap,
      Consumer<String> log) {
    this.client = client;
    this.address = address;
    this.slotMap = slotMap;
    this.log = log;
  }

  /** Publishes the shard's map if it moved slots and etcd has not seen it (or a newer one). */
  void publish() {
    SlotMap m = slotMap.get();
    if (m == null || m.epoch() == 0 || m.epoch() <= publishedEpoch) {
      return;
    }
    boolean mine = Etcd.publishSlotMap(client, address, m);
    publishedEpoch = Math.max(publishedEpoch, m.epoch());
    if (mine) {
      log.accept(String.format("published slot map epoch %d in cluster %s", m.epoch(),
          address.name()));
    }
  }

  /** As {@link #publish}; a failure is logged (once per epoch) and tried again next time. */
  void publishQuietly() {
    try {
      publish();
    } catch (RuntimeException e) {
      SlotMap m = slotMap.get();
      long epoch = m == null ? -1 : m.epoch();
      if (failedEpoch != epoch) {
        failedEpoch = epoch;
        log.accept("cluster " + address.name() + ": publishing slot map epoch " + epoch
            + " failed (" + e.getMessage() + "); trying again");
      }
    }
  }
}
