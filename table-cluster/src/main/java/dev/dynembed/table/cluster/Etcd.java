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
