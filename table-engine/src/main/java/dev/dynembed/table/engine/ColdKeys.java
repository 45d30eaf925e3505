package dev.dynembed.table.engine;

import dev.dynembed.table.v1.TableCounters;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What both tiers below memory keep in memory about their cold keys: each key's frequency (~100
 * bytes a key against a record's 4 x dim x (1 + slots)), which the samplers draw cold keys by
 * without reading the tier and whose size is the tier's; their sum; promotions and demotions.
 */
abstract class ColdKeys implements ColdRows {
  final ConcurrentHashMap<String, Long> counts = new ConcurrentHashMap<>();
  final AtomicLong frequency = new AtomicLong(); // sum over the cold keys
  final AtomicLong promotions = new AtomicLong();
  final AtomicLong demotions = new AtomicLong();

  @Override
  public long size() {
    return counts.size();
  }

  @Override
  public Set<Map.Entry<String, Long>> counts() {
    return counts.entrySet();
  }

  @Override
  public long frequency() {
    return frequency.get();
  }

  @Override
  public void addCounters(TableCounters.Builder b) {
    b.setColdKeys(size()).setPromotions(promotions.get()).setDemotions(demotions.get());
  }
}
