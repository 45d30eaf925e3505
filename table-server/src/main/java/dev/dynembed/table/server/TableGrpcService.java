package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import com.google.protobuf.ByteString;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.*;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The gRPC face of a {@link ShardEngine}: decode, call the engine, encode, map errors. Rows are
 * written by the store straight into the bytes of the reply ({@link Rows.Writer}), in the
 * encoding the request asks for.
 */
final class TableGrpcService extends EmbeddingTableServiceGrpc.EmbeddingTableServiceImplBase {
  private static final Logger log = Logger.getLogger(TableGrpcService.class.getName());
  private final ShardEngine engine;
  private final java.util.concurrent.Executor scans;

  TableGrpcService(ShardEngine engine) {
    this(engine, Runnable::run);
  }

  /**
   * @param scans where a top-k that scans the table runs (the server's pool: never an event
   *     loop); a short search of an index answers on the calling thread
   */
  TableGrpcService(ShardEngine engine, java.util.concurrent.Executor scans) {
    this.engine = engine;
    this.scans = scans;
  }

  @Override
  public void createTable(CreateTableRequest req, StreamObserver<TableInfo> out) {
    run(out, req.getConfig().getName(), () -> engine.info(engine.create(req.getConfig())));
  }

  @Override
  public void describeTable(DescribeTableRequest req, StreamObserver<TableInfo> out) {
    run(out, req.getTable(), () -> engine.info(engine.get(req.getTable())));
  }

  @Override
  public void growTable(dev.dynembed.table.v1.GrowTableRequest req, StreamObserver<TableInfo> out) {
    run(out, req.getTable(), () -> engine.info(engine.grow(req)));
  }

  @Override
  public void dropTable(DropTableRequest req, StreamObserver<DropTableResponse> out) {
    run(out, req.getTable(), () -> {
      engine.drop(req.getTable());
      return DropTableResponse.getDefaultInstance();
    });
  }

  @Override
  public void find(FindRequest req, StreamObserver<FindResponse> out) {
    budgeted(out, req.getTable(), List.of(ReadItem.newBuilder().setFind(req).build()),
        () -> find(req));
  }

  @Override
  public void findOrInsert(FindOrInsertRequest req, StreamObserver<FindResponse> out) {
    budgeted(out, req.getTable(), List.of(ReadItem.newBuilder().setFindOrInsert(req).build()),
        () -> engine.read(
        ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setFindOrInsert(req))
            .setMapEpoch(engine.slotMap().epoch()).build(), // keys checked one by one
        this::runItem).getResults(0).getRows());
  }

  @Override
  public void applyGradients(ApplyGradientsRequest req,
      StreamObserver<ApplyGradientsResponse> out) {
    run(out, req.getTable(), () -> ApplyGradientsResponse.newBuilder().setRowsUpdated(
        engine.write(WriteRequest.newBuilder().addItems(req)
            .setMapEpoch(engine.slotMap().epoch()).build(), ShardState::checkWrite)[0])
        .build());
  }

  @Override
  public void sample(SampleRequest req, StreamObserver<SampleResponse> out) {
    budgeted(out, req.getTable(), List.of(ReadItem.newBuilder().setSample(req).build()),
        () -> sample(req));
  }

  @Override
  public void read(ReadRequest req, StreamObserver<ReadResponse> out) {
    budgeted(out, readTable(req), req.getItemsList(), () -> runRead(req));
  }

  /** The protobuf read items as the command path sees them (for their cost). */
  private final ShardCommands.ReadItems<ReadItem, ReadResult> reads =
      ProtoItems.reads(this::runItem);

  /**
   * What a read call's items may take, checked against the per-call limits (RESOURCE_EXHAUSTED
   * names them); both transports ask it before they reserve the reply ({@link ReplyBudget}).
   */
  ShardCommands.ReadCost readCost(List<ReadItem> items) {
    return engine.commands().cost(items, reads);
  }

  /**
   * What a top-k's answer may take: a key and a score per hit (32 bytes counted), at most
   * {@link Limits#MAX_TOP_K_HITS} hits (refused beyond when it runs). A top-k that is not {@link
   * #topKInline inline} (a scan) is {@link ShardCommands.ReadCost#large} whatever its reply: it
   * must not hold an event loop. Both transports ask this.
   */
  ShardCommands.ReadCost topKCost(TopKRequest req) {
    long hits = Math.min((long) req.getNumQueries() * Math.min(req.getK(), Limits.MAX_TOP_K),
        Limits.MAX_TOP_K_HITS);
    return new ShardCommands.ReadCost(hits * 32, 0, topKInline(req) ? 0 : Long.MAX_VALUE);
  }

  /**
   * Answers a call whose reply is reserved in the shard's {@link ReplyBudget} first (refused by
   * name when it does not fit), and released once gRPC has sent it or the call is cancelled. A
   * {@link ShardCommands.ReadCost#large} call runs on the pool, not on the event loop that read
   * it, where it would hold every other call of its connections.
   */
  private <T> void budgeted(StreamObserver<T> out, String table, List<ReadItem> items,
      Callable<T> call) {
    ShardCommands.ReadCost cost;
    try {
      cost = execute(table, () -> readCost(items));
    } catch (TableException e) {
      out.onError(toStatus(e.code()).withDescription(e.getMessage()).asRuntimeException());
      return;
    }
    budgeted(out, table, cost, call);
  }

  private <T> void budgeted(StreamObserver<T> out, String table, ShardCommands.ReadCost cost,
      Callable<T> call) {
    ReplyBudget.Lease lease;
    try {
      lease = engine.replies().reserve(cost.replyBytes(), table);
    } catch (TableException e) {
      out.onError(toStatus(e.code()).withDescription(e.getMessage()).asRuntimeException());
      return;
    }
    boolean tracked = out instanceof io.grpc.stub.ServerCallStreamObserver<T>;
    if (tracked) { // sent, or the call cancelled: the reply's memory is free again
      var s = (io.grpc.stub.ServerCallStreamObserver<T>) out;
      s.setOnCloseHandler(lease);
      s.setOnCancelHandler(lease);
    }
    Runnable answer = () -> {
      try {
        run(out, table, call);
      } finally {
        if (!tracked) {
          lease.close();
        }
      }
    };
    if (!cost.large()) {
      answer.run();
      return;
    }
    try {
      scans.execute(answer);
    } catch (RuntimeException e) { // shutting down
      lease.close();
      out.onError(io.grpc.Status.UNAVAILABLE.withDescription("shard " + engine.shardIndex()
          + " is shutting down").asRuntimeException());
    }
  }

  /**
   * A Read call as both transports run it (gRPC here, the native data plane in {@link
   * DataPlaneServer}): the engine's one command path ({@link ShardCommands}) with this service's
   * item handlers.
   */
  ReadResponse runRead(ReadRequest req) {
    return engine.read(req, this::runItem);
  }

  /** A Write call as both transports run it: every item checked before any is applied. */
  WriteResponse runWrite(WriteRequest req) {
    int[] n = engine.write(req, ShardState::checkWrite);
    WriteResponse.Builder b = WriteResponse.newBuilder();
    for (int r : n) {
      b.addRowsUpdated(r);
    }
    return b.build();
  }

  static String readTable(ReadRequest req) {
    return req.getItemsCount() > 0 ? itemTable(req.getItems(0)) : "";
  }

  static String writeTable(WriteRequest req) {
    return req.getItemsCount() > 0 ? req.getItems(0).getTable() : "";
  }

  ReadResult runItem(ReadItem item, boolean noCount) {
    return switch (item.getItemCase()) {
      case FIND -> ReadResult.newBuilder().setRows(find(item.getFind())).build();
      case FIND_OR_INSERT ->
          ReadResult.newBuilder().setRows(findOrInsert(item.getFindOrInsert(), noCount)).build();
      case SAMPLE -> ReadResult.newBuilder().setSample(sample(item.getSample())).build();
      case PARTNERS -> ReadResult.newBuilder()
          .setPartners(ProtoItems.partners(engine, item.getPartners())).build();
      default -> throw TableException.invalid("a read item is empty");
    };
  }

  @Override
  public void write(WriteRequest req, StreamObserver<WriteResponse> out) {
    // every item is checked before any is applied: a bad item changes nothing
    run(out, writeTable(req), () -> runWrite(req));
  }

  private static String itemTable(ReadItem item) {
    return switch (item.getItemCase()) {
      case FIND -> item.getFind().getTable();
      case FIND_OR_INSERT -> item.getFindOrInsert().getTable();
      case SAMPLE -> item.getSample().getTable();
      case PARTNERS -> item.getPartners().getTable();
      default -> "";
    };
  }

  private FindResponse find(FindRequest req) {
    if (!req.hasPool()) {
      return FindItems.find(engine, req, new ProtoOut());
    }
    TableStore t = engine.get(req.getTable());
    PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
    KeyBags bags = KeyBags.fromProto(req.getPool(), keys.size());
    byte[] found = new byte[(keys.size() + 7) >>> 3];
    return pooledReply(t, PooledRows.find(t, keys, bags, found), found, req.getRowEncoding());
  }

  private FindResponse findOrInsert(FindOrInsertRequest req, boolean noCount) {
    if (!req.hasPool()) {
      return FindItems.findOrInsert(engine, req, noCount, new ProtoOut());
    }
    TableStore t = engine.get(req.getTable());
    PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
    int[] occ = null;
    if (req.getOccurrencesCount() > 0) {
      occ = new int[req.getOccurrencesCount()];
      for (int i = 0; i < occ.length; i++) {
        occ[i] = req.getOccurrences(i);
      }
    }
    if (req.getWithSlots() || req.getWithFrequencies()) {
      throw TableException.invalid("table '%s': a pooled findOrInsert returns no per-key slots"
          + " or frequencies; ask a plain findOrInsert for them", t.name());
    }
    KeyBags bags = KeyBags.fromProto(req.getPool(), keys.size());
    byte[] found = new byte[(keys.size() + 7) >>> 3];
    return pooledReply(t, PooledRows.findOrInsert(t, keys, bags, occ,
        !req.getNoCount() && !noCount, found), found, req.getRowEncoding());
  }

  /** The rows and slots of a reply as arrays of their own, to become its bytes fields. */
  private abstract static class ProtoRows {
    Rows.Writer rows;
    Rows.Writer slots;

    /** @param rowValues -1: no rows; @param slotValues -1: no slots */
    void open(long rowValues, long slotValues, RowEncoding encoding) {
      rows = rowValues < 0 ? null : new Rows.Writer((int) rowValues, encoding);
      slots = slotValues < 0 ? null : new Rows.Writer((int) slotValues, encoding);
    }

    public Rows.Writer rows() {
      return rows;
    }

    public Rows.Writer slots() {
      return slots;
    }
  }

  /** A find's reply as a protobuf message (gRPC, and the data plane's pooled items). */
  private static final class ProtoOut extends ProtoRows implements FindItems.Out<FindResponse> {
    private final FindResponse.Builder b = FindResponse.newBuilder();

    @Override
    public void begin(int dim, RowEncoding encoding, int keys, long rowValues, long slotValues,
        boolean frequencies) {
      b.setDim(dim);
      open(rowValues, slotValues, encoding);
    }

    @Override
    public FindResponse finish(byte[] found, long[] frequencies, long[] updateCounts) {
      b.setFound(ByteString.copyFrom(found));
      if (rows != null) {
        b.setRows(rows.toByteString()).setRowEncoding(rows.encoding());
      }
      if (slots != null) {
        b.setSlots(slots.toByteString());
        for (long c : updateCounts) {
          b.addUpdateCounts(c);
        }
      }
      if (frequencies != null) {
        for (long f : frequencies) {
          b.addFrequencies(f);
        }
      }
      return b.build();
    }
  }

  /** A sample's reply as a protobuf message. */
  private static final class ProtoSampleOut extends ProtoRows
      implements SampleItems.Out<SampleResponse> {
    @Override
    public void begin(int rowValues, int slotValues, RowEncoding encoding) {
      open(rowValues, slotValues, encoding);
    }

    @Override
    public SampleResponse finish(SampleResponse.Builder head) {
      if (rows != null) {
        head.setRows(rows.toByteString());
      }
      if (slots != null) {
        head.setSlots(slots.toByteString());
      }
      return head.build();
    }
  }

  private SampleResponse sample(SampleRequest req) {
    return SampleItems.sample(engine, req, new ProtoSampleOut());
  }

  /** A pooled reply: one vector per bag in the requested encoding, and the keys' found bits. */
  private static FindResponse pooledReply(TableStore t, float[] pooled, byte[] found,
      RowEncoding encoding) {
    Rows.Writer w = new Rows.Writer(pooled.length, encoding);
    w.put(0, pooled, 0, pooled.length);
    return FindResponse.newBuilder().setDim(t.dim).setPooled(w.toByteString())
        .setRowEncoding(w.encoding()).setFound(ByteString.copyFrom(found)).build();
  }

  @Override
  public void topK(TopKRequest req, StreamObserver<TopKResponse> out) {
    budgeted(out, req.getTable(), topKCost(req), () -> topKAnswer(req));
  }

  /**
   * Whether a top-k is answered on the thread that read it: a graph search of a few thousand
   * candidates costs less than the two thread hand-offs of the pool (measured:
   * docs/benchmarks.md, issue 32); a scan must not hold an event loop and goes to {@link
   * #scans()}. Both transports ask this.
   */
  boolean topKInline(TopKRequest req) {
    return engine.isShortSearch(req.getTable(), req.getNumQueries(), req.getMetric(),
        req.getBiasLastDim(), req.getSearchBreadth());
  }

  /** Where a top-k that is not {@link #topKInline inline} runs. */
  java.util.concurrent.Executor scans() {
    return scans;
  }

  /** A top-k's answer (run it inside {@link #execute}); the one body both transports run. */
  TopKResponse topKAnswer(TopKRequest req) {
    TableStore t = engine.get(req.getTable());
    if (req.getMetric() == Metric.UNRECOGNIZED) {
      throw TableException.invalid("table '%s': metric %d is not one of DOT (1) and COSINE (2)"
          + " (0: the table's)", req.getTable(), req.getMetricValue());
    }
    Rows.floatCount(req.getQueries(), "queries");
    PackedKeys exclude = PackedKeys.fromProto(req.getExclude(), t.maxKeyBytes, "exclude");
    TopKHits r = engine.topK(req.getTable(), Rows.decode(req.getQueries()),
        req.getNumQueries(), req.getK(), req.getBiasLastDim(), req.getMetric(), exclude,
        req.getSearchBreadth());
    TopKResponse.Builder b = TopKResponse.newBuilder().setKeys(r.keys().toProto())
        .setApproximate(r.approximate());
    for (float s : r.scores()) {
      b.addScores(s);
    }
    for (int c : r.counts()) {
      b.addCounts(c);
    }
    return b.build();
  }

  @Override
  public void save(SaveRequest req, StreamObserver<SaveResponse> out) {
    run(out, req.getTable(), () -> SaveResponse.newBuilder()
        .setFile(engine.save(req.getTable(), req.getDirectory(), req.getStep())).build());
  }

  @Override
  public void restore(RestoreRequest req, StreamObserver<RestoreResponse> out) {
    run(out, req.getTable(), () -> RestoreResponse.newBuilder()
        .setKeys(engine.restore(req.getTable(), req.getDirectory(), req.getFilesList())).build());
  }

  @Override
  public void scan(ScanRequest req, StreamObserver<ScanResponse> out) {
    run(out, req.getTable(), () -> engine.commands().onCurrentStore(req.getTable(), t -> {
      int n = Scans.pageSize(t, req.getCursor(), req.getLimit(), req.getGeneration());
      Rows.Writer rows = new Rows.Writer(n * t.dim, req.getRowEncoding());
      Scans.Page page = Scans.read(t, req.getCursor(), n, rows);
      ScanResponse.Builder b = ScanResponse.newBuilder().setKeys(page.keys().toProto())
          .setRowEncoding(rows.encoding()).setNextCursor(page.next())
          .setGeneration(page.generation());
      ByteString bytes = rows.toByteString();
      b.setRows(bytes.substring(0, page.keys().size() * t.dim
          * Rows.bytesPerValue(rows.encoding())));
      for (int i = 0; i < page.keys().size(); i++) {
        b.addFrequencies(page.frequencies()[i]).addSteps(page.steps()[i]);
      }
      return b.build();
    }));
  }

  @Override
  public void evict(EvictRequest req, StreamObserver<EvictResponse> out) {
    run(out, req.getTable(), () -> engine.evict(req));
  }

  @Override
  public void stats(StatsRequest req, StreamObserver<StatsResponse> out) {
    run(out, "", engine::stats);
  }

  private <T> void run(StreamObserver<T> out, String table, Callable<T> call) {
    T result;
    try {
      result = execute(table, call);
    } catch (TableException e) {
      out.onError(toStatus(e.code()).withDescription(e.getMessage()).asRuntimeException());
      return;
    }
    out.onNext(result);
    out.onCompleted();
  }

  /**
   * Runs a call on a ready shard; every failure comes out as a {@link TableException} whose code
   * and message are what the caller is told (no stack trace crosses the wire).
   */
  <T> T execute(String table, Callable<T> call) {
    try {
      String notReady = engine.notReadyMessage();
      if (notReady != null) {
        throw new TableException(ErrorCode.UNAVAILABLE, notReady);
      }
      return call.call();
    } catch (TableException e) {
      throw e;
    } catch (OutOfMemoryError e) {
      throw new TableException(ErrorCode.RESOURCE_EXHAUSTED,
          "table '" + table + "': server out of memory");
    } catch (Exception e) {
      log.log(Level.WARNING, "internal error on table '" + table + "'", e);
      throw new TableException(ErrorCode.INTERNAL, "table '" + table + "': internal error: " + e);
    }
  }

  @Override
  public void dataPlane(DataPlaneRequest req, StreamObserver<DataPlaneResponse> out) {
    out.onNext(DataPlaneResponse.newBuilder().setPort(dataPlanePort)
        .setVersion(dev.dynembed.table.common.dataplane.DataPlaneFrames.VERSION).build());
    out.onCompleted();
  }

  @Override
  public void buildIndex(dev.dynembed.table.v1.BuildIndexRequest req,
      StreamObserver<dev.dynembed.table.v1.IndexInfo> out) {
    run(out, req.getTable(), () -> engine.buildIndex(req));
  }

  @Override
  public void getSlotMap(dev.dynembed.table.v1.GetSlotMapRequest req,
      StreamObserver<dev.dynembed.table.v1.SlotMap> out) {
    run(out, "", () -> engine.slotMap().toProto());
  }

  @Override
  public void setSlotMap(dev.dynembed.table.v1.SlotMap req,
      StreamObserver<dev.dynembed.table.v1.SlotMap> out) {
    run(out, "", () -> engine.installSlotMap(
        dev.dynembed.table.common.SlotMap.fromProto(req)).toProto());
  }

  @Override
  public void exportSlots(dev.dynembed.table.v1.ExportSlotsRequest req,
      StreamObserver<dev.dynembed.table.v1.ExportSlotsResponse> out) {
    run(out, req.getTable(), () -> {
      SlotMoves.Page p = engine.moves().export(req.getTable(), SlotMoves.bounds(
          req.getRangesList()), req.getCursor(), req.getLimit(), req.getDirty(), req.getLast());
      return dev.dynembed.table.v1.ExportSlotsResponse.newBuilder()
          .setRows(SlotMoves.toProto(p)).setNext(p.next()).build();
    });
  }

  @Override
  public void importSlots(dev.dynembed.table.v1.ImportSlotsRequest req,
      StreamObserver<dev.dynembed.table.v1.ImportSlotsResponse> out) {
    run(out, req.getTable(), () -> dev.dynembed.table.v1.ImportSlotsResponse.newBuilder()
        .setStaged(engine.moves().importRows(req.getTable(),
            SlotMoves.fromProto(req.getRows(), 0))).build());
  }

  @Override
  public void commitSlots(dev.dynembed.table.v1.CommitSlotsRequest req,
      StreamObserver<dev.dynembed.table.v1.CommitSlotsResponse> out) {
    run(out, "", () -> {
      if (req.getAbort()) {
        engine.moves().abortImport();
        return dev.dynembed.table.v1.CommitSlotsResponse.getDefaultInstance();
      }
      if (req.getPrepare()) {
        return dev.dynembed.table.v1.CommitSlotsResponse.newBuilder()
            .setPrepared(engine.moves().prepare()).build();
      }
      return dev.dynembed.table.v1.CommitSlotsResponse.newBuilder().setMerged(
          engine.moves().commit(dev.dynembed.table.common.SlotMap.fromProto(req.getMap()),
              req.getExpectedRecords()))
          .build();
    });
  }

  @Override
  public void dropUnowned(dev.dynembed.table.v1.DropUnownedRequest req,
      StreamObserver<dev.dynembed.table.v1.DropUnownedResponse> out) {
    run(out, "", () -> dev.dynembed.table.v1.DropUnownedResponse.newBuilder()
        .setDropped(engine.moves().dropUnowned()).build());
  }

  private volatile int dataPlanePort; // 0: none

  /** Announces the native data plane's port through {@code DataPlane}, before gRPC starts. */
  void announceDataPlane(int port) {
    this.dataPlanePort = port;
  }

  static Status toStatus(ErrorCode code) {
    return Status.fromCode(Status.Code.valueOf(code.grpcName()));
  }
}
