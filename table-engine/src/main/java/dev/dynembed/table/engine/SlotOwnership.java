package dev.dynembed.table.engine;

import dev.dynembed.table.common.SlotMap;

/**
 * The slot map a shard routes by, shared by its tables' stores (their per-key ownership check)
 * and its command path (the calls' map epochs). Replaced whole by {@link ShardEngine#installSlotMap}.
 */
final class SlotOwnership {
  private volatile SlotMap map;

  SlotOwnership(SlotMap map) {
    this.map = map;
  }

  SlotMap map() {
    return map;
  }

  void set(SlotMap m) {
    map = m;
  }

  /** False while the log replays (its records were checked when they first came). */
  volatile boolean enforced = true;
}
