package dev.dynembed.table.embedded;

import dev.dynembed.table.client.internal.ReplyRows;
import dev.dynembed.table.client.internal.Shard;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.PooledRows;
import dev.dynembed.table.engine.SampleCandidates;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.engine.TopKHits;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/** The in-process shard: calls the engine directly in the caller's thread. */
final class LocalShard implements Shard {
  private final ShardEngine engine;

  LocalShard(ShardEngine engine) {
    this.engine = engine;
  }

  ShardEngine engine() {
    return engine;
  }

  @Override
  public boolean takesBatchesUnchanged() {
    return true;
  }

  @Override
  public int index() {
    return engine.shardIndex();
  }

  private static <T> CompletableFuture<T> call(String call, String table, Supplier<T> body) {
    try {
      return CompletableFuture.completedFuture(body.get());
    } catch (TableException e) {
      return CompletableFuture.failedFuture(
          TableException.of(e.code(), e.getMessage(), table, -1, call, e));
    }
  }

  /**
   * Runs {@code body} holding the named tables' quiesce locks shared, as a remote shard's calls
   * do: a checkpoint, a restore or an eviction (which replaces the store) waits for it, and a call
   * that finds its store replaced meanwhile runs again on the new one.
   */
  private <T> T locked(List<String> names, Supplier<T> body) {
    for (int attempt = 0; ; attempt++) {
      List<TableStore> stores = new ArrayList<>(names.size());
      for (String n : names) {
        stores.add(engine.get(n));
      }
      List<TableStore> held;
      try {
        held = ShardEngine.lockShared(stores);
      } catch (TableException e) {
        if (e.code() == dev.dynembed.table.common.ErrorCode.UNAVAILABLE && attempt < 8) {
          continue; // replaced between get and lock: take the new store
        }
        throw e;
      }
      try {
        return body.get();
      } finally {
        ShardEngine.unlockShared(held);
      }
    }
  }

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items) {
    String table = items.isEmpty() ? null : items.get(0).table();
    List<String> names = items.stream().map(Read::table).distinct().toList();
    return call(items.size() == 1 ? Shard.callName(items.get(0)) : "read", table, () -> locked(names,
        () -> readLocked(items)));
  }

  private List<Object> readLocked(List<Read> items) {
    return Shard.answer(items, this::find, this::findOrInsert, this::pooled, this::sample);
  }

  private RowsReply find(Find f) {
    TableStore t = engine.get(f.table());
    float[] rows = new float[f.keys().size() * t.dim()];
    byte[] found = new byte[(f.keys().size() + 7) >>> 3];
    t.find(f.keys(), rows, found);
    if (t.config().getDiskTier()) {
      engine.afterInsert(t); // promotions may pass the cap
    }
    return new RowsReply(ReplyRows.of(rows, t.dim()), found, null, null, null);
  }

  private RowsReply findOrInsert(FindOrInsert f) {
    TableStore t = engine.get(f.table());
    int n = f.keys().size();
    float[] rows = f.mode().rows() ? new float[n * t.dim()] : null;
    byte[] found = new byte[(n + 7) >>> 3];
    long[] freqs = f.mode().frequencies() ? new long[n] : null;
    boolean withSlots = f.mode().slots();
    float[] slots = withSlots ? new float[n * t.slotFloats()] : null;
    long[] counts = withSlots ? new long[n] : null;
    t.findOrInsert(f.keys(), f.occurrences(), f.mode().count(),
        rows == null ? null : RowSink.of(rows), found, freqs,
        slots == null ? null : RowSink.of(slots), counts);
    engine.afterInsert(t);
    return new RowsReply(rows == null ? null : ReplyRows.of(rows, t.dim()), found, freqs,
        slots == null || t.slotFloats() == 0 ? null : ReplyRows.of(slots, t.slotFloats()),
        counts);
  }

  private PooledReply pooled(Pooled p) {
    TableStore t = engine.get(p.table());
    byte[] found = new byte[(p.keys().size() + 7) >>> 3];
    float[] pooled = p.insert()
        ? PooledRows.findOrInsert(t, p.keys(), p.bags(), null, p.count(), found)
        : PooledRows.find(t, p.keys(), p.bags(), found);
    if (p.insert()) {
      engine.afterInsert(t);
    }
    return new PooledReply(ReplyRows.of(pooled, t.dim()), found);
  }

  private SampleReply sample(Sample s) {
    TableStore t = engine.get(s.table());
    SampleCandidates c = engine.sample(t, s.positives(), s.numSampled(), s.sampler(), s.alpha(),
        s.seed(), s.distinct(), s.noneIfEmpty());
    ReplyRows rows = null;
    ReplyRows slots = null;
    long[] counts = null;
    if (c.drawIndex() != null) {
      float[] r = new float[c.distinctCount() * t.dim()];
      c.copyRows(t, RowSink.of(r));
      rows = ReplyRows.of(r, t.dim());
      if (s.withSlots()) {
        float[] sl = new float[c.distinctCount() * t.slotFloats()];
        counts = new long[c.distinctCount()];
        c.copySlots(t, RowSink.of(sl), counts);
        slots = t.slotFloats() == 0 ? null : ReplyRows.of(sl, t.slotFloats());
      }
    }
    return new SampleReply(c.keys(), c.positive(), c.probability(), c.mass(), c.numKeys(), rows,
        c.drawIndex(), slots, counts);
  }

  @Override
  public CompletableFuture<int[]> write(List<Write> items) {
    String table = items.isEmpty() ? null : items.get(0).table();
    List<String> names = items.stream().map(Write::table).distinct().toList();
    return call("applyGradients", table, () -> locked(names, () -> {
      // every batch is checked before any is applied, as a remote shard does
      List<TableStore.CheckedGradients> checked = new ArrayList<>(items.size());
      List<TableStore> stores = new ArrayList<>(items.size());
      for (Write w : items) {
        TableStore t = engine.get(w.table());
        stores.add(t);
        checked.add(w.bags() != null
            ? PooledRows.checkGradients(t, w.keys(), w.bags(), w.gradients(), w.learningRate())
            : t.checkGradients(w.keys(), w.gradients(), w.learningRate()));
      }
      int[] updated = new int[items.size()];
      for (int i = 0; i < updated.length; i++) {
        updated[i] = stores.get(i).apply(checked.get(i), items.get(i).step());
      }
      for (TableStore t : stores) {
        engine.afterInsert(t);
      }
      return updated;
    }));
  }

  @Override
  public CompletableFuture<TableInfo> create(TableConfig config) {
    return call("createTable", config.getName(), () -> engine.info(engine.create(config)));
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table, () -> engine.info(engine.get(table)));
  }

  @Override
  public CompletableFuture<Void> drop(String table) {
    return call("dropTable", table, () -> {
      engine.drop(table);
      return null;
    });
  }

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, dev.dynembed.table.common.PackedKeys exclude) {
    return call("topK", table, () -> {
      TopKHits h = engine.topK(table, queries, numQueries, k, biasLastDim, metric, exclude);
      return new TopKHitsReply(h.keys(), h.scores(), h.counts());
    });
  }

  @Override
  public CompletableFuture<CheckpointFile> save(String table, String directory, long step) {
    return call("save", table, () -> engine.save(table, directory, step));
  }

  @Override
  public CompletableFuture<Long> restore(String table, String directory,
      List<CheckpointFile> files) {
    return call("restore", table, () -> engine.restore(table, directory, files));
  }

  @Override
  public CompletableFuture<ScanReply> scan(String table, long cursor, int limit,
      long generation) {
    return call("scan", table, () -> {
      TableStore t = engine.get(table);
      int n = dev.dynembed.table.engine.Scans.pageSize(t, cursor, limit, generation);
      float[] rows = new float[n * t.dim()];
      var page = dev.dynembed.table.engine.Scans.read(t, cursor, n, RowSink.of(rows));
      return new ScanReply(page.keys(), ReplyRows.of(java.util.Arrays.copyOf(rows,
          page.keys().size() * t.dim()), t.dim()), page.frequencies(), page.steps(),
          page.next(), page.generation());
    });
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.EvictResponse> evict(
      dev.dynembed.table.v1.EvictRequest request) {
    return call("evict", request.getTable(), () -> engine.evict(request));
  }

  @Override
  public CompletableFuture<StatsResponse> stats() {
    return call("stats", null, engine::stats);
  }

  @Override
  public void close() {
    engine.close(); // the disk tier, if one was opened
  }
}
