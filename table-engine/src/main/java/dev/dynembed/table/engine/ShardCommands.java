package dev.dynembed.table.engine;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.LogRecord;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.WriteRequest;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * The one command path of a shard's {@code Read} and {@code Write} calls, whatever carries them:
 * gRPC and the native data plane (protobuf items, table-server's service) and the in-process
 * table (the client's own item records, table-embedded's {@code LocalShard}). Each call goes
 *
 * <pre>
 *   ready? → items counted → stores taken and locked shared (again if one was replaced
 *   meanwhile) → memory budget → call ledger (a resend counts and applies nothing twice) →
 *   apply → log → ledger done → unlock → durable → caps (background eviction)
 * </pre>
 *
 * The caller supplies only the codec of its items ({@link ReadItems}, {@link WriteItems}): what
 * table an item names, how many keys it may add, how to run it, and its logged form. A shard
 * without a log (in process, {@code --wal off}) never asks for the logged form; an item without
 * a call id ({@link CallId#getDefaultInstance()}) is not deduplicated.
 */
public final class ShardCommands {
  /**
   * How long a call keeps taking its stores again when one was replaced between lookup and lock.
   * Each replacement is another call's progress (an eviction, a restore, a drop), so the retries
   * are not bounded by count: a disk-tier table whose reads promote rows past its cap gets an
   * eviction every few calls, and a reader queued behind several of them in a row (the lock lets
   * a waiting eviction go first) must not fail for it.
   */
  private static final long REPLACED_RETRY_NANOS =
      java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
  /** What reads and writes use of their engine: the checks, the log, the ledger. */
  interface Engine extends ShardTables {
    void checkReady();

    /** Refuses a change when the shard is read-only (a serving replica). */
    default void checkWritable(String call) {}

    void checkRoutedAt(long routedAt);

    void checkBudget(long need, List<TableStore> stores);

    CallLedger ledger();

    ShardJournal journal();

    long reserveLog(long bytes);

    void releaseLog(long reservation);

    long log(LogRecord r, long reservation);

    void awaitDurable(long lsn);

    void awaitAll();

    void afterInsert(TableStore t);

    /** The shard's memory budget in bytes (0 = none). */
    long memoryBudget();

    /** The bytes the shard's tables hold now. */
    long bytesInUse();
  }

  private final Engine engine;
  /**
   * Calls that report co-occurring pairs apply and log under it, so that the shard counts them in
   * log order, as a replay and a follower will (Space-Saving's counts depend on the order).
   */
  private final java.util.concurrent.locks.ReentrantLock pairOrder =
      new java.util.concurrent.locks.ReentrantLock();

  /**
   * The map epoch of a call that needs no routing: the in-process table (one shard) and the
   * log's replay, whose calls were checked when they first came.
   */
  public static final long UNROUTED = Long.MIN_VALUE;

  /** A call's map epoch as it came on the wire (every uint64 is a routed call's). */
  public static long routedAt(long wireEpoch) {
    return wireEpoch == UNROUTED ? Long.MAX_VALUE : wireEpoch;
  }

  ShardCommands(Engine engine) {
    this.engine = engine;
  }

  /**
   * What the command path needs to know of a read call's items, in whatever form they came.
   *
   * @param <I> an item
   * @param <R> its answer
   */
  public interface ReadItems<I, R> {
    /** The table the item reads. */
    String table(I item);

    /**
     * The keys a find_or_insert item may count and create (plain or pooled), or null for an item
     * that changes nothing (find, sample).
     */
    Inserts inserts(I item);

    /**
     * Answers the item. Inserting items run with their tables locked shared.
     *
     * @param resent the call was applied before (its call id is in the ledger): count nothing
     */
    R run(I item, boolean resent);

    /**
     * The item as the log keeps it: table, keys and occurrences, no rows (asked only of a shard
     * with a log, for an item that may change the table).
     */
    FindOrInsertRequest logged(I item, boolean noCount);

    /**
     * What the item's answer may take, from the request alone, before anything runs ({@link
     * #cost}).
     *
     * @param table the item's table, or null when there is none (the item fails NOT_FOUND)
     */
    ReadCost cost(I item, TableStore table);

    /** Lets go of an answer of a call that failed after it (a pooled buffer, say). */
    default void discard(R answer) {}
  }

  /**
   * What a read call (or one item) may take, known before it runs: the bytes of its reply (rows
   * in the encoding asked for, and per key its found bit and counters), the draws of its samples
   * and the keys it names. A call's sum is refused beyond one reply ({@link
   * Limits#MAX_MESSAGE_BYTES}) or {@link Limits#MAX_NUM_SAMPLED} draws, reserved against the
   * shard's {@link ReplyBudget}, and runs off the network's event loop when {@link #large}.
   */
  public record ReadCost(long replyBytes, long draws, long keys) {
    public static final ReadCost NONE = new ReadCost(0, 0, 0);
    /** Bytes per key beside its row: found bit, frequency and update count varints, framing. */
    static final int PER_KEY = 24;
    /** Bytes per draw beside its row: its key (a few bytes, most often) and draw index. */
    static final int PER_DRAW = 16;
    /** Beyond these a call runs off the event loop that read it (it would hold other calls). */
    public static final long INLINE_REPLY_BYTES = 16L << 20;
    public static final long INLINE_DRAWS = 1L << 16;
    public static final long INLINE_KEYS = 1L << 18;

    /** {@code keys} keys answered with {@code values} values each, {@code bpv} bytes a value. */
    public static ReadCost rows(long keys, long values, int bpv) {
      return new ReadCost(keys * (values * bpv + PER_KEY), 0, keys);
    }

    /** {@code bags} pooled vectors of {@code dim} values over {@code keys} keys. */
    public static ReadCost pooled(long keys, long bags, int dim, int bpv) {
      return new ReadCost(bags * dim * bpv + keys / 8 + PER_KEY, 0, keys);
    }

    /** {@code draws} draws (each with {@code rowValues} values when rows come back). */
    public static ReadCost sample(long draws, long positives, long rowValues, int bpv) {
      return new ReadCost(draws * (PER_DRAW + rowValues * bpv) + positives * PER_KEY, draws,
          positives);
    }

    ReadCost plus(ReadCost o) {
      return new ReadCost(replyBytes + o.replyBytes, draws + o.draws, keys + o.keys);
    }

    /** Whether the call should not run on a network event loop. */
    public boolean large() {
      return replyBytes > INLINE_REPLY_BYTES || draws > INLINE_DRAWS || keys > INLINE_KEYS;
    }
  }

  /**
   * The cost of a read call's items, summed and checked against the per-call limits before
   * anything is built or drawn: RESOURCE_EXHAUSTED names the limit. Each item's own limits (keys,
   * rows of one reply) are checked again when it runs.
   */
  public <I, R> ReadCost cost(List<I> items, ReadItems<I, R> codec) {
    ReadCost sum = ReadCost.NONE;
    String table = null;
    for (I item : items) {
      String name = codec.table(item);
      table = table == null ? name : table;
      sum = sum.plus(codec.cost(item, engine.lookup(name)));
    }
    if (sum.draws() > Limits.MAX_NUM_SAMPLED) {
      throw TableException.exhausted("table '%s': the sample items of one read draw %d keys in"
          + " all; a call draws at most %d", table, sum.draws(), Limits.MAX_NUM_SAMPLED);
    }
    if (sum.replyBytes() > Limits.MAX_MESSAGE_BYTES) {
      throw TableException.exhausted("table '%s': the answers of one read's %d items would take"
          + " about %d bytes; one reply holds at most %d bytes: ask for fewer rows per call",
          table, items.size(), sum.replyBytes(), Limits.MAX_MESSAGE_BYTES);
    }
    return sum;
  }

  /**
   * What an inserting read item may add.
   *
   * @param keys keys named (each may become a row)
   * @param keyBytes their UTF-8 bytes
   * @param noCount the item asks not to count its keys
   */
  public record Inserts(int keys, long keyBytes, boolean noCount) {
    public static Inserts of(PackedKeys k, boolean noCount) {
      int n = k.size();
      return new Inserts(n, n == 0 ? 0 : (long) k.offset(n - 1) + k.length(n - 1) - k.offset(0),
          noCount);
    }
  }

  /**
   * What the command path needs to know of a write call's items.
   *
   * @param <W> an item
   */
  public interface WriteItems<W> {
    String table(W item);

    /** Checks an item whole (keys, gradient shape, values) against its table; nothing applied. */
    TableStore.CheckedGradients check(TableStore table, W item);

    /** The item's step (for TTL and LRU). */
    long step(W item);

    /** The keys the item names (a write creates rows for keys without one). */
    Inserts keys(W item);

    /** The whole call as the log keeps it (asked only of a shard with a log). */
    WriteRequest logged(CallId id, List<W> items);
  }

  private static void checkItems(int n, String call) {
    if (n < 1 || n > Limits.MAX_ITEMS_PER_CALL) {
      throw TableException.invalid("a %s call must hold 1..%d items but had %d", call,
          Limits.MAX_ITEMS_PER_CALL, n);
    }
  }

  /**
   * Runs a read call's items in order. Its find_or_insert items count and create rows: they run
   * under their tables' shared locks and are logged (keys and occurrences, not rows); a resent
   * call (its call id seen before) counts nothing again. A failing item ends the call; the
   * items before it keep their effects (as documented for Read).
   */
  public <I, R> List<R> read(CallId id, List<I> items, ReadItems<I, R> codec) {
    return read(id, UNROUTED, items, codec);
  }

  /**
   * As {@link #read(CallId, List, ReadItems)}, for a call routed by slot map epoch {@code
   * mapEpoch}: refused whole, before anything is applied, when the shard routes by another
   * ({@link ShardEngine#checkRoutedAt}).
   */
  public <I, R> List<R> read(CallId id, long mapEpoch, List<I> items, ReadItems<I, R> codec) {
    List<R> out = new ArrayList<>(items.size());
    try {
      return read(id, mapEpoch, items, codec, out);
    } catch (RuntimeException | Error e) { // an Error too: out of direct memory, say
      out.forEach(codec::discard); // the answers of the items before the failure
      throw e;
    }
  }

  /**
   * {@code e}, or MOVED if the shard's map changed since the call was routed: keys checked
   * outside the tables' locks may meet a map installed after the call's epoch was checked, and
   * then a key of a moved slot is the map's doing, not the caller's (nothing was applied yet).
   */
  private TableException movedOr(TableException e, long mapEpoch) {
    if (e.code() == ErrorCode.INVALID_ARGUMENT) {
      engine.checkRoutedAt(mapEpoch);
    }
    return e;
  }

  /**
   * {@link ShardEngine#checkRoutedAt} for a read: a resend of a call applied here before (its
   * reply lost) that meets a newer map is refused as MOVED saying so, since the duplicate check
   * comes after the routing check and its counting must not happen again at the keys' new owners.
   */
  private void checkReadRoutedAt(CallId id, long mapEpoch) {
    try {
      engine.checkRoutedAt(mapEpoch);
    } catch (TableException e) {
      if (e.isMoved() && engine.ledger().applied(id)) {
        throw TableException.movedAfterApplied(e);
      }
      throw e;
    }
  }

  private <I, R> List<R> read(CallId id, long mapEpoch, List<I> items, ReadItems<I, R> codec,
      List<R> out) {
    engine.checkReady();
    checkItems(items.size(), "read");
    cost(items, codec); // before anything is built: the sum over the items, not each alone
    checkReadRoutedAt(id, mapEpoch);
    List<Inserts> inserts = new ArrayList<>(items.size()); // per item, null: changes nothing
    List<String> names = new ArrayList<>(2); // tables an item inserts into
    List<String> promoting = new ArrayList<>(0); // tables a find or sample may promote rows of
    for (I item : items) {
      Inserts ins = codec.inserts(item);
      inserts.add(ins);
      if (ins != null) {
        names.add(codec.table(item));
      } else {
        TableStore t = engine.lookup(codec.table(item));
        if (t != null && t.cold() != null) {
          promoting.add(codec.table(item));
        }
      }
    }
    if (!names.isEmpty()) {
      engine.checkWritable("a read that counts keys or creates rows (findOrInsert)");
    }
    if (names.isEmpty()) {
      // reads of in-memory tables take no lock; a disk tier's promotions move rows between the
      // tiers, which an eviction's rebuild or a checkpoint cut must not see half done
      List<TableStore> locked = promoting.isEmpty() ? List.of()
          : lockTables(promoting, new ArrayList<>(promoting.size()));
      try {
        for (I item : items) {
          out.add(codec.run(item, false));
        }
      } catch (TableException e) {
        throw movedOr(e, mapEpoch);
      } finally {
        ShardEngine.unlockShared(locked);
      }
      afterPromotions(promoting);
      return out;
    }
    List<TableStore> stores = new ArrayList<>(names.size());
    Throwable failure = null;
    long lsn = 0;
    boolean duplicate;
    List<String> lockedNames = new ArrayList<>(names);
    lockedNames.addAll(promoting);
    List<TableStore> locked = lockTables(lockedNames, stores);
    try {
      checkReadRoutedAt(id, mapEpoch); // again, now that no map change can pass the locks
      long need = 0;
      for (int i = 0; i < items.size(); i++) {
        Inserts ins = inserts.get(i);
        if (ins != null) {
          TableStore t = engine.get(codec.table(items.get(i)));
          // a table whose admission tightens under pressure checks the room per admitted key
          if (!t.pressured() && (t.config().getMinCount() <= 1 || !ins.noCount())) {
            need += t.bytesForNewKeys(ins.keys(), ins.keyBytes());
          }
        }
      }
      engine.checkBudget(need, stores);
      CallLedger ledger = engine.ledger();
      duplicate = ledger.claim(id) == CallLedger.Claim.DUPLICATE;
      boolean settled = duplicate; // a duplicate has nothing to record
      long reservation = 0;
      try {
        boolean logs = engine.journal() != null;
        ReadRequest.Builder logged = logs ? ReadRequest.newBuilder().setCallId(id) : null;
        // room in the log before anything is inserted or counted: a full disk refuses the call
        // whole (RESOURCE_EXHAUSTED), instead of leaving changes that no record holds
        reservation = logs ? engine.reserveLog(logBound(items, inserts, codec)) : 0;
        int changed = 0;
        long budget = engine.memoryBudget();
        long used = -1; // the shard's bytes in use, taken once per call when a policy needs it
        for (int i = 0; i < items.size(); i++) {
          I item = items.get(i);
          Inserts ins = inserts.get(i);
          TableStore pressured = ins == null ? null : engine.lookup(codec.table(item));
          if (pressured != null && !pressured.pressured()) {
            pressured = null;
          }
          AdmissionContext ctx = null;
          if (pressured != null) {
            if (used < 0) {
              used = budget > 0 ? engine.bytesInUse() : 0;
            }
            ctx = AdmissionContext.open(budget, used);
          }
          try {
            out.add(codec.run(item, duplicate));
          } catch (RuntimeException | Error e) {
            failure = e; // earlier items' counting stays (and is logged below)
            break;
          } finally {
            if (ctx != null) {
              AdmissionContext.close();
              used = ctx.usedAfter(); // the next item's room is what this one left
            }
          }
          if (ins != null && mayChange(codec.table(item), ins.noCount() || duplicate)) {
            changed++;
            if (logs) {
              FindOrInsertRequest f = codec.logged(item, ins.noCount() || duplicate);
              if (ctx != null && ctx.admitted != null) { // the decisions, for replays (0027)
                f = f.toBuilder().setAdmitted(com.google.protobuf.ByteString.copyFrom(
                    ctx.admitted)).setAdmissionLogged(true).build();
              }
              logged.addItems(ReadItem.newBuilder().setFindOrInsert(f));
            }
          }
        }
        if (changed > 0 && logs) {
          long r = reservation;
          reservation = 0;
          lsn = engine.log(LogRecord.newBuilder().setInsert(logged).build(), r);
        }
        if (!duplicate && (changed > 0 || failure == null)) {
          ledger.done(id, lsn, null); // a resend now counts nothing
          settled = true;
        }
      } finally {
        engine.releaseLog(reservation);
        if (!settled) {
          ledger.abandon(id); // nothing changed: a resend runs as new
        }
      }
    } finally {
      ShardEngine.unlockShared(locked);
    }
    if (duplicate) {
      engine.awaitAll();
    } else {
      engine.awaitDurable(lsn);
    }
    for (TableStore t : stores) {
      engine.afterInsert(t);
    }
    afterPromotions(promoting);
    if (failure instanceof Error e) {
      throw e;
    }
    if (failure != null) {
      throw (RuntimeException) failure;
    }
    return out;
  }

  /**
   * Applies a write: every item is checked first, then all are applied and logged under the
   * tables' shared locks. A call id seen before answers as the first call did and changes
   * nothing.
   */
  public <W> int[] write(CallId id, List<W> items, WriteItems<W> codec) {
    return write(id, UNROUTED, items, codec);
  }

  /**
   * As {@link #write(CallId, List, WriteItems)}, for a call routed by slot map epoch {@code
   * mapEpoch}: refused whole when the shard routes by another, unless it is a resend of a call
   * applied before (answered as the first time).
   */
  public <W> int[] write(CallId id, long mapEpoch, List<W> items, WriteItems<W> codec) {
    engine.checkReady();
    engine.checkWritable("a write (gradients or assigned rows)");
    checkItems(items.size(), "write");
    CallLedger ledger = engine.ledger();
    if (ledger.applied(id)) { // a resend: answered as the first time, whatever changed since
      return duplicate(ledger, id, items.size());
    }
    // the call is checked whole before it is claimed: a refused call leaves no trace in the
    // ledger (refused calls of fresh clients once pushed an applied call's client out of it,
    // and that call's resend was applied a second time)
    boolean claimed = false;
    boolean done = false;
    try {
      List<TableStore.CheckedGradients> checked = new ArrayList<>(items.size());
      List<TableStore> stores = new ArrayList<>(items.size());
      List<TableStore> locked = null;
      long deadline = System.nanoTime() + REPLACED_RETRY_NANOS;
      while (locked == null) {
        checked.clear();
        stores.clear();
        engine.checkRoutedAt(mapEpoch); // before the keys are checked against the map
        long need = 0;
        for (W item : items) { // checked outside the locks: decoding waits for nobody
          TableStore t = engine.get(codec.table(item));
          try {
            checked.add(codec.check(t, item));
          } catch (TableException e) {
            throw movedOr(e, mapEpoch);
          }
          stores.add(t);
          TableStore.CheckedGradients c = checked.get(checked.size() - 1);
          if (c.partners != null) { // each pair may add an anchor's summary and an entry
            need += (long) c.keys.size() * PairCounts.MAX_BYTES_PER_PAIR
                + c.partners.bytes().length;
          } else if (t.config().getMinCount() <= 1) { // keys without a row get one
            Inserts k = codec.keys(item);
            need += t.bytesForNewKeys(k.keys(), k.keyBytes());
          }
        }
        engine.checkBudget(need, stores);
        try {
          locked = ShardEngine.lockShared(stores);
        } catch (TableException e) {
          if (e.code() != ErrorCode.UNAVAILABLE || System.nanoTime() - deadline > 0) {
            throw e;
          }
        }
      }
      try {
        engine.checkRoutedAt(mapEpoch); // again, now that no map change can pass the locks
        claimed = ledger.claim(id) != CallLedger.Claim.DUPLICATE;
      } catch (TableException e) {
        ShardEngine.unlockShared(locked);
        throw e;
      }
      if (!claimed) { // applied by a resend of it meanwhile
        ShardEngine.unlockShared(locked);
        return duplicate(ledger, id, items.size());
      }
      int[] out = new int[checked.size()];
      long lsn = 0;
      long reservation = 0;
      boolean ordered = false;
      for (TableStore.CheckedGradients c : checked) {
        ordered |= c.partners != null;
      }
      if (ordered) {
        pairOrder.lock();
      }
      try {
        // the record and its room in the log first: a full disk refuses the call before any
        // gradient is applied (RESOURCE_EXHAUSTED), instead of after
        LogRecord record = engine.journal() == null ? null
            : LogRecord.newBuilder().setWrite(codec.logged(id, items)).build();
        reservation = record == null ? 0 : engine.reserveLog(record.getSerializedSize());
        for (int i = 0; i < checked.size(); i++) {
          out[i] = checked.get(i).table.apply(checked.get(i), codec.step(items.get(i)));
        }
        if (record != null) {
          long r = reservation;
          reservation = 0;
          lsn = engine.log(record, r);
        }
        ledger.done(id, lsn, out);
        done = true;
      } finally {
        if (ordered) {
          pairOrder.unlock();
        }
        engine.releaseLog(reservation);
        ShardEngine.unlockShared(locked);
      }
      engine.awaitDurable(lsn);
      for (TableStore t : stores) {
        engine.afterInsert(t);
      }
      return out;
    } finally {
      if (claimed && !done) {
        ledger.abandon(id);
      }
    }
  }

  /**
   * At most the bytes of the insert record a read call can log: per inserting item its table,
   * keys, their lengths, hashes and occurrences, and the message framing.
   */
  private <I> long logBound(List<I> items, List<Inserts> inserts, ReadItems<I, ?> codec) {
    long bound = 64;
    for (int i = 0; i < items.size(); i++) {
      Inserts ins = inserts.get(i);
      if (ins != null) {
        bound += 128 + 4L * codec.table(items.get(i)).length() + ins.keyBytes()
            + 32L * ins.keys();
      }
    }
    return bound;
  }

  /** The answer to a resent write that was applied before: its first answer, nothing applied. */
  private int[] duplicate(CallLedger ledger, CallId id, int items) {
    int[] r = ledger.result(id);
    engine.awaitAll();
    return r != null && r.length == items ? r : new int[items];
  }

  /**
   * Takes the named tables' current stores and locks them shared; a store replaced between the
   * lookup and the lock (a restore, a drop and create, a cap's eviction) is looked up again, up
   * to {@link #REPLACED_RETRY_NANOS} after the first try, then the caller is told to resend.
   */
  private List<TableStore> lockTables(List<String> names, List<TableStore> stores) {
    long deadline = System.nanoTime() + REPLACED_RETRY_NANOS;
    while (true) {
      stores.clear();
      for (String n : new LinkedHashSet<>(names)) {
        stores.add(engine.get(n));
      }
      try {
        return ShardEngine.lockShared(stores);
      } catch (TableException e) {
        if (e.code() != ErrorCode.UNAVAILABLE || System.nanoTime() - deadline > 0) {
          throw e;
        }
      }
    }
  }

  /**
   * Runs {@code body} on the table's current store: one with a tier below memory locked shared,
   * as reads that may promote are (its demotions and promotions move rows between the tiers,
   * which the body must not see half done; a store replaced meanwhile is looked up again, see
   * {@link #lockTables}); an in-memory one without a lock.
   */
  public <T> T onCurrentStore(String table, java.util.function.Function<TableStore, T> body) {
    TableStore t = engine.get(table);
    if (t.cold() == null) {
      return body.apply(t);
    }
    List<TableStore> locked = lockTables(List.of(table), new ArrayList<>(1));
    try {
      return body.apply(locked.get(0));
    } finally {
      ShardEngine.unlockShared(locked);
    }
  }

  /** Whether a find_or_insert can change the table: it counts, or it creates missing rows. */
  private boolean mayChange(String table, boolean noCount) {
    TableStore t = engine.lookup(table);
    return !noCount || (t != null && (t.config().getMinCount() <= 1 || t.pressured()));
  }

  /**
   * After reads that count nothing (finds, samples) of disk-tier tables: their promotions may
   * have taken them past their caps, which only inserts checked so far.
   */
  private void afterPromotions(List<String> promoting) {
    for (String name : promoting) {
      TableStore t = engine.lookup(name);
      if (t != null) {
        engine.afterInsert(t);
      }
    }
  }
}
