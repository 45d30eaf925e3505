package dev.dynembed.table.cluster.client;

import dev.dynembed.table.cluster.ClusterMap;
import dev.dynembed.table.cluster.ClusterMember;
import io.grpc.Attributes;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.Status;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * gRPC channel targets {@code dynembed-cluster:///VIEW/INDEX} resolved through an open {@link
 * ClusterMap}: the channel of shard INDEX connects wherever the map says it is now, and moves
 * when the map changes (gRPC's pick-first balancer reconnects when its address changes). Each
 * address carries its host:port as the authority, so TLS checks the certificate against the host
 * the shard registered with.
 */
final class ClusterNameResolvers extends NameResolverProvider {
  static final String SCHEME = "dynembed-cluster";
  private static final ClusterNameResolvers INSTANCE = new ClusterNameResolvers();
  private static final Map<String, ClusterMap> VIEWS = new ConcurrentHashMap<>();
  private static final AtomicLong IDS = new AtomicLong();
  private static boolean installed;

  /** Makes {@code map} resolvable; returns its view id for {@link #target}. */
  static synchronized String add(ClusterMap map) {
    if (!installed) {
      NameResolverRegistry.getDefaultRegistry().register(INSTANCE);
      installed = true;
    }
    String id = map.address().name() + "-" + IDS.incrementAndGet();
    VIEWS.put(id, map);
    return id;
  }

  static void remove(String id) {
    VIEWS.remove(id);
  }

  static String target(String view, int index) {
    return SCHEME + ":///" + view + "/" + index;
  }

  @Override
  protected boolean isAvailable() {
    return true;
  }

  @Override
  protected int priority() {
    return 5;
  }

  @Override
  public String getDefaultScheme() {
    return SCHEME;
  }

  @Override
  public NameResolver newNameResolver(URI target, NameResolver.Args args) {
    if (!SCHEME.equals(target.getScheme())) {
      return null;
    }
    String[] parts = target.getPath().split("/"); // "", VIEW, INDEX
    if (parts.length != 3) {
      return null;
    }
    ClusterMap map = VIEWS.get(parts[1]);
    if (map == null) {
      throw new IllegalArgumentException("no open cluster map " + parts[1] + " (its client was"
          + " closed)");
    }
    return new Resolver(map, Integer.parseInt(parts[2]), args.getSynchronizationContext());
  }

  private static final class Resolver extends NameResolver {
    private final ClusterMap map;
    private final int index;
    private final io.grpc.SynchronizationContext sync;
    private final Runnable onChange = this::changed;
    private Listener2 listener; // in sync
    private String last; // in sync: the endpoint last given to the channel

    Resolver(ClusterMap map, int index, io.grpc.SynchronizationContext sync) {
      this.map = map;
      this.index = index;
      this.sync = sync;
    }

    @Override
    public String getServiceAuthority() {
      return "shard-" + index + "." + map.address().name();
    }

    @Override
    public void start(Listener2 l) {
      listener = l;
      map.listen(index, onChange);
      resolve(true);
    }

    private void changed() {
      sync.execute(() -> resolve(false));
    }

    @Override
    public void refresh() {
      resolve(true);
    }

    private void resolve(boolean always) {
      if (listener == null) {
        return;
      }
      String why = map.refusal(index);
      if (why != null) {
        last = null;
        listener.onError(Status.UNAVAILABLE.withDescription(why));
        return;
      }
      ClusterMember m = map.member(index);
      if (m == null) {
        listener.onError(Status.UNAVAILABLE.withDescription(String.format("shard %d of"
            + " cluster %s has not registered in etcd yet", index, map.address().name())));
        return;
      }
      if (!always && m.endpoint().equals(last)) {
        return; // the same address (a restart in place, or the entry went): nothing to redo
      }
      int colon = m.endpoint().lastIndexOf(':');
      String host = m.endpoint().substring(0, colon);
      int port = Integer.parseInt(m.endpoint().substring(colon + 1));
      InetSocketAddress addr = new InetSocketAddress(
          host.startsWith("[") ? host.substring(1, host.length() - 1) : host, port);
      if (addr.isUnresolved()) {
        listener.onError(Status.UNAVAILABLE.withDescription(String.format("shard %d of"
            + " cluster %s registered as %s, whose host does not resolve", index,
            map.address().name(), m.endpoint())));
        return;
      }
      last = m.endpoint();
      Attributes attrs = Attributes.newBuilder()
          .set(EquivalentAddressGroup.ATTR_AUTHORITY_OVERRIDE, m.endpoint()).build();
      listener.onResult(ResolutionResult.newBuilder()
          .setAddresses(List.of(new EquivalentAddressGroup(addr, attrs))).build());
    }

    @Override
    public void shutdown() {
      map.unlisten(index, onChange);
      listener = null;
    }
  }
}
