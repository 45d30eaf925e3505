package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.Internal;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The shards of one client and the slot map it routes their keys by
 * (docs/design/0021-slot-moves-proposal.md). Starts with the implicit map of the shard count
 * (exactly {@code xxh3 mod n}); a shard that refuses a call as MOVED makes it read the shards'
 * maps again and keep the newest ({@link #refresh}). Tables of one client share it.
 */
@Internal
public final class SlotRouter {
  /** Opens shard {@code index} of a cluster that grew (its address found by a cluster map). */
  public interface ShardOpener {
    Shard open(int index);
  }

  private volatile List<Shard> shards;
  /** Null: a client of fixed endpoints, which cannot reach shards added later. */
  private final ShardOpener opener;
  private volatile SlotMap map;

  public SlotRouter(List<Shard> shards) {
    this(shards, null, null);
  }

  /**
   * @param initial the map to route by until a shard says MOVED (null: the implicit map of the
   *     shards' count)
   * @param opener opens shards that a newer map gives slots to (null: none can be added)
   */
  public SlotRouter(List<Shard> shards, SlotMap initial, ShardOpener opener) {
    this.shards = List.copyOf(shards);
    this.opener = opener;
    this.map = initial != null ? initial : SlotMap.implicit(this.shards.size());
    if (map.shardsInUse() > this.shards.size()) {
      throw new IllegalArgumentException(String.format("a slot map whose shards 0..%d own slots"
          + " needs as many shards, not %d", map.shardsInUse() - 1, this.shards.size()));
    }
  }

  /**
   * The shards this client reaches, in shard order: those it was opened with, and those a newer
   * map gave slots to since (a client of a cluster map opens them as it learns of them).
   */
  public List<Shard> shards() {
    return shards;
  }

  /**
   * The shards that own slots in the map routed by now (those up to its highest owner): the
   * ones a call over every shard (top-k, checkpoints, statistics) must reach. Shards above it
   * were retired or own nothing yet.
   */
  public List<Shard> inUse() {
    List<Shard> s = shards;
    int k = Math.min(s.size(), map.shardsInUse());
    return k == s.size() ? s : s.subList(0, k);
  }

  /**
   * Makes sure this client reaches shards 0..n-1, opening those it lacks (a cluster grew).
   *
   * @return the shards
   * @throws TableException FAILED_PRECONDITION for a client of fixed endpoints that has fewer
   */
  public synchronized List<Shard> ensureShards(int n) {
    return grow(n, map.epoch());
  }

  private List<Shard> grow(int n, long epoch) {
    List<Shard> s = shards;
    if (n <= s.size()) {
      return s;
    }
    if (opener == null) {
      throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format("the shards route by"
          + " a slot map that gives slots to %d shards (epoch %d), but this client knows %d"
          + " endpoints: restart it with the new shards' endpoints, or use a cluster map"
          + " (etcd://)", n, epoch, s.size()), null, -1, "refresh slot map", null);
    }
    List<Shard> grown = new ArrayList<>(s);
    for (int i = s.size(); i < n; i++) {
      grown.add(opener.open(i));
    }
    shards = List.copyOf(grown);
    return shards;
  }

  /** The map calls are routed by now. */
  public SlotMap map() {
    return map;
  }

  /**
   * Reads the shards' maps and keeps the newest, until this client's map is at least at epoch
   * {@code atLeast} (the epoch a MOVED refusal named). Shards that do not answer are skipped; a
   * map that gives slots to shards this client cannot reach is refused (a client of fixed
   * endpoints needs the new ones: restart it with them; a client of a cluster map opens them).
   * The future completes when the shards have answered.
   *
   * @return the map routed by from then on
   */
  public CompletableFuture<SlotMap> refreshAsync(long atLeast) {
    if (map.epoch() >= atLeast) {
      return CompletableFuture.completedFuture(map);
    }
    return newestAsync().thenApply(m -> adopt(m, atLeast));
  }

  /** As {@link #refreshAsync}, waiting. */
  public SlotMap refresh(long atLeast) {
    return Futures.await(refreshAsync(atLeast));
  }

  /**
   * The newest of this client's map and the maps the shards answer now (a shard that does not
   * answer is skipped); routes by nothing new.
   */
  public CompletableFuture<SlotMap> newestAsync() {
    List<CompletableFuture<dev.dynembed.table.v1.SlotMap>> asked = new ArrayList<>();
    for (Shard s : inUse()) { // each holds the newest map (a destination gets it last)
      asked.add(s.slotMap().exceptionally(e -> null)); // a shard down is skipped
    }
    return CompletableFuture.allOf(asked.toArray(CompletableFuture[]::new)).thenApply(v -> {
      SlotMap best = map;
      for (CompletableFuture<dev.dynembed.table.v1.SlotMap> f : asked) {
        dev.dynembed.table.v1.SlotMap p = f.join();
        if (p != null && p.getEpoch() > best.epoch()) {
          best = SlotMap.fromProto(p);
        }
      }
      return best;
    });
  }

  /**
   * Routes by {@code m} from now on if it is newer than this client's map, which must then be at
   * least at epoch {@code atLeast}.
   *
   * @return the map routed by from then on
   */
  public synchronized SlotMap adopt(SlotMap m, long atLeast) {
    SlotMap best = m.epoch() > map.epoch() ? m : map;
    grow(best.shardsInUse(), best.epoch());
    if (best.epoch() < atLeast) {
      throw TableException.of(ErrorCode.UNAVAILABLE, String.format("a shard routes by slot map"
          + " epoch %d, but no shard answered with it (newest seen: %d)", atLeast, best.epoch()),
          null, -1, "refresh slot map", null);
    }
    map = best;
    return best;
  }
}
