package dev.dynembed.table.engine;

import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.RowSink;
import dev.dynembed.table.common.TableException;

/**
 * Pages of a live scan of one store (the {@code Scan} verb): rows by id from a cursor, skipping
 * rows still being inserted. A cursor is only meaningful within one store ({@link
 * TableStore#generation}).
 */
public final class Scans {
  private Scans() {}

  /** The largest page. */
  public static final int MAX_PAGE = 1 << 16;

  /**
   * Cursor flags. A table with a disk tier is scanned cold rows first (position p: {@code COLD |
   * p}, on one RocksDB snapshot), then the rows in memory ({@code HOT | row id}); a row promoted
   * during the cold pages comes again among the hot ones (a scan may return it twice, never
   * miss it). Without a disk tier cursors are row ids, as before. 0 starts a scan.
   */
  static final long COLD = 1L << 62;
  static final long HOT = 1L << 61;
  private static final long POSITION = HOT - 1;

  /** One page: its keys, rows (written to the sink), frequencies, steps and the next cursor. */
  public record Page(PackedKeys keys, long[] frequencies, long[] steps, long next,
      long generation) {}

  /**
   * Checks the request and returns the page's size bound: {@code limit} (0 = 4096) within
   * [1, MAX_PAGE], and the reply's floats within the limit of one reply.
   */
  public static int pageSize(TableStore t, long cursor, int limit, long generation) {
    if (generation != 0 && generation != t.generation) {
      throw TableException.precondition("table '%s' was rebuilt or restored since the scan"
          + " began (an eviction, a restore or a shard restart): start the scan again", t.name());
    }
    if (generation == 0 && cursor != 0) {
      throw TableException.invalid("table '%s': a scan page after the first needs the first"
          + " page's generation", t.name());
    }
    int n = limit == 0 ? 4096 : limit;
    if (n < 1 || n > MAX_PAGE) {
      throw TableException.invalid("table '%s': a scan page holds 1..%d keys but %d were asked",
          t.name(), MAX_PAGE, Integer.toUnsignedLong(limit));
    }
    long flags = cursor & (COLD | HOT);
    long pos = cursor & POSITION;
    if (cursor < 0 || flags == (COLD | HOT) || (flags != COLD && pos > Integer.MAX_VALUE)
        || (flags == COLD && t.cold() == null)) {
      throw TableException.invalid("table '%s': scan cursor %d is invalid", t.name(), cursor);
    }
    Limits.checkReplyFloats(t.name(), "scan", n, t.dim());
    return n;
  }

  /**
   * Reads up to {@code n} rows from {@code cursor}: keys, rows into {@code rows} (row i of the
   * page), frequencies and steps. A store with a tier below memory is read under its lock shared
   * ({@link ShardCommands#onCurrentStore}): an eviction publishes its fresh store before its
   * victims reach the tier, and a page read in between would miss them.
   */
  public static Page read(TableStore t, long cursor, int n, RowSink rows) {
    ColdRows cold = t.cold();
    if ((cursor & COLD) != 0 || (cursor == 0 && cold != null && cold.size() > 0)) {
      long pos = cursor & POSITION;
      java.util.List<ColdRows.Record> recs = cold.page(pos, n);
      PackedKeys.Builder keys = new PackedKeys.Builder(recs.size());
      long[] freqs = new long[recs.size()];
      long[] steps = new long[recs.size()];
      for (int i = 0; i < recs.size(); i++) {
        ColdRows.Record r = recs.get(i);
        keys.add(r.key(), 0, r.key().length);
        rows.row(i, r.values(), 0, t.dim);
        freqs[i] = r.frequency();
        steps[i] = r.step();
      }
      long next = recs.size() == n ? COLD | (pos + n) : HOT;
      return new Page(keys.build(), freqs, steps, next, t.generation);
    }
    long flag = cursor & HOT;
    int end = t.size();
    PackedKeys.Builder keys = new PackedKeys.Builder(n);
    long[] freqs = new long[n];
    long[] steps = new long[n];
    int i = 0;
    int row = (int) (cursor & POSITION);
    for (; row < end && i < n; row++) {
      if (!t.isReady(row)) {
        continue; // being inserted: the row is published with its key
      }
      t.appendKey(row, keys);
      t.copyRow(row, rows, i);
      freqs[i] = t.meta(row, TableStore.M_FREQ);
      steps[i] = t.meta(row, TableStore.M_STEP);
      i++;
    }
    return new Page(keys.build(), java.util.Arrays.copyOf(freqs, i),
        java.util.Arrays.copyOf(steps, i), row >= end ? 0 : flag | row, t.generation);
  }
}
