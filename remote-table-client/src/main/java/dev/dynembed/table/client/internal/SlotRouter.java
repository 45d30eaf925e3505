package dev.dynembed.table.client.internal;

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
public final class SlotRouter {
  private final List<Shard> shards;
  private volatile SlotMap map;

  public SlotRouter(List<Shard> shards) {
    this.shards = List.copyOf(shards);
    this.map = SlotMap.implicit(this.shards.size());
  }

  /** The shards, in shard order. */
  public List<Shard> shards() {
    return shards;
  }

  /** The map calls are routed by now. */
  public SlotMap map() {
    return map;
  }

  /**
   * Reads every shard's map and keeps the newest, until this client's map is at least at epoch
   * {@code atLeast} (the epoch a MOVED refusal named). Shards that do not answer are skipped; a
   * map naming more shards than this client has endpoints is refused (the client needs the new
   * endpoints: restart it with them, or use a cluster that publishes them). Never blocks: the
   * future completes when the shards have answered.
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
    for (Shard s : shards) {
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
    if (best.numShards() > shards.size()) {
      throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format("the shards route by"
          + " a slot map of %d shards (epoch %d), but this client knows %d endpoints: restart"
          + " it with the new shards' endpoints", best.numShards(), best.epoch(), shards.size()),
          null, -1, "refresh slot map", null);
    }
    if (best.epoch() < atLeast) {
      throw TableException.of(ErrorCode.UNAVAILABLE, String.format("a shard routes by slot map"
          + " epoch %d, but no shard answered with it (newest seen: %d)", atLeast, best.epoch()),
          null, -1, "refresh slot map", null);
    }
    map = best;
    return best;
  }
}
