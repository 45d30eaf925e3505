package dev.dynembed.table.cluster;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.options.GetOption;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The etcd calls the map makes, with errors that name etcd's address and what was being done. */
final class Etcd {
  /** How long one etcd call may take before etcd counts as unreachable. */
  static final Duration CALL_TIMEOUT = Duration.ofSeconds(10);

  private Etcd() {}

  static Client client(ClusterAddress a) {
    return Client.builder().endpoints(a.uris()).connectTimeout(Duration.ofSeconds(5)).build();
  }

  static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }

  static <T> T await(CompletableFuture<T> f, ClusterAddress a, String what) {
    try {
      return f.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ClusterException("interrupted while " + what, e);
    } catch (ExecutionException e) {
      throw new ClusterException("etcd at " + String.join(",", a.etcd()) + " failed while "
          + what + ": " + e.getCause().getMessage(), e.getCause());
    } catch (TimeoutException e) {
      f.cancel(true);
      throw new ClusterException("etcd at " + String.join(",", a.etcd()) + " did not answer"
          + " within " + CALL_TIMEOUT.toSeconds() + " s while " + what + " (is it running"
          + " there?)", e);
    }
  }

  /** The registered shards by index, and the revision they were read at. */
  record Shards(Map<Integer, ClusterMember> members, long revision) {}

  static Shards readShards(Client client, ClusterAddress a) {
    GetResponse r = await(client.getKVClient().get(bytes(a.shardsPrefix()),
        GetOption.builder().isPrefix(true).build()), a, "reading the shard map of cluster '"
        + a.name() + "'");
    Map<Integer, ClusterMember> out = new TreeMap<>();
    for (KeyValue kv : r.getKvs()) {
      ClusterMember m = member(kv);
      out.put(m.index(), m);
    }
    return new Shards(out, r.getHeader().getRevision());
  }

  static ClusterMember member(KeyValue kv) {
    return ClusterMember.decode(kv.getKey().toString(StandardCharsets.UTF_8),
        kv.getValue().getBytes(), kv.getLease(), kv.getCreateRevision(), kv.getModRevision());
  }

  /** The cluster's published slot map and its key's modification revision (0: none). */
  record PublishedSlotMap(dev.dynembed.table.common.SlotMap map, long modRevision) {}

  static PublishedSlotMap readSlotMap(Client client, ClusterAddress a) {
    GetResponse r = await(client.getKVClient().get(bytes(a.slotMapKey())), a,
        "reading the slot map of cluster '" + a.name() + "'");
    if (r.getKvs().isEmpty()) {
      return new PublishedSlotMap(null, 0);
    }
    KeyValue kv = r.getKvs().get(0);
    return new PublishedSlotMap(slotMap(a, kv), kv.getModRevision());
  }

  /** The slot map a {@code slot-map} key holds. */
  static dev.dynembed.table.common.SlotMap slotMap(ClusterAddress a, KeyValue kv) {
    try {
      return dev.dynembed.table.common.SlotMap.fromProto(
          dev.dynembed.table.v1.SlotMap.parseFrom(kv.getValue().getBytes()));
    } catch (com.google.protobuf.InvalidProtocolBufferException
        | dev.dynembed.table.common.TableException e) {
      throw new ClusterException("the slot map of cluster '" + a.name() + "' in etcd ("
          + a.slotMapKey() + ") cannot be read: " + e.getMessage(), e);
    }
  }

  /**
   * Publishes {@code m} as the cluster's slot map unless etcd holds one of its epoch or newer
   * (shards installing maps of one move race to publish; the newest stays).
   *
   * @return whether etcd now holds {@code m} because of this call
   */
  static boolean publishSlotMap(Client client, ClusterAddress a,
      dev.dynembed.table.common.SlotMap m) {
    io.etcd.jetcd.ByteSequence key = bytes(a.slotMapKey());
    while (true) {
      PublishedSlotMap now = readSlotMap(client, a);
      if (now.map() != null && now.map().epoch() >= m.epoch()) {
        return false;
      }
      io.etcd.jetcd.op.Cmp unchanged = now.map() == null
          ? new io.etcd.jetcd.op.Cmp(key, io.etcd.jetcd.op.Cmp.Op.EQUAL,
              io.etcd.jetcd.op.CmpTarget.createRevision(0))
          : new io.etcd.jetcd.op.Cmp(key, io.etcd.jetcd.op.Cmp.Op.EQUAL,
              io.etcd.jetcd.op.CmpTarget.modRevision(now.modRevision()));
      boolean won = await(client.getKVClient().txn().If(unchanged)
          .Then(io.etcd.jetcd.op.Op.put(key, io.etcd.jetcd.ByteSequence.from(
              m.toProto().toByteArray()), io.etcd.jetcd.options.PutOption.DEFAULT))
          .commit(), a, "publishing slot map epoch " + m.epoch()).isSucceeded();
      if (won) {
        return true;
      }
    }
  }

  /** Revokes {@code lease} (its keys go at once) and closes the client; etcd's failure ignored. */
  static void leave(Client client, long lease) {
    if (lease != 0) {
      try {
        client.getLeaseClient().revoke(lease).get(5, TimeUnit.SECONDS);
      } catch (Exception ignored) {
        // the lease expires by itself
      }
    }
    client.close();
  }
}
