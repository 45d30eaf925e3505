package dev.dynembed.table.engine;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.GrowTableRequest;
import dev.dynembed.table.v1.InitializerConfig;
import dev.dynembed.table.v1.TableConfig;

/**
 * A table's rows widened to a larger dim (docs/design/0025-cells-and-rules.md, "A growing
 * dimension"): a rebuild of the store, as an eviction's, into a store of the new width. Each row
 * keeps its values in its first columns; its new columns get what the initializer gives a new
 * row of the key at the new width (its value stream is sequential per key, so a grown row's
 * first columns are also what a fresh row of the key would hold: the grown table is the table a
 * fresh one of the new dim would be, trained on the old columns); each slot row keeps its values
 * and its new columns start as a new row's slots (Adagrad's initial accumulator, zero moments, a
 * key policy's statistics kept, since they sit in the first columns). A grow may start the new
 * columns of the rows it holds otherwise ({@code new_columns}: zeros, or a random start where new
 * keys start at zero), still as a pure function of the key. Metadata and admission counts stay.
 * A pure function of the store and the request: a replay of the log's grow record (the request
 * itself), and a follower, widen alike.
 */
final class TableGrowth {
  private TableGrowth() {}

  /** The table's config grown as {@code g} asks (its initializer, when set, the table's). */
  static TableConfig grown(TableStore t, GrowTableRequest g) {
    TableConfig.Builder b = t.config().toBuilder().setDim(g.getDim());
    if (g.hasInitializer()) {
      b.setInitializer(g.getInitializer());
    }
    return TableConfigs.normalize(b.build());
  }

  /**
   * Refuses a grow this table cannot take; true when the table already is what it asks ({@code
   * dim} wide, with its initializer): a resend, or a shard an interrupted grow reached.
   */
  static boolean check(TableStore t, GrowTableRequest g) {
    int dim = g.getDim();
    if (dim == t.dim) {
      if (grown(t, g).equals(t.config())) {
        return true;
      }
      throw TableException.invalid("table '%s' already has dim %d: a grow to another dim may"
          + " change its initializer, not a grow to its own", t.name(), dim);
    }
    if (dim < t.dim || dim > Limits.MAX_DIM) {
      throw TableException.invalid("table '%s' has dim %d: it can grow to a dim in [%d, %d],"
          + " not %d", t.name(), t.dim, t.dim, Limits.MAX_DIM, dim);
    }
    if (t.config().getRedisTier()) {
      throw TableException.precondition("table '%s' keeps rows in a Redis tier: growing it is"
          + " not supported yet (save it, restore it into a table without a tier, grow that)",
          t.name());
    }
    newColumns(t, grown(t, g), g);
    return false;
  }

  /**
   * The initializer of the held rows' new columns under the grown config {@code cfg}, checked as
   * a table's would be.
   */
  private static InitializerConfig newColumns(TableStore t, TableConfig cfg, GrowTableRequest g) {
    if (!g.hasNewColumns()) {
      return cfg.getInitializer();
    }
    try {
      return TableConfigs.normalize(cfg.toBuilder().setInitializer(g.getNewColumns()).build())
          .getInitializer();
    } catch (TableException e) {
      throw TableException.invalid("growing table '%s': new_columns is not a valid initializer"
          + " (%s)", t.name(), e.getMessage());
    }
  }

  /** One row's record (row, then slot rows) at the grown width. */
  private static final class Widening {
    final int d;
    final int dim;
    final int slots;
    final float[] newSlots;
    final RowInitializer rows;

    Widening(TableStore t, TableStore fresh, GrowTableRequest g) {
      this.d = t.dim;
      this.dim = g.getDim();
      this.slots = t.rowFloats / d - 1;
      this.newSlots = new float[slots * dim];
      fresh.optimizer.initSlots(newSlots, 0); // a new row's slots: the same for every key
      this.rows = new RowInitializer(newColumns(t, fresh.config(), g));
    }

    /** Writes into {@code rec} the record of key {@code hash} whose old one is at src[off]. */
    void widen(long hash, float[] src, int off, float[] rec) {
      rows.fill(hash, rec, 0, dim);
      System.arraycopy(src, off, rec, 0, d);
      for (int k = 0; k < slots; k++) {
        System.arraycopy(newSlots, k * dim, rec, dim + k * dim, dim);
        System.arraycopy(src, off + d + k * d, rec, dim + k * dim, d);
      }
    }
  }

  /**
   * The store of {@code t} (quiesced by the caller) with every row {@code g.dim} wide, the held
   * rows' new columns from {@code g}'s new_columns, else its initializer, else the table's. A
   * disk tier is shared with the new store; its rows are widened by {@link #widenCold}, once the
   * grow is decided and logged.
   */
  static TableStore widen(TableStore t, GrowTableRequest g) {
    TableConfig cfg = grown(t, g);
    TableStore fresh = new TableStore(cfg, t.shardIndex, t.numShards);
    Widening w = new Widening(t, fresh, g);
    float[] rec = new float[fresh.rowFloats];
    TableStore.Frozen f = t.freezeHot();
    for (int r = 0; r < f.size(); r++) {
      if (!f.isReady(r)) {
        continue;
      }
      PackedKeys.Builder b = new PackedKeys.Builder(1);
      f.appendKey(r, b);
      PackedKeys key = b.build();
      w.widen(key.hash(0), f.rowPage(r), f.rowBase(r), rec);
      fresh.restoreRow(key, 0, rec, 0, f.meta(r, TableStore.M_FREQ),
          f.meta(r, TableStore.M_STEP), f.meta(r, TableStore.M_UPDATES));
    }
    fresh.adoptPending(t); // t is retired with the swap: its counts move, not copied
    if (f.sketchCounters() != null) {
      fresh.admissionSketch().merge(AdmissionSketch.of(fresh.admissionSketch().width(),
          f.sketchCounters()));
    }
    if (t.cold() != null) {
      fresh.attachCold(t.cold());
    }
    return fresh;
  }

  /**
   * Rewrites the rows {@code t}'s disk tier holds at the width of {@code fresh} (the store {@link
   * #widen} made of it, sharing the tier), as {@link #widen} does the rows in memory. Called with
   * the table's lock held exclusively, after the grow was logged: a replay of the record does it
   * again on the rows the tier holds then.
   */
  static void widenCold(TableStore t, TableStore fresh, GrowTableRequest g) {
    ColdRows cold = t.cold();
    if (cold == null) {
      return;
    }
    Widening w = new Widening(t, fresh, g);
    cold.widen(fresh.rowFloats, r -> {
      float[] rec = new float[fresh.rowFloats];
      w.widen(dev.dynembed.table.common.KeyHashing.hash(r.key(), 0, r.key().length), r.values(),
          0, rec);
      return new ColdRows.Record(r.key(), rec, r.frequency(), r.step(), r.updates());
    });
  }
}
