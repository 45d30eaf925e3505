package dev.dynembed.table.engine;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.KeyBatch;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadResult;
import dev.dynembed.table.v1.WriteRequest;
import java.util.List;
import java.util.function.BiFunction;

/**
 * The protobuf items of {@code Read} and {@code Write} (gRPC, the native data plane, the log's
 * replay in tests) as {@link ShardCommands} sees them. Logged forms reuse the request's own
 * messages: a write is logged as it came, a find_or_insert as its keys and occurrences.
 */
public final class ProtoItems {
  private ProtoItems() {}

  /** Read items answered by {@code runner}. */
  public static ShardCommands.ReadItems<ReadItem, ReadResult> reads(ShardEngine.ReadItemRunner runner) {
    return new ShardCommands.ReadItems<>() {
      @Override
      public String table(ReadItem item) {
        return switch (item.getItemCase()) {
          case FIND -> item.getFind().getTable();
          case FIND_OR_INSERT -> item.getFindOrInsert().getTable();
          case SAMPLE -> item.getSample().getTable();
          case PARTNERS -> item.getPartners().getTable();
          default -> "";
        };
      }

      @Override
      public ShardCommands.Inserts inserts(ReadItem item) {
        if (item.getItemCase() != ReadItem.ItemCase.FIND_OR_INSERT) {
          return null;
        }
        FindOrInsertRequest f = item.getFindOrInsert();
        return new ShardCommands.Inserts(f.getKeys().getLengthsCount(),
            f.getKeys().getUtf8().size(), f.getNoCount());
      }

      @Override
      public ShardCommands.ReadCost cost(ReadItem item, TableStore t) {
        return ProtoItems.cost(item, t);
      }

      @Override
      public ReadResult run(ReadItem item, boolean resent) {
        return runner.run(item, resent);
      }

      @Override
      public FindOrInsertRequest logged(ReadItem item, boolean noCount) {
        FindOrInsertRequest f = item.getFindOrInsert();
        return ProtoItems.logged(f.getTable(), f.getKeys(), occurrences(f), noCount);
      }
    };
  }

  /**
   * What a protobuf read item may take (its table {@code t}, null if there is none), from the
   * request's counts alone: nothing is parsed or checked here (an unknown row encoding counts as
   * 4 bytes a value and is refused when the item runs).
   */
  public static ShardCommands.ReadCost cost(ReadItem item, TableStore t) {
    if (t == null) {
      return ShardCommands.ReadCost.NONE;
    }
    return switch (item.getItemCase()) {
      case FIND -> {
        var f = item.getFind();
        int n = f.getKeys().getLengthsCount();
        yield f.hasPool()
            ? ShardCommands.ReadCost.pooled(n, f.getPool().getBagSizesCount(), t.dim,
                bytesPerValue(f.getRowEncodingValue()))
            : ShardCommands.ReadCost.rows(n, t.dim, bytesPerValue(f.getRowEncodingValue()));
      }
      case FIND_OR_INSERT -> {
        var f = item.getFindOrInsert();
        int n = f.getKeys().getLengthsCount();
        int bpv = bytesPerValue(f.getRowEncodingValue());
        yield f.hasPool() ? ShardCommands.ReadCost.pooled(n, f.getPool().getBagSizesCount(),
            t.dim, bpv)
            : ShardCommands.ReadCost.rows(n, (f.getOmitRows() ? 0L : t.dim)
                + (f.getWithSlots() ? t.slotFloats() : 0L), bpv);
      }
      case SAMPLE -> {
        var s = item.getSample();
        yield ShardCommands.ReadCost.sample(s.getNumSampled() & 0xFFFFFFFFL,
            s.getPositives().getLengthsCount(), s.getDistinctWithRows() && !s.getOmitRows()
                ? t.dim + (s.getWithSlots() ? (long) t.slotFloats() : 0L) : 0L,
            bytesPerValue(s.getRowEncodingValue()));
      }
      case PARTNERS -> {
        var p = item.getPartners();
        long anchors = p.getAnchors().getLengthsCount();
        yield ShardCommands.ReadCost.sample(anchors * Integer.toUnsignedLong(p.getNumDraws()),
            anchors, 0, 4);
      }
      default -> ShardCommands.ReadCost.NONE;
    };
  }

  /** A partners item answered from the table's co-occurrence counts. */
  public static dev.dynembed.table.v1.PartnersResponse partners(ShardEngine engine,
      dev.dynembed.table.v1.PartnersRequest req) {
    TableStore t = engine.get(req.getTable());
    PackedKeys anchors = PackedKeys.fromProto(req.getAnchors(), t.maxKeyBytes, "anchors");
    TableStore.PartnerDraws d = t.drawPartners(anchors, req.getNumDraws(),
        PairCounts.Weight.of(req.getWeightValue(), t.name()), req.getSeed());
    var b = dev.dynembed.table.v1.PartnersResponse.newBuilder().setKeys(d.keys().toProto());
    for (float x : d.probability()) {
      b.addProbabilities(x);
    }
    for (int c : d.counts()) {
      b.addCounts(c);
    }
    return b.build();
  }

  private static int bytesPerValue(int encoding) {
    var e = dev.dynembed.table.v1.RowEncoding.forNumber(encoding);
    return e == null ? 4 : dev.dynembed.table.common.Rows.bytesPerValue(e);
  }

  /** A find_or_insert as the log keeps it: keys, occurrences, whether it counted; no rows. */
  public static FindOrInsertRequest logged(String table, KeyBatch keys, List<Integer> occurrences,
      boolean noCount) {
    return FindOrInsertRequest.newBuilder().setTable(table).setKeys(keys)
        .addAllOccurrences(occurrences).setNoCount(noCount).setOmitRows(true).build();
  }

  /**
   * The occurrences a find_or_insert counted: as given, or for a pooled one without them, once
   * per bag entry of each key (the log keeps keys and counts, not bags).
   */
  private static List<Integer> occurrences(FindOrInsertRequest f) {
    if (f.getOccurrencesCount() > 0 || !f.hasPool()) {
      return f.getOccurrencesList();
    }
    int n = f.getKeys().getLengthsCount();
    return boxed(KeyBags.fromProto(f.getPool(), n).occurrences(n));
  }

  /** {@code values} as a list (empty for null: one occurrence per key). */
  public static List<Integer> boxed(int[] values) {
    if (values == null) {
      return List.of();
    }
    Integer[] out = new Integer[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = values[i];
    }
    return List.of(out);
  }

  static ShardCommands.WriteItems<ApplyGradientsRequest> writes(WriteRequest req,
      BiFunction<TableStore, ApplyGradientsRequest, TableStore.CheckedGradients> check) {
    return new ShardCommands.WriteItems<>() {
      @Override
      public String table(ApplyGradientsRequest item) {
        return item.getTable();
      }

      @Override
      public TableStore.CheckedGradients check(TableStore table, ApplyGradientsRequest item) {
        return check.apply(table, item);
      }

      @Override
      public long step(ApplyGradientsRequest item) {
        return item.getStep();
      }

      @Override
      public ShardCommands.Inserts keys(ApplyGradientsRequest item) {
        return new ShardCommands.Inserts(item.getKeys().getLengthsCount(),
            item.getKeys().getUtf8().size(), false);
      }

      @Override
      public WriteRequest logged(CallId id, List<ApplyGradientsRequest> items) {
        return req; // logged as it came
      }
    };
  }
}
