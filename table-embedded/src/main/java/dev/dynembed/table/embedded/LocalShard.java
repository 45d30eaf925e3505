package dev.dynembed.table.embedded;

import dev.dynembed.table.client.spi.ReplyRows;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.PooledRows;
import dev.dynembed.table.engine.ProtoItems;
import dev.dynembed.table.engine.SampleCandidates;
import dev.dynembed.table.engine.ShardCommands;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.engine.TopKHits;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.WriteRequest;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * The in-process shard: calls the engine directly in the caller's thread. Read and Write go
 * through the engine's one command path ({@link ShardCommands}) as a remote shard's do; only the
 * items' form differs (the client's records here, protobuf there). No call id: nothing in
 * process is resent.
 */
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

  @Override
  public CompletableFuture<List<Object>> read(List<Read> items) {
    String table = items.isEmpty() ? null : items.get(0).table();
    return call(items.size() == 1 ? Shard.callName(items.get(0)) : "read", table,
        () -> engine.commands().read(CallId.getDefaultInstance(), items, reads));
  }

  /** The client's read items as the engine's one command path sees them. */
  private final ShardCommands.ReadItems<Read, Object> reads = new ShardCommands.ReadItems<>() {
    @Override
    public String table(Read item) {
      return item.table();
    }

    @Override
    public ShardCommands.Inserts inserts(Read item) {
      if (item instanceof FindOrInsert f) {
        return ShardCommands.Inserts.of(f.keys(), !f.mode().count());
      }
      if (item instanceof Pooled p && p.insert()) {
        return ShardCommands.Inserts.of(p.keys(), !p.count());
      }
      return null;
    }

    @Override
    public ShardCommands.ReadCost cost(Read item, TableStore t) {
      if (t == null) {
        return ShardCommands.ReadCost.NONE;
      }
      if (item instanceof Find f) {
        return ShardCommands.ReadCost.rows(f.keys().size(), t.dim(), Float.BYTES);
      } else if (item instanceof FindOrInsert f) {
        return ShardCommands.ReadCost.rows(f.keys().size(), (f.mode().rows() ? t.dim() : 0L)
            + (f.mode().slots() ? t.slotFloats() : 0L), Float.BYTES);
      } else if (item instanceof Pooled p) {
        return ShardCommands.ReadCost.pooled(p.keys().size(), p.bags().bags(), t.dim(),
            Float.BYTES);
      }
      if (item instanceof Shard.Partners p) {
        return ShardCommands.ReadCost.sample((long) p.anchors().size() * Math.max(0, p.numDraws()),
            p.anchors().size(), 0, Float.BYTES);
      }
      Sample s = (Sample) item;
      return ShardCommands.ReadCost.sample(Math.max(0, s.numSampled()), s.positives().size(),
          s.distinct() && !s.omitRows() ? t.dim() + (s.withSlots() ? (long) t.slotFloats() : 0L) : 0L,
          Float.BYTES);
    }

    @Override
    public Object run(Read item, boolean resent) {
      if (item instanceof Find f) {
        return find(f);
      } else if (item instanceof FindOrInsert f) {
        return findOrInsert(f, f.mode().count() && !resent);
      } else if (item instanceof Pooled p) {
        return pooled(p, p.count() && !resent);
      } else if (item instanceof Shard.Partners p) {
        return partners(p);
      }
      return sample((Sample) item);
    }

    @Override
    public FindOrInsertRequest logged(Read item, boolean noCount) {
      if (item instanceof FindOrInsert f) {
        return ProtoItems.logged(f.table(), f.keys().toProto(),
            ProtoItems.boxed(f.occurrences()), noCount);
      }
      Pooled p = (Pooled) item; // counted once per bag entry
      return ProtoItems.logged(p.table(), p.keys().toProto(),
          ProtoItems.boxed(p.bags().occurrences(p.keys().size())), noCount);
    }
  };

  private RowsReply find(Find f) {
    TableStore t = engine.get(f.table());
    float[] rows = new float[f.keys().size() * t.dim()];
    byte[] found = new byte[(f.keys().size() + 7) >>> 3];
    t.find(f.keys(), rows, found);
    return new RowsReply(ReplyRows.of(rows, t.dim()), found, null, null, null);
  }

  private RowsReply findOrInsert(FindOrInsert f, boolean count) {
    TableStore t = engine.get(f.table());
    int n = f.keys().size();
    float[] rows = f.mode().rows() ? new float[n * t.dim()] : null;
    byte[] found = new byte[(n + 7) >>> 3];
    long[] freqs = f.mode().frequencies() ? new long[n] : null;
    boolean withSlots = f.mode().slots();
    float[] slots = withSlots ? new float[n * t.slotFloats()] : null;
    long[] counts = withSlots ? new long[n] : null;
    t.findOrInsert(f.keys(), f.occurrences(), count,
        rows == null ? null : RowSink.of(rows), found, freqs,
        slots == null ? null : RowSink.of(slots), counts);
    return new RowsReply(rows == null ? null : ReplyRows.of(rows, t.dim()), found, freqs,
        slots == null || t.slotFloats() == 0 ? null : ReplyRows.of(slots, t.slotFloats()),
        counts);
  }

  private PooledReply pooled(Pooled p, boolean count) {
    TableStore t = engine.get(p.table());
    byte[] found = new byte[(p.keys().size() + 7) >>> 3];
    float[] pooled = p.insert()
        ? PooledRows.findOrInsert(t, p.keys(), p.bags(), null, count, found)
        : PooledRows.find(t, p.keys(), p.bags(), found);
    return new PooledReply(ReplyRows.of(pooled, t.dim()), found);
  }

  private Shard.PartnersReply partners(Shard.Partners p) {
    TableStore t = engine.get(p.table());
    TableStore.PartnerDraws d = t.drawPartners(p.anchors(), p.numDraws(),
        dev.dynembed.table.engine.PairCounts.Weight.of(p.weight().getNumber(), t.name()), p.seed());
    return new Shard.PartnersReply(d.keys(), d.probability(), d.counts());
  }

  private SampleReply sample(Sample s) {
    TableStore t = engine.get(s.table());
    SampleCandidates c = engine.sample(t, s.positives(), s.numSampled(), s.sampler(), s.alpha(),
        s.seed(), s.distinct(), s.noneIfEmpty());
    ReplyRows rows = null;
    ReplyRows slots = null;
    long[] counts = null;
    if (c.drawIndex() != null && !s.omitRows()) {
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
    return call("applyGradients", table,
        () -> engine.commands().write(CallId.getDefaultInstance(), items, writes));
  }

  /** The client's gradient batches as the engine's one command path sees them. */
  private static final ShardCommands.WriteItems<Write> writes = new ShardCommands.WriteItems<>() {
    @Override
    public String table(Write item) {
      return item.table();
    }

    @Override
    public TableStore.CheckedGradients check(TableStore t, Write w) {
      if (w.assign() != null) {
        return t.checkAssign(w.keys(), w.gradients(), w.assign().frequencies());
      }
      if (w.pairs() != null) {
        return t.checkPairs(w.keys(), w.pairs().partners(), w.pairs().counts());
      }
      return w.bags() != null
          ? PooledRows.checkGradients(t, w.keys(), w.bags(), w.gradients(), w.learningRate())
          : t.checkGradients(w.keys(), w.gradients(), w.learningRate());
    }

    @Override
    public long step(Write item) {
      return item.step();
    }

    @Override
    public ShardCommands.Inserts keys(Write item) {
      return ShardCommands.Inserts.of(item.keys(), false);
    }

    @Override
    public WriteRequest logged(CallId id, List<Write> items) {
      WriteRequest.Builder b = WriteRequest.newBuilder().setCallId(id);
      for (Write w : items) {
        b.addItems(w.toProto());
      }
      return b.build();
    }
  };

  @Override
  public CompletableFuture<TableInfo> create(TableConfig config) {
    return call("createTable", config.getName(), () -> engine.info(engine.create(config)));
  }

  @Override
  public CompletableFuture<TableInfo> describe(String table) {
    return call("describeTable", table, () -> engine.info(engine.get(table)));
  }

  @Override
  public CompletableFuture<TableInfo> grow(dev.dynembed.table.v1.GrowTableRequest req) {
    return call("growTable", req.getTable(), () -> engine.info(engine.grow(req)));
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
    return topK(table, queries, numQueries, k, biasLastDim, metric, exclude, 0);
  }

  @Override
  public CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, dev.dynembed.table.common.PackedKeys exclude,
      int searchBreadth) {
    return call("topK", table, () -> {
      TopKHits h = engine.topK(table, queries, numQueries, k, biasLastDim, metric, exclude,
          searchBreadth);
      return new TopKHitsReply(h.keys(), h.scores(), h.counts(), h.approximate());
    });
  }

  @Override
  public CompletableFuture<dev.dynembed.table.v1.IndexInfo> buildIndex(
      dev.dynembed.table.v1.BuildIndexRequest req) {
    return call("buildIndex", req.getTable(), () -> engine.buildIndex(req));
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
    return call("scan", table, () -> engine.commands().onCurrentStore(table, t -> {
      int n = dev.dynembed.table.engine.Scans.pageSize(t, cursor, limit, generation);
      float[] rows = new float[n * t.dim()];
      var page = dev.dynembed.table.engine.Scans.read(t, cursor, n, RowSink.of(rows));
      return new ScanReply(page.keys(), ReplyRows.of(java.util.Arrays.copyOf(rows,
          page.keys().size() * t.dim()), t.dim()), page.frequencies(), page.steps(),
          page.next(), page.generation());
    }));
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
