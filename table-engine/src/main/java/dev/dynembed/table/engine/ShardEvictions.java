package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.LogRecord;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A shard's evictions: explicit ones (a call) and the caps' (scheduled after calls that add
 * rows, run one at a time off the callers' threads). Part of {@link ShardEngine}, which answers
 * the calls through it.
 */
final class ShardEvictions {
  /** What evictions use of their engine: the catalogue they swap rebuilt stores into, the log. */
  interface Engine extends ShardTables {
    int numShards();

    /** The catalogue monitor, held while a rebuilt store is logged and swapped in. */
    Object catalogue();

    void put(String name, TableStore t);

    long log(dev.dynembed.table.v1.LogRecord r);

    ShardJournal journal();

    void checkReady();

    void awaitDurable(long lsn);
  }

  private final Engine engine;

  ShardEvictions(Engine engine) {
    this.engine = engine;
  }

  /**
   * Evicts rows of a table (see {@link Eviction}): the victims are chosen and the table rebuilt
   * without them under its exclusive lock, logged (with now_step resolved, so that replay evicts
   * the same rows) and swapped in. Held under the engine.catalogue() lock, in the order swap takes them.
   */
  public dev.dynembed.table.v1.EvictResponse evict(dev.dynembed.table.v1.EvictRequest req) {
    engine.checkReady();
    return evictUnchecked(req);
  }

  /** As {@link #evict}, also while the shard is not ready (its recovery's sweep). */
  dev.dynembed.table.v1.EvictResponse evictUnchecked(dev.dynembed.table.v1.EvictRequest req) {
    Eviction.check(req);
    long lsn = 0;
    Eviction.Result r;
    ShardJournal s = engine.journal();
    // a snapshot cut between a log rotation and its table copies must not see the store
    // replaced: the log holds the eviction, not the rows it kept
    synchronized (s == null ? new Object() : s.snapshotMutex()) {
      synchronized (engine.catalogue()) {
        TableStore old = engine.get(req.getTable());
        old.quiesce.writeLock().lock();
        try {
          if (old.retired) {
            throw new TableException(dev.dynembed.table.common.ErrorCode.UNAVAILABLE,
                String.format("table '%s' was dropped or restored meanwhile; resend", old.name()));
          }
          dev.dynembed.table.v1.EvictRequest resolved = Eviction.resolve(req, old);
          r = Eviction.run(old, resolved);
          SlotMoves.Tracker mt = old.moveTracker;
          if (mt != null && resolved.getKeys().getLengthsCount() > 0) {
            // listed keys leave either tier: a slot move must send them again (or their absence)
            mt.touched(PackedKeys.fromProto(resolved.getKeys(), old.maxKeyBytes, "keys"));
          }
          if (r.fresh() != null && mt != null) {
            mt.replaced(old, r.fresh()); // the move goes on over the rebuilt store
          }
          if (r.fresh() != null) {
            lsn = engine.log(LogRecord.newBuilder().setEvict(resolved).build());
            old.retired = true;
            // the victims reach the disk tier before any call sees the fresh store
            r.fresh().quiesce.writeLock().lock();
            try {
              engine.put(old.name(), r.fresh());
              r.demote();
            } finally {
              if (mt != null) {
                mt.rebuilt(r.fresh()); // victims in the tier (or back in memory): read it now
              }
              r.fresh().quiesce.writeLock().unlock();
            }
          }
        } finally {
          old.quiesce.writeLock().unlock();
        }
      }
    }
    engine.awaitDurable(lsn);
    return dev.dynembed.table.v1.EvictResponse.newBuilder().setEvicted(r.evicted())
        .setKeys(r.kept()).build();
  }

  /** Runs the caps' evictions, one at a time, off the callers' threads (created on first use). */
  private volatile java.util.concurrent.ExecutorService evictor;
  private final java.util.Set<String> evicting = ConcurrentHashMap.newKeySet();

  /**
   * Rows a shard keeps of a table with a cap (0: none): its share of max_keys, ceil(max_keys /
   * num_shards); with max_bytes, once its part uses more than its share of the bytes, the rows
   * that fit that share at the current bytes per row; the smaller of the two.
   */
  long capOf(TableStore t) {
    long max = t.config().getMaxKeys();
    long cap = max == 0 ? 0 : (max + engine.numShards() - 1) / engine.numShards();
    long maxBytes = t.config().getMaxBytes();
    if (maxBytes > 0) {
      long share = (maxBytes + engine.numShards() - 1) / engine.numShards();
      long used = t.bytesEstimate(); // O(1); bytes_used within a page of each kind
      long rows = t.size();
      if (used > share && rows > 0) {
        long fit = Math.max(1, (long) (rows * ((double) share / used)));
        cap = cap == 0 ? fit : Math.min(cap, fit);
      }
    }
    return cap;
  }

  /**
   * After a call that may have added rows: a table past its cap by 10% gets an eviction down to
   * the cap, in the background (one per table at a time). The cap is soft: rows keep arriving
   * while the eviction runs.
   */
  public void afterInsert(TableStore t) {
    long cap = capOf(t);
    if (closed || cap == 0 || t.size() <= cap + Math.max(1, cap / 10)
        || !evicting.add(t.name())) {
      return;
    }
    java.util.concurrent.ExecutorService ex = evictor;
    if (ex == null) {
      synchronized (this) {
        if (closed) { // closed meanwhile: no executor after close
          evicting.remove(t.name());
          return;
        }
        if (evictor == null) {
          evictor = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "evict-shard-" + engine.shardIndex());
            th.setDaemon(true);
            return th;
          });
        }
        ex = evictor;
      }
    }
    // a disk tier evicts (demotes) to 90% of the cap: promotions refill memory quickly, and
    // each eviction rebuilds the rows in memory, so more room per rebuild means fewer of them
    long target = t.config().getDiskTier() ? Math.max(1, cap - cap / 10) : cap;
    try {
      ex.execute(() -> run(t, target));
    } catch (java.util.concurrent.RejectedExecutionException e) { // closed meanwhile
      evicting.remove(t.name());
    }
  }

  private void run(TableStore t, long target) {
    boolean ran = false;
    try {
      if (engine.lookup(t.name()) == t && !t.retired) {
        evict(dev.dynembed.table.v1.EvictRequest.newBuilder().setTable(t.name())
            .setMaxKeys(target).setPolicy(t.config().getEvictionPolicy()).build());
      }
      ran = true;
    } catch (RuntimeException e) { // dropped or restored meanwhile, or the log failed
      java.util.logging.Logger.getLogger(ShardEvictions.class.getName()).warning(String.format(
          "shard %d: eviction of table '%s' to its cap failed: %s", engine.shardIndex(), t.name(),
          e.getMessage()));
    } finally {
      evicting.remove(t.name());
    }
    // rows that arrived while this eviction ran (their calls found it running and scheduled
    // nothing), or a store that replaced the one it was for: check the table as it is now,
    // or a table whose last inserts came during an eviction would stay past its cap
    TableStore now = engine.lookup(t.name());
    if (ran && now != null && !now.retired) {
      afterInsert(now);
    }
  }

  private volatile boolean closed;

  /**
   * Stops scheduling evictions and waits (up to a minute) for the one running: the engine closes
   * the disk tier after this, which a running eviction may still be demoting into.
   */
  void close() {
    java.util.concurrent.ExecutorService ex;
    synchronized (this) {
      closed = true;
      ex = evictor;
    }
    if (ex == null) {
      return;
    }
    ex.shutdown();
    try {
      if (!ex.awaitTermination(60, java.util.concurrent.TimeUnit.SECONDS)) {
        java.util.logging.Logger.getLogger(ShardEvictions.class.getName()).warning(
            "shard " + engine.shardIndex() + ": an eviction still runs after 60 s at close");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Waits until no cap eviction is queued or running (tests, benchmarks). */
  public void awaitEvictions() {
    java.util.concurrent.ExecutorService ex = evictor;
    if (ex == null) {
      return;
    }
    try {
      ex.submit(() -> { }).get();
      while (!evicting.isEmpty()) {
        ex.submit(() -> { }).get();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e);
    }
  }
}
