package dev.dynembed.table.server;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.engine.SampleCandidates;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.TableStore;
import dev.dynembed.table.v1.RowEncoding;
import dev.dynembed.table.v1.SampleRequest;
import dev.dynembed.table.v1.SampleResponse;

/**
 * The sample items of a Read (and the unary Sample call): checked, drawn, and their reply written
 * by an {@link Out}: the drawn keys' rows and slots by the store into the Out's writers (a reply
 * array for gRPC, the outgoing network buffer for the native data plane), everything else into
 * the message's {@code head}.
 */
final class SampleItems {
  private SampleItems() {}

  /**
   * Where a sample's reply goes: {@code begin} (only for distinct draws with rows), the store
   * writes {@code rows()} and {@code slots()}, then {@code finish} with the rest of the message.
   *
   * @param <R> the finished reply
   */
  interface Out<R> {
    /** @param slotValues values of the slots field, or -1 for none */
    void begin(int rowValues, int slotValues, RowEncoding encoding);

    Rows.Writer rows();

    Rows.Writer slots();

    /** @param head the message without its rows and slots bytes */
    R finish(SampleResponse.Builder head);
  }

  static <R> R sample(ShardEngine engine, SampleRequest req, Out<R> out) {
    TableStore t = engine.get(req.getTable());
    PackedKeys pos = PackedKeys.fromProto(req.getPositives(), t.maxKeyBytes, "positives");
    RowEncoding encoding = Rows.normalize(req.getRowEncoding()); // refused before drawing
    if (req.getOmitRows() && req.getWithSlots()) {
      throw dev.dynembed.table.common.TableException.invalid("table '%s': a sample cannot both"
          + " omit rows and return their optimizer slots (omit_rows with with_slots)", t.name());
    }
    boolean rows = req.getDistinctWithRows() && !req.getOmitRows();
    if (rows) { // at most one row per draw comes back
      Limits.checkReplyFloats(t.name(), "sample", Math.max(0, req.getNumSampled()),
          t.dim + (req.getWithSlots() ? (long) t.slotFloats() : 0L));
    }
    SampleCandidates r = engine.sample(t, pos, req.getNumSampled(), req.getSampler(),
        req.getAlpha(), req.getSeed(), req.getDistinctWithRows(), req.getNoneIfEmpty());
    SampleResponse.Builder b = SampleResponse.newBuilder()
        .setKeys(r.keys().toProto()).setMass(r.mass()).setNumKeys(r.numKeys());
    if (r.drawIndex() != null && rows) {
      out.begin(r.distinctCount() * t.dim,
          req.getWithSlots() ? r.distinctCount() * t.slotFloats() : -1, encoding);
      r.copyRows(t, out.rows());
      b.setRowEncoding(encoding);
      if (req.getWithSlots()) {
        long[] counts = new long[r.distinctCount()];
        r.copySlots(t, out.slots(), counts);
        for (long c : counts) {
          b.addUpdateCounts(c);
        }
      }
    }
    if (r.drawIndex() != null) {
      for (int d : r.drawIndex()) {
        b.addDrawIndex(d);
      }
    }
    for (int i = 0; i < r.positive().length; i++) {
      b.addIsPositive(r.positive()[i]).addProbability(r.probability()[i]);
    }
    return out.finish(b);
  }
}
