package dev.dynembed.table.client;

import dev.dynembed.table.client.internal.Futures;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.CommitSlotsRequest;
import dev.dynembed.table.v1.ExportSlotsRequest;
import dev.dynembed.table.v1.ExportSlotsResponse;
import dev.dynembed.table.v1.ImportSlotsRequest;
import dev.dynembed.table.v1.SlotRange;
import dev.dynembed.table.v1.TableInfo;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Moves slots between the shards of a running table service while clients read and write
 * (docs/design/0021-slot-moves-proposal.md): the operator side of {@code table-cli reshard}.
 *
 * <p>The target map is reached one (source, destination) pair at a time, each a map of its own
 * epoch, so that no shard is a source and a destination of one step. A step:
 *
 * <ol>
 *   <li>copy: every table's rows of the moving slots are exported page by page from the source
 *       (which from then on records the keys writes touch there) and staged on the destination;
 *   <li>catch up: the recorded keys' current records are sent again until few remain; the
 *       destination writes what it staged to its log directory (prepare);
 *   <li>flip: the step's map goes to every shard but the destination: the source refuses calls
 *       on the old map and can no longer change the moving rows; clients re-route, and wait
 *       (resending) while the destination still routes by the old map: the pause;
 *   <li>the last recorded keys and the slots' admission counts go over; the destination writes
 *       them, logs one record naming every file it wrote, merges what it staged and installs
 *       the map (the pause ends);
 *   <li>the source drops the rows it gave away.
 * </ol>
 *
 * A step interrupted anywhere is finished by running the resharding again: a shard behind the
 * newest map is brought to it (with a full copy if it gains slots), then the rest goes on.
 */
public final class Resharding {
  /** Keys per export page. */
  static final int PAGE = 4096;
  /** Catch-up rounds stop once a round moved fewer keys than this. */
  static final int SETTLED = 2048;
  static final int MAX_CATCH_UP_ROUNDS = 8;

  private final ShardedTableClient client;
  private final Consumer<String> progress;
  private long movedRows;
  /** Records imported into the current step's destination (its commit checks the count). */
  private long sent;
  private long pauseNanos;

  private Resharding(ShardedTableClient client, Consumer<String> progress) {
    this.client = client;
    this.progress = progress;
  }

  /** What a resharding did. */
  public record Result(SlotMap map, long rowsMoved, long steps, double longestPauseMillis) {}

  /**
   * Spreads the slots evenly over the first {@code shards} shards of the client (which must know
   * at least that many endpoints), moving as few as it can.
   */
  public static Result rebalance(TableClient client, int shards, Consumer<String> progress) {
    ShardedTableClient c = sharded(client);
    if (shards < 1 || shards > SlotMap.MAX_SHARDS) {
      throw TableException.invalid("rebalance onto %d shards: give 1..%d", shards,
          SlotMap.MAX_SHARDS);
    }
    if (shards > c.shards().size()) {
      // a cluster map's client opens the new shards (they must have registered); a client of
      // fixed endpoints must name them
      c.router().ensureShards(shards);
    }
    Resharding r = new Resharding(c, progress);
    return r.retrying(() -> {
      SlotMap now = r.settle();
      return r.run(now.rebalanced(shards, now.epoch() + 1));
    });
  }

  /** Times a resharding runs again after a step lost its state on a shard. */
  static final int MAX_INTERRUPTIONS = 8;

  /**
   * {@code run}, run again (it settles first, so an interrupted step is finished or redone)
   * when a step lost its state on a shard: a failover or restart of a replicated shard's
   * primary in the middle of a copy or a commit ({@link TableException#isMoveInterrupted}).
   */
  private Result retrying(java.util.function.Supplier<Result> run) {
    for (int i = 0; ; i++) {
      try {
        return run.get();
      } catch (TableException e) {
        if (!e.isMoveInterrupted() || i >= MAX_INTERRUPTIONS) {
          throw e;
        }
        progress.accept("step interrupted (" + e.getMessage() + "); running again");
      }
    }
  }

  /** Moves the slots so that the service routes by {@code target}'s owners. */
  public static Result reshard(TableClient client, SlotMap target, Consumer<String> progress) {
    Resharding r = new Resharding(sharded(client), progress);
    return r.retrying(() -> {
      r.settle();
      return r.run(target);
    });
  }

  private static ShardedTableClient sharded(TableClient client) {
    if (!(client instanceof ShardedTableClient c)) {
      throw TableException.invalid("resharding needs a client of table-server shards, not %s",
          client.getClass().getSimpleName());
    }
    return c;
  }

  private List<Shard> shards() {
    return client.shards();
  }

  private List<SlotMap> maps() {
    List<CompletableFuture<dev.dynembed.table.v1.SlotMap>> f = new ArrayList<>();
    for (Shard s : shards()) {
      f.add(s.slotMap());
    }
    List<SlotMap> out = new ArrayList<>();
    for (dev.dynembed.table.v1.SlotMap p : Futures.awaitAll(f)) {
      if (p == null) {
        throw TableException.invalid("a shard of this client has no slot map (in process or"
            + " Redis): it cannot be resharded");
      }
      out.add(SlotMap.fromProto(p));
    }
    return out;
  }

  /** Every shard's statistics: those that own slots, and those joining or retired. */
  private List<dev.dynembed.table.v1.StatsResponse> stats() {
    List<CompletableFuture<dev.dynembed.table.v1.StatsResponse>> f = new ArrayList<>();
    for (Shard s : shards()) {
      f.add(s.stats());
    }
    return Futures.awaitAll(f);
  }

  private List<String> tables() {
    TreeSet<String> names = new TreeSet<>();
    for (var st : stats()) {
      for (TableInfo t : st.getTablesList()) {
        names.add(t.getConfig().getName());
      }
    }
    return new ArrayList<>(names);
  }

  /**
   * Brings every shard to the newest map any shard has (finishing a step a resharding left
   * half done) and drops rows shards no longer own.
   *
   * @return that map
   */
  private SlotMap settle() {
    List<SlotMap> maps = maps();
    if (maps.stream().allMatch(m -> m.epoch() == 0)
        && maps.stream().anyMatch(m -> !m.sameOwners(maps.get(0)))) {
      // shards started beside a cluster that never moved slots (their own shard count differs):
      // they take the cluster's map (shard 0's), extended to name them, owning nothing yet
      join(maps.get(0), 1);
      return settle();
    }
    ensureTables();
    SlotMap newest = maps.get(0);
    for (SlotMap m : maps) {
      if (m.epoch() > newest.epoch()) {
        newest = m;
      }
    }
    for (int s = 0; s < maps.size(); s++) {
      SlotMap mine = maps.get(s);
      if (s >= newest.numShards()) {
        continue; // a shard the newest map does not name yet: it joins below
      }
      if (mine.epoch() == newest.epoch()) {
        if (!mine.sameOwners(newest)) {
          throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format("shards disagree"
              + " on slot map epoch %d: shard %d's differs", newest.epoch(), s), null, s,
              "reshard", null);
        }
        continue;
      }
      boolean gains = false;
      for (int slot = 0; slot < newest.slots(); slot++) {
        if (newest.ownerOfSlot(slot) == s && mine.ownerOfSlot(slot) != s) {
          gains = true;
          break;
        }
      }
      if (!gains) {
        Futures.await(shards().get(s).installSlotMap(newest.toProto()));
        continue;
      }
      progress.accept(String.format("finishing an interrupted step: shard %d takes its slots of"
          + " map epoch %d", s, newest.epoch()));
      abortImport(s); // whatever an interrupted driver staged there: copied again in full
      for (int from = 0; from < maps.size(); from++) {
        if (from == s) {
          continue;
        }
        List<SlotRange> ranges = ranges(mine, newest, from, s);
        if (!ranges.isEmpty()) {
          for (String t : tables()) {
            copy(from, s, t, ranges);
            drainDirty(from, s, t, ranges, true);
          }
        }
      }
      Futures.await(shards().get(s).commitSlots(CommitSlotsRequest.newBuilder()
          .setMap(newest.toProto()).setExpectedRecords(sent).build()));
    }
    dropEverywhere();
    if (newest.numShards() < shards().size()) {
      // shards added after slots moved: the map names them from the next epoch on, so that
      // they can take slots
      return join(newest, newest.epoch() + 1);
    }
    return newest;
  }

  /**
   * Installs on every shard {@code base} extended to name all of this client's shards (those it
   * did not name own no slot), at {@code epoch}.
   */
  private SlotMap join(SlotMap base, long epoch) {
    SlotMap extended = base.extended(Math.max(base.numShards(), shards().size()), epoch);
    progress.accept(String.format("shards %d..%d join the cluster's map (%d slots) at epoch %d,"
        + " owning no slot yet", base.numShards(), shards().size() - 1, base.slots(), epoch));
    for (Shard s : shards()) {
      Futures.await(s.installSlotMap(extended.toProto()));
    }
    return extended;
  }

  /** Creates on every shard the tables some shard has (a new shard has none). */
  private void ensureTables() {
    java.util.Map<String, dev.dynembed.table.v1.TableConfig> configs = new java.util.TreeMap<>();
    List<java.util.Set<String>> has = new ArrayList<>();
    for (var st : stats()) {
      java.util.Set<String> names = new java.util.HashSet<>();
      for (TableInfo t : st.getTablesList()) {
        configs.putIfAbsent(t.getConfig().getName(), t.getConfig());
        names.add(t.getConfig().getName());
      }
      has.add(names);
    }
    for (int s = 0; s < has.size(); s++) {
      for (var e : configs.entrySet()) {
        if (!has.get(s).contains(e.getKey())) {
          Futures.await(shards().get(s).create(e.getValue()));
          progress.accept(String.format("table '%s' created on shard %d", e.getKey(), s));
        }
      }
    }
  }

  private void dropEverywhere() {
    List<CompletableFuture<Long>> f = new ArrayList<>();
    for (Shard s : shards()) {
      f.add(s.dropUnowned());
    }
    Futures.awaitAll(f);
  }

  /** Slots that {@code from} owns in {@code before} and {@code to} owns in {@code after}. */
  private static List<SlotRange> ranges(SlotMap before, SlotMap after, int from, int to) {
    List<SlotRange> out = new ArrayList<>();
    int start = -1;
    for (int slot = 0; slot <= before.slots(); slot++) {
      boolean moves = slot < before.slots() && before.ownerOfSlot(slot) == from
          && after.ownerOfSlot(slot) == to;
      if (moves && start < 0) {
        start = slot;
      } else if (!moves && start >= 0) {
        out.add(SlotRange.newBuilder().setStart(start).setEnd(slot).build());
        start = -1;
      }
    }
    return out;
  }

  private Result run(SlotMap target) {
    SlotMap cur = maps().get(0);
    if (target.slots() != cur.slots()) {
      throw TableException.invalid("the target map has %d slots; the service's has %d (a"
          + " cluster's slot count is fixed)", target.slots(), cur.slots());
    }
    if (target.numShards() > shards().size()) {
      throw TableException.invalid("the target map names %d shards; this client knows %d"
          + " endpoints", target.numShards(), shards().size());
    }
    long steps = 0;
    double longest = 0;
    for (int from = 0; from < shards().size(); from++) {
      for (int to = 0; to < shards().size(); to++) {
        if (from == to) {
          continue;
        }
        List<SlotRange> ranges = ranges(cur, target, from, to);
        if (ranges.isEmpty()) {
          continue;
        }
        SlotMap next = cur.movedTowards(target, from, to, cur.epoch() + 1);
        pauseNanos = 0;
        step(cur, next, from, to, ranges);
        longest = Math.max(longest, pauseNanos / 1e6);
        cur = next;
        steps++;
      }
    }
    progress.accept(String.format("done: map epoch %d, %d rows moved in %d steps, longest pause"
        + " %.1f ms", cur.epoch(), movedRows, steps, longest));
    return new Result(cur, movedRows, steps, longest);
  }

  private void step(SlotMap cur, SlotMap next, int from, int to, List<SlotRange> ranges) {
    int slots = 0;
    for (SlotRange r : ranges) {
      slots += r.getEnd() - r.getStart();
    }
    progress.accept(String.format("epoch %d: %d slots from shard %d to shard %d", next.epoch(),
        slots, from, to));
    List<String> tables = tables();
    abortImport(to); // a clean start: nothing staged there but what this step sends
    for (String t : tables) {
      long c0 = System.nanoTime();
      long rows = copy(from, to, t, ranges);
      long c1 = System.nanoTime();
      long again = 0;
      int rounds = 0;
      for (; rounds < MAX_CATCH_UP_ROUNDS; rounds++) {
        long n = drainDirty(from, to, t, ranges, false);
        again += n;
        if (n < SETTLED) {
          rounds++;
          break;
        }
      }
      progress.accept(String.format(java.util.Locale.ROOT, "  table '%s': %d rows copied in"
          + " %.2f s, %d resent in %d catch-up rounds in %.2f s", t, rows, (c1 - c0) / 1e9,
          again, rounds, (System.nanoTime() - c1) / 1e9));
    }
    // the destination writes what it staged to its log directory now, while calls go on, so
    // that the commit in the pause writes only the last records
    long p0 = System.nanoTime();
    long prepared = Futures.await(shards().get(to).commitSlots(CommitSlotsRequest.newBuilder()
        .setMap(next.toProto()).setPrepare(true).build())).getPrepared();
    progress.accept(String.format(java.util.Locale.ROOT, "  %d staged rows written by the"
        + " destination in %.2f s", prepared, (System.nanoTime() - p0) / 1e9));
    long pause = System.nanoTime();
    for (int s = 0; s < shards().size(); s++) { // the source first: it stops taking the slots
      int shard = s == 0 ? from : s == from ? 0 : s;
      if (shard != to) {
        Futures.await(shards().get(shard).installSlotMap(next.toProto()));
      }
    }
    long last = 0;
    for (String t : tables) {
      last += drainDirty(from, to, t, ranges, true);
    }
    long merged = Futures.await(shards().get(to).commitSlots(CommitSlotsRequest.newBuilder()
        .setMap(next.toProto()).setExpectedRecords(sent).build())).getMerged();
    pauseNanos = System.nanoTime() - pause;
    long d0 = System.nanoTime();
    long dropped = Futures.await(shards().get(from).dropUnowned());
    progress.accept(String.format(java.util.Locale.ROOT, "  cutover: %d last records, %d"
        + " merged, pause %.1f ms; %d dropped at the source in %.2f s", last, merged,
        pauseNanos / 1e6, dropped, (System.nanoTime() - d0) / 1e9));
  }

  /** Every page of the table's rows in the moving slots, from scratch. */
  private long copy(int from, int to, String table, List<SlotRange> ranges) {
    long cursor = 0;
    long rows = 0;
    do {
      ExportSlotsResponse page = Futures.await(shards().get(from).exportSlots(
          ExportSlotsRequest.newBuilder().setTable(table).addAllRanges(ranges).setCursor(cursor)
              .setLimit(PAGE).build()));
      rows += put(to, table, page);
      cursor = page.getNext();
    } while (cursor != 0);
    return rows;
  }

  /** Sends the recorded keys again (until none remain, for the final round). */
  private long drainDirty(int from, int to, String table, List<SlotRange> ranges, boolean last) {
    long rows = 0;
    ExportSlotsResponse page;
    do {
      page = Futures.await(shards().get(from).exportSlots(ExportSlotsRequest.newBuilder()
          .setTable(table).addAllRanges(ranges).setLimit(PAGE).setDirty(true).setLast(last)
          .build()));
      rows += put(to, table, page);
    } while (page.getNext() != 0 && (last || page.getRows().getFrequenciesCount() == PAGE));
    return rows;
  }

  private long put(int to, String table, ExportSlotsResponse page) {
    int n = page.getRows().getFrequenciesCount();
    if (n > 0 || page.getRows().getPendingHashesCount() > 0
        || page.getRows().getRemoved().getLengthsCount() > 0
        || !page.getRows().getPairSummaries().isEmpty()) {
      Futures.await(shards().get(to).importSlots(ImportSlotsRequest.newBuilder()
          .setTable(table).setRows(page.getRows()).build()));
    }
    movedRows += n;
    sent += n;
    return n;
  }

  /** Forgets what shard {@code s} staged, and starts counting what is sent to it anew. */
  private void abortImport(int s) {
    Futures.await(shards().get(s).commitSlots(CommitSlotsRequest.newBuilder().setAbort(true)
        .build()));
    sent = 0;
  }
}
