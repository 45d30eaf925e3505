package dev.dynembed.table.engine;

import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A shard's side of slot moves (docs/design/0021-slot-moves-proposal.md, "Moving a slot range").
 *
 * <p>Source: {@link #export} pages through a table's rows in the moving slots and, from its first
 * page on, records the keys that writes touch in those slots (a dirty set, kept beside the store:
 * it works with or without a log); dirty exports send their current records again. Once the
 * source's map gives the slots away (every write it took has finished, and no new one can touch
 * them), the last dirty export is final and carries the slots' admission counts. {@link
 * #dropUnowned} then removes every row the map does not give this shard (logged as evictions).
 *
 * <p>Destination: {@link #importRows} stages records in stores no call, sampler, scan or
 * checkpoint sees; {@link #prepare} (before the flip, off the pause) writes what is staged so
 * far to checkpoint files under the log directory and stages the rest afresh; {@link #commit}
 * writes the rest (the last dirty records: few), logs one {@code ImportedSlots} record naming
 * every file, merges them into the live tables under their exclusive locks, forces the record
 * to the disk and then installs the map that gives the slots to this shard. Every step can be
 * repeated: an import replaces a staged record, a commit of an already installed map merges
 * nothing new.
 */
public final class SlotMoves {
  /** Most keys one export page holds. */
  public static final int MAX_PAGE_KEYS = 65_536;

  private static final java.util.logging.Logger LOG =
      java.util.logging.Logger.getLogger(SlotMoves.class.getName());
  /** What slot moves use of their engine: the slot map, the live stores, evictions. */
  interface Engine extends ShardTables {
    void checkReady();

    dev.dynembed.table.common.SlotMap slotMap();

    dev.dynembed.table.common.SlotMap installSlotMap(dev.dynembed.table.common.SlotMap m);

    List<TableStore> tables();

    java.util.TreeMap<String, TableStore> lockLive(java.util.Collection<String> names,
        boolean skipDropped);

    ShardJournal journal();

    RedisTier redisTier();

    ShardEvictions evictions();
  }

  private final Engine engine;
  private final ConcurrentHashMap<String, Tracker> outgoing = new ConcurrentHashMap<>();
  private final Map<String, Staged> staging = new HashMap<>(); // guarded by this
  /** Staged stores already written by {@link #prepare}, merged in this order. */
  private final List<Layer> prepared = new ArrayList<>(); // guarded by this
  /** Records imported since the last commit or abort (a commit checks the driver's count). */
  private long received; // guarded by this
  /** Keys the source evicted after sending them: dropped once the layers are merged. */
  private final Map<String, Set<String>> removedKeys = new HashMap<>(); // guarded by this
  private int layers; // guarded by this

  /** Log directory entries of imports: {@code import-LSN} once logged. */
  static final String IMPORTED = "import-";
  /** Where {@link #prepare} writes until the commit logs it. */
  static final String PENDING = "import-pending";

  /** One staged store written to {@code PENDING/sub/file}. */
  private record Layer(String table, TableStore store, String sub,
      dev.dynembed.table.v1.CheckpointFile file) {}

  SlotMoves(Engine engine) {
    this.engine = engine;
  }

  /**
   * The keys of the moving slots that changed in one table since its move began: written,
   * promoted or demoted between the tiers, evicted. Follows the table's store through the
   * rebuilds evictions make.
   */
  static final class Tracker {
    /** The table's store now (an eviction's rebuild replaces it: {@link #replaced}). */
    volatile TableStore store;
    final SlotMap map;
    final boolean[] moving;
    final Set<String> dirty = ConcurrentHashMap.newKeySet();
    /** Keys drained while the table held them in neither tier: sent as removed at the end. */
    final Set<String> removed = ConcurrentHashMap.newKeySet();
    /** The store the copy's pass over the memory rows is positioned in. */
    TableStore scanned;

    Tracker(TableStore store, SlotMap map, boolean[] moving) {
      this.store = store;
      this.map = map;
      this.moving = moving;
    }

    void touched(PackedKeys keys) {
      for (int i = 0; i < keys.size(); i++) {
        touched(keys, i);
      }
    }

    void touched(PackedKeys keys, int i) {
      if (moving[map.slotOf(keys.hash(i))]) {
        dirty.add(keys.key(i));
      }
    }

    /**
     * An eviction is rebuilding the store (the caller holds {@code old}'s lock exclusively,
     * before {@code fresh} is published): the keys of the moving slots that {@code fresh} does
     * not hold go to the tier below or are removed; the drain reads them where they are then.
     * Writes to {@code fresh} are recorded from now on; drains read it once {@link #rebuilt}
     * says its victims are in the tier.
     */
    void replaced(TableStore old, TableStore fresh) {
      for (int r = 0; r < old.rowCount(); r++) {
        PackedKeys k = old.keyAt(r);
        if (moving[map.slotOf(k.hash(0))] && fresh.lookupHot(k, 0) < 0) {
          dirty.add(k.key(0));
        }
      }
      fresh.moveTracker = this;
    }

    /**
     * The rebuilt store is published and its victims reached the tier below (or came back into
     * it): drains and the copy read it from now on. Until then they read the old store, which
     * still holds every row: a key is never in neither tier for them.
     */
    void rebuilt(TableStore fresh) {
      store = fresh;
    }

    boolean sameSlots(boolean[] other) {
      return java.util.Arrays.equals(moving, other);
    }
  }

  /**
   * Rows of one export page.
   *
   * @param records per key, the row then its optimizer slots ({@code recordFloats} values)
   * @param pendingHashes admission counts of keys not admitted yet (last page of a final export)
   * @param removed keys sent before that the source holds no more (last page of a final export)
   * @param next the cursor of the next page, 0 when this was the last
   */
  public record Page(PackedKeys keys, float[] records, int recordFloats, long[] frequencies,
      long[] steps, long[] updates, long[] pendingHashes, long[] pendingCounts,
      PackedKeys removed, long next, byte[] pairs) {}

  /** A page in its wire form. */
  public static dev.dynembed.table.v1.SlotRows toProto(Page p) {
    dev.dynembed.table.v1.SlotRows.Builder b = dev.dynembed.table.v1.SlotRows.newBuilder()
        .setKeys(p.keys().toProto()).setRecords(dev.dynembed.table.common.Rows.encode(
            p.records())).setRecordFloats(p.recordFloats());
    for (int i = 0; i < p.frequencies().length; i++) {
      b.addFrequencies(p.frequencies()[i]).addSteps(p.steps()[i]).addUpdates(p.updates()[i]);
    }
    for (int j = 0; j < p.pendingHashes().length; j++) {
      b.addPendingHashes(p.pendingHashes()[j]).addPendingCounts(p.pendingCounts()[j]);
    }
    if (p.removed().size() > 0) {
      b.setRemoved(p.removed().toProto());
    }
    if (p.pairs() != null && p.pairs().length > 0) {
      b.setPairSummaries(com.google.protobuf.ByteString.copyFrom(p.pairs()));
    }
    return b.build();
  }

  /** A page from its wire form (shapes are checked by {@link #importRows}). */
  public static Page fromProto(dev.dynembed.table.v1.SlotRows r, long next) {
    PackedKeys keys = PackedKeys.fromProto(r.getKeys(),
        dev.dynembed.table.common.Limits.MAX_KEY_BYTES, "moved keys");
    return new Page(keys, dev.dynembed.table.common.Rows.decode(r.getRecords()),
        r.getRecordFloats(), toArray(r.getFrequenciesList()), toArray(r.getStepsList()),
        toArray(r.getUpdatesList()), toArray(r.getPendingHashesList()),
        toArray(r.getPendingCountsList()), PackedKeys.fromProto(r.getRemoved(),
            dev.dynembed.table.common.Limits.MAX_KEY_BYTES, "removed keys"), next,
        r.getPairSummaries().toByteArray());
  }

  private static long[] toArray(List<Long> values) {
    long[] out = new long[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.get(i);
    }
    return out;
  }

  /** The [start, end) bounds of a request's ranges. */
  public static int[] bounds(List<dev.dynembed.table.v1.SlotRange> ranges) {
    int[] out = new int[2 * ranges.size()];
    for (int i = 0; i < ranges.size(); i++) {
      out[2 * i] = (int) Math.min(Integer.MAX_VALUE, Integer.toUnsignedLong(
          ranges.get(i).getStart()));
      out[2 * i + 1] = (int) Math.min(Integer.MAX_VALUE, Integer.toUnsignedLong(
          ranges.get(i).getEnd()));
    }
    return out;
  }

  /** The slots set in {@code ranges} ([start, end) pairs) of the shard's map. */
  private boolean[] slots(int[] ranges) {
    SlotMap m = engine.slotMap();
    boolean[] moving = new boolean[m.slots()];
    if (ranges.length == 0 || ranges.length % 2 != 0) {
      throw TableException.invalid("a slot move names its slots as [start, end) ranges; %d"
          + " bounds were given", ranges.length);
    }
    for (int i = 0; i < ranges.length; i += 2) {
      int start = ranges[i];
      int end = ranges[i + 1];
      if (start < 0 || end > moving.length || start >= end) {
        throw TableException.invalid("slot range [%d, %d) is not within [0, %d)", start, end,
            moving.length);
      }
      java.util.Arrays.fill(moving, start, end, true);
    }
    return moving;
  }

  private TableStore movable(String table) {
    TableStore t = engine.get(table);
    return t;
  }

  /**
   * A page of the table's rows in the moving slots, from row {@code cursor} on; the first page
   * (cursor 0, not dirty) starts recording the keys writes touch in those slots. A dirty export
   * returns the recorded keys' current records and forgets them; a {@code last} one (only once
   * the map gives the slots away) also returns their admission counts.
   */
  public Page export(String table, int[] ranges, long cursor, int limit, boolean dirty,
      boolean last) {
    engine.checkReady();
    if (limit < 1 || limit > MAX_PAGE_KEYS) {
      throw TableException.invalid("an export page holds 1..%d keys, not %d", MAX_PAGE_KEYS,
          limit);
    }
    boolean[] moving = slots(ranges);
    TableStore t = movable(table);
    Tracker tr = outgoing.get(table);
    while (!dirty && cursor == 0 && !tracks(tr, t, moving)) {
      t.quiesce.writeLock().lock(); // no write in flight misses the tracker
      try {
        if (!t.retired) { // else an eviction replaced it meanwhile: track the new store
          tr = new Tracker(t, engine.slotMap(), moving);
          t.moveTracker = tr;
          outgoing.put(table, tr);
        }
      } finally {
        t.quiesce.writeLock().unlock();
      }
      if (tr == null || !tracks(tr, t, moving)) {
        t = movable(table);
      }
    }
    if (!tracks(tr, t, moving)) {
      throw moveRestarted(table);
    }
    if (!dirty) {
      return scan(tr, cursor, limit);
    }
    if (last) {
      SlotMap now = engine.slotMap();
      for (int s = 0; s < moving.length; s++) {
        if (moving[s] && now.ownerOfSlot(s) == engine.shardIndex()) {
          throw TableException.precondition("slot %d is still shard %d's (map epoch %d): the"
              + " final export comes after the map that gives the slots away", s,
              engine.shardIndex(), now.epoch());
        }
      }
    }
    return drain(tr, limit, last);
  }

  /** Whether {@code tr} records the moving slots of the table's current store. */
  private static boolean tracks(Tracker tr, TableStore t, boolean[] moving) {
    // t.moveTracker == tr: a store an eviction replaced just after the caller looked it up (the
    // tracker follows to the new one; a restore's new store has none)
    return tr != null && (tr.store == t || t.moveTracker == tr) && tr.sameSlots(moving);
  }

  private static TableException moveRestarted(String table) {
    return TableException.moveInterrupted("table '%s': no move of these slots is under way"
        + " here (its store was replaced by an eviction, a restore or a restart, or the move was"
        + " begun with other slots)", table);
  }

  /** Cursors from here on page through the tier below memory (position = cursor - COLD). */
  static final long COLD = 1L << 48;

  /**
   * The memory rows of the moving slots from row {@code cursor} on, then (cursors from {@link
   * #COLD} on) those of the tier below memory: keys that change tiers meanwhile are recorded
   * dirty, so a key that one pass missed is sent by the catch-up.
   */
  private Page scan(Tracker tr, long cursor, int limit) {
    TableStore t = tr.store;
    if (cursor >= COLD) {
      return scanCold(tr, t, cursor - COLD, limit);
    }
    if (tr.scanned != t) {
      // an eviction rebuilt the store since the last page: its rows have other positions, so
      // the pass starts again on the new store (rows sent twice are harmless; none is skipped)
      tr.scanned = t;
      cursor = 0;
    }
    int n = t.rowCount();
    Gathered g = new Gathered(t.rowFloats, Math.min(limit, 1024));
    float[] rec = new float[t.rowFloats];
    long row = cursor;
    for (; row < n && g.keys.size() < limit; row++) {
      PackedKeys k = t.keyAt((int) row);
      if (tr.moving[tr.map.slotOf(k.hash(0))]) {
        addRow(t, k, (int) row, g, rec);
      }
    }
    long next = row < n ? row : t.cold() != null ? COLD : 0;
    return g.page(null, null, next, null);
  }

  /** Adds row {@code r} of {@code t} (key {@code k}) to {@code g}. */
  private static void addRow(TableStore t, PackedKeys k, int r, Gathered g, float[] rec) {
    t.copyRecord(r, rec, 0);
    g.add(k, rec, 0, t.meta(r, TableStore.M_FREQ), t.meta(r, TableStore.M_STEP),
        t.meta(r, TableStore.M_UPDATES));
  }

  private Page scanCold(Tracker tr, TableStore t, long pos, int limit) {
    ColdRows cold = t.cold();
    if (cold == null) {
      return new Gathered(t.rowFloats, 1).page(null, null, 0, null);
    }
    List<ColdRows.Record> got = cold.page(pos, limit);
    Gathered g = new Gathered(t.rowFloats, Math.min(limit, 1024));
    for (ColdRows.Record r : got) {
      PackedKeys k = PackedKeys.of(new String(r.key(), java.nio.charset.StandardCharsets.UTF_8));
      if (tr.moving[tr.map.slotOf(k.hash(0))]) {
        g.add(k, r);
      }
    }
    return g.page(null, null, got.size() < limit ? 0 : COLD + pos + got.size(), null);
  }

  /** Records gathered into an export page, from memory rows or from the tier below. */
  private static final class Gathered {
    final int rf;
    final PackedKeys.Builder keys;
    float[] records;
    long[] f;
    long[] s;
    long[] u;

    Gathered(int rf, int capacity) {
      this.rf = rf;
      this.keys = new PackedKeys.Builder(capacity);
      this.records = new float[capacity * rf];
      this.f = new long[capacity];
      this.s = new long[capacity];
      this.u = new long[capacity];
    }

    void add(PackedKeys k, float[] src, int off, long freq, long step, long updates) {
      int i = keys.size();
      if (i == f.length) {
        int c = 2 * f.length + 1;
        records = java.util.Arrays.copyOf(records, c * rf);
        f = java.util.Arrays.copyOf(f, c);
        s = java.util.Arrays.copyOf(s, c);
        u = java.util.Arrays.copyOf(u, c);
      }
      keys.add(k, 0);
      System.arraycopy(src, off, records, i * rf, rf);
      f[i] = freq;
      s[i] = step;
      u[i] = updates;
    }

    void add(PackedKeys k, ColdRows.Record r) {
      add(k, r.values(), 0, r.frequency(), r.step(), r.updates());
    }

    Page page(Map<Long, Long> pending, List<String> removed, long next, byte[] pairs) {
      int n = keys.size();
      long[] ph = new long[pending == null ? 0 : pending.size()];
      long[] pc = new long[ph.length];
      if (pending != null) {
        int j = 0;
        for (Map.Entry<Long, Long> e : pending.entrySet()) {
          ph[j] = e.getKey();
          pc[j++] = e.getValue();
        }
      }
      return new Page(keys.build(), java.util.Arrays.copyOf(records, n * rf), rf,
          java.util.Arrays.copyOf(f, n), java.util.Arrays.copyOf(s, n),
          java.util.Arrays.copyOf(u, n), ph, pc, removed == null || removed.isEmpty()
              ? PackedKeys.of() : PackedKeys.of(removed.toArray(String[]::new)), next,
          pairs == null ? new byte[0] : pairs);
    }
  }

  /**
   * The recorded keys' current records, wherever they are: in memory, or in the tier below. A
   * key in neither is remembered as removed; the last page of the final export lists the
   * removed keys the table still holds in neither tier, for the destination to drop.
   */
  private Page drain(Tracker tr, int limit, boolean last) {
    TableStore t = tr.store;
    Gathered g = new Gathered(t.rowFloats, Math.min(limit, 1024));
    float[] rec = new float[t.rowFloats];
    java.util.Iterator<String> it = tr.dirty.iterator();
    while (it.hasNext() && g.keys.size() < limit) {
      String key = it.next();
      it.remove(); // before the read: a write after it records the key again
      // the store now: a write recorded before the removal above may have gone to a store an
      // eviction rebuilt after this drain began, and only that one holds it
      if (!read(tr.store, PackedKeys.of(key), g, rec)) {
        tr.removed.add(key);
      }
    }
    t = tr.store;
    boolean more = !tr.dirty.isEmpty();
    Map<Long, Long> pending = null;
    List<String> gone = null;
    byte[] pairs = null;
    if (last && !more && t.pairs() != null) { // the moving anchors' co-occurrence summaries
      java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
      try {
        t.pairs().write(new java.io.DataOutputStream(b), h -> tr.moving[tr.map.slotOf(h)]);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e); // in memory: cannot happen
      }
      pairs = b.toByteArray();
    }
    if (last && !more) {
      pending = new HashMap<>();
      for (Map.Entry<Long, Long> e : t.pendingCounts().entrySet()) {
        if (tr.moving[tr.map.slotOf(e.getKey())]) {
          pending.put(e.getKey(), e.getValue());
        }
      }
      gone = new ArrayList<>();
      for (String key : tr.removed) { // the slots are given away: none can come back now
        if (!read(t, PackedKeys.of(key), g, rec)) {
          gone.add(key);
        }
      }
    }
    return g.page(pending, gone, more ? 1 : 0, pairs);
  }

  /** Adds key {@code k}'s record from memory or the tier below to {@code g}; false: neither. */
  private static boolean read(TableStore t, PackedKeys k, Gathered g, float[] rec) {
    int r = t.lookupHot(k, 0);
    if (r >= 0) {
      addRow(t, k, r, g, rec);
      return true;
    }
    ColdRows cold = t.cold();
    ColdRows.Record c = cold == null ? null
        : cold.peek(k.keyBytes(0));
    if (c == null) {
      return false;
    }
    g.add(k, c);
    return true;
  }

  // ---------------------------------------------------------------- destination

  /** A table's staged records: an unpublished store, and admission counts by key hash. */
  private static final class Staged {
    final TableStore store; // its pendingCounts() hold the staged admission counts

    Staged(TableStore store) {
      this.store = store;
    }
  }

  /**
   * Stages a page of records of slots this shard does not own yet (replacing records staged
   * before for the same keys). Nothing live changes.
   *
   * @return records staged for the table so far
   */
  public synchronized long importRows(String table, Page page) {
    engine.checkReady();
    TableStore live = movable(table);
    if (page.recordFloats() != live.rowFloats) {
      throw TableException.invalid("table '%s': imported records have %d values; the table's"
          + " have %d (dim %d with its optimizer's slots)", table, page.recordFloats(),
          live.rowFloats, live.dim);
    }
    int n = page.keys().size();
    if (page.records().length != (long) n * live.rowFloats || page.frequencies().length != n
        || page.steps().length != n || page.updates().length != n
        || page.pendingHashes().length != page.pendingCounts().length) {
      throw TableException.invalid("table '%s': an import page of %d keys has %d values, %d"
          + " frequencies, %d steps, %d update counts, %d/%d admission counts", table, n,
          page.records().length, page.frequencies().length, page.steps().length,
          page.updates().length, page.pendingHashes().length, page.pendingCounts().length);
    }
    SlotMap m = engine.slotMap();
    for (int i = 0; i < n; i++) {
      if (m.ownerOf(page.keys().hash(i)) == engine.shardIndex()) {
        throw TableException.invalid("table '%s': key '%s' is this shard's already (map epoch"
            + " %d); an import brings keys of slots it does not own yet", table,
            page.keys().key(i), m.epoch());
      }
      int k = dev.dynembed.table.common.FloatKernels.firstNonFinite(page.records(),
          i * live.rowFloats, live.rowFloats);
      if (k >= 0) {
        throw TableException.invalid("table '%s': imported record of key '%s' holds %s", table,
            page.keys().key(i), page.records()[k]);
      }
    }
    Staged st = staging.get(table);
    if (st == null || !st.store.config().equals(live.config())) {
      st = new Staged(new TableStore(live.config(), live.shardIndex, live.numShards));
      staging.put(table, st);
    }
    for (int i = 0; i < n; i++) {
      st.store.setRecord(page.keys(), i, page.records(), i * live.rowFloats,
          page.frequencies()[i], page.steps()[i], page.updates()[i]);
    }
    for (int j = 0; j < page.pendingHashes().length; j++) {
      st.store.pendingCounts().put(page.pendingHashes()[j], page.pendingCounts()[j]);
    }
    if (page.pairs() != null && page.pairs().length > 0) {
      if (st.store.pairs() == null) {
        throw TableException.invalid("table '%s': an import page carries co-occurrence"
            + " summaries but the table keeps none", table);
      }
      try { // merged into the live table's with the rows (merge)
        st.store.pairs().read(new java.io.DataInputStream(
            new java.io.ByteArrayInputStream(page.pairs())), h -> true, false, "slot import");
      } catch (java.io.IOException e) {
        throw TableException.invalid("table '%s': an import page's co-occurrence summaries are"
            + " truncated", table);
      }
    }
    received += n;
    PackedKeys gone = page.removed();
    for (int i = 0; i < gone.size(); i++) {
      if (m.ownerOf(gone.hash(i)) == engine.shardIndex()) {
        throw TableException.invalid("table '%s': removed key '%s' is this shard's already",
            table, gone.key(i));
      }
      removedKeys.computeIfAbsent(table, x -> new java.util.LinkedHashSet<>()).add(gone.key(i));
    }
    return st.store.rowCount();
  }

  /**
   * Writes every staged store to checkpoint files under the log directory ({@code
   * import-pending}, fsync) and stages afresh, so that the commit writes only what is staged
   * after this (the records the last dirty exports bring). A shard without a log writes nothing.
   *
   * @return records written
   */
  public synchronized long prepare() {
    engine.checkReady();
    if (!(engine.journal() instanceof ShardState s)) {
      return 0;
    }
    try {
      return writeLayer(s);
    } catch (java.io.IOException e) {
      throw diskFailure("writing the staged rows of a slot import", s, e);
    }
  }

  /**
   * A slot import's disk write that failed: RESOURCE_EXHAUSTED naming the directory when the disk
   * is full (the staged rows stay: a resend once space is freed writes them), INTERNAL else.
   */
  private TableException diskFailure(String what, ShardState s, java.io.IOException e) {
    boolean full = ShardLog.diskFull(e);
    return new TableException(full ? ErrorCode.RESOURCE_EXHAUSTED : ErrorCode.INTERNAL,
        String.format("shard %d: %s under %s failed (%s)%s", engine.shardIndex(), what,
            s.walDirectory(), e, full ? ": nothing was merged; free space there and resend" : ""),
        e);
  }

  /** Writes the staged stores as the next layer and empties the staging. */
  private long writeLayer(ShardState s) throws java.io.IOException {
    Path root = s.walDirectory().resolve(PENDING);
    String sub = "L" + layers++;
    Path dir = root.resolve(sub);
    long rows = 0;
    int before = prepared.size();
    try {
      for (Map.Entry<String, Staged> e : staging.entrySet()) {
        TableStore st = e.getValue().store;
        if (st.rowCount() == 0 && st.pendingCounts().isEmpty()
            && (st.pairs() == null || st.pairs().anchors() == 0)) {
          continue;
        }
        java.nio.file.Files.createDirectories(dir);
        prepared.add(new Layer(e.getKey(), st, sub, CheckpointIo.write(st.freeze(), dir, 0)));
        rows += st.rowCount();
      }
      if (java.nio.file.Files.exists(dir)) {
        dev.dynembed.table.common.Durable.fsyncDirectory(dir);
        dev.dynembed.table.common.Durable.fsyncDirectory(root);
        dev.dynembed.table.common.Durable.fsyncDirectory(s.walDirectory());
      }
    } catch (java.io.IOException | RuntimeException e) {
      // the layer goes whole (its partial files would hold the space a resend needs); the
      // staging stays, so a resend writes it again
      prepared.subList(before, prepared.size()).clear();
      try {
        Dirs.deleteTree(dir);
      } catch (java.io.IOException again) {
        e.addSuppressed(again);
      }
      throw e;
    }
    staging.clear();
    return rows;
  }

  /**
   * Copies every record and admission count of {@code from} into {@code live} (under its
   * exclusive lock, or during recovery), replacing the records of the same keys.
   *
   * @return records copied
   */
  static long merge(TableStore from, TableStore live) {
    if (!from.config().equals(live.config())) {
      throw TableException.dataLoss("table '%s': imported rows were written with another table"
          + " config than the live table's", live.name());
    }
    float[] rec = new float[from.rowFloats];
    for (int r = 0; r < from.rowCount(); r++) {
      from.copyRecord(r, rec, 0);
      live.setRecord(from.keyAt(r), 0, rec, 0, from.meta(r, TableStore.M_FREQ),
          from.meta(r, TableStore.M_STEP), from.meta(r, TableStore.M_UPDATES));
    }
    live.pendingCounts().putAll(from.pendingCounts());
    if (from.pairs() != null && live.pairs() != null) {
      live.pairs().merge(from.pairs()); // the moved anchors' co-occurrence summaries
    }
    live.samplers().invalidate(); // the shard's sampler mass changed
    return from.rowCount();
  }

  /**
   * Merges every prepared and staged store into the live tables (each under its exclusive
   * lock), durably: on a shard with a log, the rest of the staging is written as a last layer,
   * one {@code ImportedSlots} record names every layer's file and is forced to the disk before
   * the map is installed. Then installs {@code map}, which must give this shard the slots it
   * imported. Staging is emptied.
   *
   * @return records merged
   */
  public synchronized long commit(SlotMap map) {
    return commit(map, -1);
  }

  /**
   * As {@link #commit(SlotMap)}, refused unless this shard received exactly {@code expected}
   * records since the last commit or abort (-1: not checked): a shard that restarted after the
   * driver imported rows lost them, and must not install a map that says it holds them.
   */
  public synchronized long commit(SlotMap map, long expected) {
    engine.checkReady();
    Logged done = logged;
    if (done != null && done.map().epoch() == map.epoch() && done.map().sameOwners(map)
        && (expected < 0 || expected == done.expected())) {
      // a resend of a commit whose import is logged and merged (its wait for the disk or the
      // followers failed): what is left is that wait, the removals and the map
      return finish(done, engine.journal() instanceof ShardState x ? x : null,
          System.nanoTime());
    }
    logged = null;
    if (expected >= 0 && expected != received) {
      throw TableException.moveInterrupted("shard %d received %d records of this slot import,"
          + " but %d were sent (it restarted, or another resharding ran at once): nothing"
          + " merged", engine.shardIndex(), received, expected);
    }
    SlotMap cur = engine.slotMap();
    if (map.epoch() < cur.epoch()) {
      throw TableException.precondition("shard %d routes by slot map epoch %d already, newer"
          + " than the %d of this commit", engine.shardIndex(), cur.epoch(), map.epoch());
    }
    List<Layer> all = new ArrayList<>(prepared);
    for (Map.Entry<String, Staged> e : staging.entrySet()) {
      all.add(new Layer(e.getKey(), e.getValue().store, null, null));
    }
    for (Layer l : all) { // every key checked before any merge
      TableStore s = l.store();
      for (int r = 0; r < s.rowCount(); r++) {
        PackedKeys k = s.keyAt(r);
        if (map.ownerOf(k.hash(0)) != engine.shardIndex()) {
          throw TableException.invalid("table '%s': staged key '%s' is not this shard's under"
              + " the map of epoch %d; nothing was merged", l.table(), k.key(0), map.epoch());
        }
      }
    }
    long t0 = System.nanoTime();
    long merged = 0;
    long written = 0;
    long lsn = 0;
    ShardState log = engine.journal() instanceof ShardState x ? x : null;
    try {
      if (log != null && !all.isEmpty()) {
        written = writeLayer(log); // the last dirty records; prepare wrote the rest
        all = new ArrayList<>(prepared);
      }
      long t1 = System.nanoTime();
      if (!all.isEmpty()) {
        Object cut = log != null ? log.snapshotMutex() : new Object();
        synchronized (cut) { // no snapshot between the record and the merge it stands for
          java.util.TreeMap<String, TableStore> live = engine.lockLive(
              all.stream().map(Layer::table).toList(), false);
          try {
            if (log != null) {
              lsn = logImport(log, all, map.epoch());
            }
            for (Layer l : all) {
              merged += merge(l.store(), live.get(l.table()));
            }
          } finally {
            for (TableStore t : live.values()) {
              t.quiesce.writeLock().unlock();
            }
          }
        }
      }
      long t2 = System.nanoTime();
      // from here the import is logged and merged: a resend of this commit only finishes it
      Map<String, List<String>> removed = new HashMap<>();
      removedKeys.forEach((t, k) -> removed.put(t, new ArrayList<>(k)));
      logged = new Logged(map, expected, lsn, merged, removed);
      prepared.clear();
      staging.clear();
      removedKeys.clear();
      received = 0;
      LOG.info(String.format(java.util.Locale.ROOT, "shard %d: slot import at map epoch %d:"
          + " %d rows merged (%d written now): write %.1f ms, log + merge %.1f ms",
          engine.shardIndex(), map.epoch(), merged, written, (t1 - t0) / 1e6, (t2 - t1) / 1e6));
      return finish(logged, log, t2);
    } catch (java.io.IOException e) {
      throw diskFailure("keeping the rows of a slot import on the disk", log, e);
    }
  }

  /** A commit whose import is logged and merged, until its map is installed. */
  private record Logged(SlotMap map, long expected, long lsn, long merged,
      Map<String, List<String>> removed) {}

  private Logged logged; // guarded by this

  /**
   * Waits until the import's record is on the disk (and the followers in sync), evicts the keys
   * the source removed, installs the map.
   */
  private long finish(Logged l, ShardState log, long t0) {
    if (l.lsn() > 0 && log != null) {
      log.forceThrough(l.lsn()); // on the disk before the map says the rows are here
      log.awaitDurable(l.lsn()); // and on the followers in sync, for a replicated shard
    }
    long t1 = System.nanoTime();
    for (Map.Entry<String, List<String>> e : l.removed().entrySet()) {
      // keys the source evicted after sending them (logged evictions, after the import)
      evict(e.getKey(), e.getValue());
    }
    RedisTier redis = engine.redisTier();
    if (redis != null) {
      // the merged rows reach this shard's Redis prefix before the source deletes its copies
      // there (DropUnowned, after this commit): without a log, Redis is their only copy
      redis.flush();
    }
    SlotMap cur = engine.slotMap();
    if (l.map().epoch() > cur.epoch() || !l.map().sameOwners(cur)) {
      engine.installSlotMap(l.map());
    }
    for (TableStore t : engine.tables()) {
      // the merged rows may take a capped table past its cap: its eviction is scheduled now,
      // as after a call that adds rows (else it waited for the next insert, and a shard that
      // took a third of a table with no writes after stayed past its cap)
      engine.evictions().afterInsert(t);
    }
    logged = null;
    LOG.info(String.format(java.util.Locale.ROOT, "shard %d: slot import committed at map"
        + " epoch %d: durable in %.1f ms, removals and map %.1f ms", engine.shardIndex(),
        l.map().epoch(), (t1 - t0) / 1e6, (System.nanoTime() - t1) / 1e6));
    return l.merged();
  }

  /**
   * Renames the prepared layers' directory to {@code import-LSN} and logs the record naming
   * them; under the snapshot mutex, so that no snapshot deletes the directory while a record
   * after its cut still names it.
   *
   * @return the record's LSN
   */
  private static long logImport(ShardState log, List<Layer> layers, long epoch)
      throws java.io.IOException {
    Path walDir = log.walDirectory();
    String name = IMPORTED + String.format("%020d", log.lastLsn() + 1);
    Path dir = walDir.resolve(name);
    dev.dynembed.table.v1.ImportedSlots.Builder rec = dev.dynembed.table.v1.ImportedSlots
        .newBuilder().setDirectory(name).setMapEpoch(epoch);
    for (Layer l : layers) {
      rec.addLayers(dev.dynembed.table.v1.ImportedLayer.newBuilder().setTable(l.table())
          .setSubdirectory(l.sub()).setFile(l.file()));
    }
    dev.dynembed.table.v1.LogRecord record = dev.dynembed.table.v1.LogRecord.newBuilder()
        .setImportSlots(rec).build();
    // the record's room first: a full disk refuses the commit with the layers still pending (a
    // resend after space is freed finds them), not renamed under a record that was never logged
    long room = log.reserve(record.getSerializedSize());
    try {
      Dirs.deleteTree(dir);
      java.nio.file.Files.move(walDir.resolve(PENDING), dir,
          java.nio.file.StandardCopyOption.ATOMIC_MOVE);
      dev.dynembed.table.common.Durable.fsyncDirectory(walDir);
    } catch (java.io.IOException | RuntimeException e) {
      log.release(room);
      throw e;
    }
    return log.append(record, room);
  }

  /** Forgets staged records (a move given up before its commit). */
  public synchronized void abortImport() {
    logged = null;
    staging.clear();
    prepared.clear();
    removedKeys.clear();
    received = 0;
    if (engine.journal() instanceof ShardState s) {
      try {
        Dirs.deleteTree(s.walDirectory().resolve(PENDING));
      } catch (java.io.IOException e) {
        LOG.warning("shard " + engine.shardIndex() + ": removing an aborted import's files: "
            + e);
      }
    }
  }

  /** Evicts {@code keys} of a table as logged evictions, one store rebuild per chunk. */
  private long evict(String table, List<String> keys) {
    long evicted = 0;
    int chunk = dev.dynembed.table.common.Limits.MAX_BATCH_KEYS;
    for (int from = 0; from < keys.size(); from += chunk) {
      List<String> part = keys.subList(from, Math.min(keys.size(), from + chunk));
      evicted += engine.evictions().evictUnchecked(dev.dynembed.table.v1.EvictRequest
          .newBuilder().setTable(table)
          .setKeys(PackedKeys.of(part.toArray(String[]::new)).toProto()).build()).getEvicted();
    }
    return evicted;
  }

  /**
   * Removes every row (and admission count) this shard's map does not give it, as logged
   * evictions of exactly those keys, and ends the moves out of it.
   *
   * @return rows removed
   */
  public long dropUnowned() {
    SlotMap m = engine.slotMap();
    long dropped = 0;
    for (TableStore listed : engine.tables()) {
      String name = listed.name();
      TableStore t = engine.lookup(name);
      if (t == null) {
        continue;
      }
      List<String> gone = new ArrayList<>();
      for (int r = 0; r < t.rowCount(); r++) {
        if (!t.isReady(r)) {
          continue; // still being inserted by a call checked against this map: an owned key
                    // (read before it is ready, its key reference is not written yet)
        }
        PackedKeys k = t.keyAt(r);
        if (m.ownerOf(k.hash(0)) != engine.shardIndex()) {
          gone.add(k.key(0));
        }
      }
      for (String k : t.coldKeys()) { // and the tier below memory's
        if (m.ownerOf(dev.dynembed.table.common.KeyHashing.hash(k)) != engine.shardIndex()) {
          gone.add(k);
        }
      }
      dropped += evict(name, gone);
      TableStore now = engine.lookup(name);
      if (now != null) {
        now.pendingCounts().keySet().removeIf(h -> m.ownerOf(h) != engine.shardIndex());
        if (now.pairs() != null) {
          now.pairs().dropAnchors(h -> m.ownerOf(h) != engine.shardIndex());
        }
        now.moveTracker = null;
        if (!gone.isEmpty()) {
          now.samplers().invalidate();
        }
      }
      outgoing.remove(name);
    }
    return dropped;
  }
}
