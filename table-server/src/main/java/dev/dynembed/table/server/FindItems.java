package dev.dynembed.table.server;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.RowEncoding;

/**
 * The find and find_or_insert items (not pooled) of a Read, and the unary Find and FindOrInsert
 * calls: checked, run on the store, their reply written by an {@link Out}: a protobuf
 * {@code FindResponse} for gRPC ({@link TableGrpcService}), or its wire bytes straight into the
 * outgoing network buffer for the native data plane ({@link DirectReplies}), the store copying
 * each row once, from its pages into the reply.
 */
final class FindItems {
  private FindItems() {}

  /**
   * Where a reply goes. Called as {@code begin}, then the store writes {@code rows()} and
   * {@code slots()} (those announced), then {@code finish}.
   *
   * @param <R> the finished reply
   */
  interface Out<R> {
    /**
     * @param encoding the rows' encoding, normalized
     * @param keys the keys answered
     * @param rowValues values of the rows field, or -1 for none
     * @param slotValues values of the slots field, or -1 for none
     * @param frequencies whether frequencies follow
     */
    void begin(int dim, RowEncoding encoding, int keys, long rowValues, long slotValues,
        boolean frequencies);

    Rows.Writer rows();

    Rows.Writer slots();

    /** @param frequencies null unless announced; @param updateCounts null unless slots were */
    R finish(byte[] found, long[] frequencies, long[] updateCounts);
  }

  static <R> R find(ShardEngine engine, FindRequest req, Out<R> out) {
    TableStore t = engine.get(req.getTable());
    PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
    Limits.checkReplyFloats(t.name(), "find", keys.size(), t.dim);
    out.begin(t.dim, Rows.normalize(req.getRowEncoding()), keys.size(),
        (long) keys.size() * t.dim, -1, false);
    byte[] found = new byte[(keys.size() + 7) >>> 3];
    t.find(keys, out.rows(), found);
    return out.finish(found, null, null);
  }

  /** @param noCount the call is a resend: count nothing */
  static <R> R findOrInsert(ShardEngine engine, FindOrInsertRequest req, boolean noCount,
      Out<R> out) {
    TableStore t = engine.get(req.getTable());
    PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
    int n = keys.size();
    int[] occ = null;
    if (req.getOccurrencesCount() > 0) {
      occ = new int[req.getOccurrencesCount()]; // the store checks there is one per key
      for (int i = 0; i < occ.length; i++) {
        occ[i] = req.getOccurrences(i);
      }
    }
    Limits.checkReplyFloats(t.name(), "findOrInsert", n,
        (req.getOmitRows() ? 0L : t.dim) + (req.getWithSlots() ? t.slotFloats() : 0L));
    out.begin(t.dim, Rows.normalize(req.getRowEncoding()), n,
        req.getOmitRows() ? -1 : (long) n * t.dim,
        req.getWithSlots() ? (long) n * t.slotFloats() : -1, req.getWithFrequencies());
    Rows.Writer rows = req.getOmitRows() ? null : out.rows();
    Rows.Writer slots = req.getWithSlots() ? out.slots() : null;
    byte[] found = new byte[(n + 7) >>> 3];
    long[] freqs = req.getWithFrequencies() ? new long[n] : null;
    long[] counts = req.getWithSlots() ? new long[n] : null;
    t.findOrInsert(keys, occ, !req.getNoCount() && !noCount, rows, found, freqs, slots, counts);
    return out.finish(found, freqs, counts);
  }
}
