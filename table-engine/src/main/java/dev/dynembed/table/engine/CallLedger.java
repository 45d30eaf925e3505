package dev.dynembed.table.engine;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.AppliedCall;
import dev.dynembed.table.v1.CallId;
import dev.dynembed.table.v1.ClientCalls;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The mutating calls a shard has applied, by client and sequence number, so that a resent call
 * (a lost reply, a deadline, a shard restart) is applied once (docs/design/0008-durability.md).
 * A client names with every call the lowest sequence number it may still resend (its low
 * water); everything below is forgotten, so a client holds as many entries as it has calls in
 * flight. The ledger is part of the shard's snapshot and rebuilt by the log's replay.
 *
 * <p>Bounds: {@value #MAX_CLIENTS} clients (the least recently used one is forgotten beyond
 * that) and {@value #MAX_UNSETTLED} unsettled calls per client (more is RESOURCE_EXHAUSTED).
 */
public final class CallLedger {
  static final int MAX_CLIENTS = 65_536;
  static final int MAX_UNSETTLED = 65_536;

  /** What a shard should do with a call. */
  enum Claim {
    /** First time seen: apply it, then {@link #done}. */
    NEW,
    /** Applied before: answer with {@link #result} and change nothing. */
    DUPLICATE,
    /** Not a deduplicated call (no client id): apply it. */
    UNTRACKED
  }

  private static final class Entry {
    final long lsn;
    final int[] result;

    Entry(long lsn, int[] result) {
      this.lsn = lsn;
      this.result = result;
    }
  }

  private static final class Client {
    long lowWater;
    final TreeMap<Long, Entry> calls = new TreeMap<>();
    final java.util.Set<Long> inProgress = new java.util.HashSet<>();
  }

  /**
   * Clients by id, least recently used first. Only a call that was applied makes room (in {@link
   * #done}): a refused call's client is dropped again ({@link #abandon}) and never pushes out
   * another client, whose resends would then be applied a second time.
   */
  private final LinkedHashMap<Long, Client> clients = new LinkedHashMap<>(16, 0.75f, true);
  private long forgotten;

  /** Forgets least recently used clients with nothing in progress, beyond the bound. */
  private void makeRoom() {
    Iterator<Map.Entry<Long, Client>> it = clients.entrySet().iterator();
    while (clients.size() > MAX_CLIENTS && it.hasNext()) {
      if (it.next().getValue().inProgress.isEmpty()) {
        it.remove();
        forgotten++;
      }
    }
  }

  /** Clients forgotten to keep the bound (their calls' resends would apply again). */
  public synchronized long forgotten() {
    return forgotten;
  }

  /**
   * Claims a call for applying. A call being applied by another thread right now (resent after
   * a deadline) is UNAVAILABLE: the client resends it later and then finds it applied.
   */
  synchronized Claim claim(CallId id) {
    if (id.getClient() == 0) {
      return Claim.UNTRACKED;
    }
    if (id.getSeq() < 1 || id.getLowWater() > id.getSeq()) {
      throw TableException.invalid("call id of client %016x: seq %d with low water %d (seq must"
          + " be >= 1 and >= low water)", id.getClient(), id.getSeq(), id.getLowWater());
    }
    Client c = clients.computeIfAbsent(id.getClient(), k -> new Client());
    settle(c, id.getLowWater());
    if (id.getSeq() < c.lowWater) {
      throw TableException.precondition("client %016x resent call %d, which it had declared"
          + " settled (low water %d)", id.getClient(), id.getSeq(), c.lowWater);
    }
    if (c.calls.containsKey(id.getSeq())) {
      return Claim.DUPLICATE;
    }
    if (!c.inProgress.add(id.getSeq())) {
      throw new TableException(ErrorCode.UNAVAILABLE, String.format("call %d of client %016x is"
          + " still being applied; resend it later", id.getSeq(), id.getClient()));
    }
    if (c.calls.size() + c.inProgress.size() > MAX_UNSETTLED) {
      c.inProgress.remove(id.getSeq());
      throw TableException.exhausted("client %016x has %d unsettled calls on this shard (limit"
          + " %d): its low water %d does not advance", id.getClient(), c.calls.size(),
          MAX_UNSETTLED, c.lowWater);
    }
    return Claim.NEW;
  }

  private static void settle(Client c, long lowWater) {
    if (lowWater > c.lowWater) {
      c.lowWater = lowWater;
      c.calls.headMap(lowWater).clear();
    }
  }

  /**
   * Whether call {@code id} was applied here (without claiming it): a resend of it that meets a
   * newer slot map is refused as MOVED all the same, but says so.
   */
  synchronized boolean applied(CallId id) {
    if (id.getClient() == 0) {
      return false;
    }
    Client c = clients.get(id.getClient());
    return c != null && c.calls.containsKey(id.getSeq());
  }

  /** The answer a claimed DUPLICATE gets (null if the call has none to repeat). */
  synchronized int[] result(CallId id) {
    Client c = clients.get(id.getClient());
    Entry e = c == null ? null : c.calls.get(id.getSeq());
    return e == null ? null : e.result;
  }

  /** A NEW call was applied and logged at {@code lsn} (0: no log). */
  synchronized void done(CallId id, long lsn, int[] result) {
    if (id.getClient() == 0) {
      return;
    }
    Client c = clients.computeIfAbsent(id.getClient(), k -> new Client());
    c.inProgress.remove(id.getSeq());
    if (id.getSeq() >= c.lowWater) {
      c.calls.put(id.getSeq(), new Entry(lsn, result));
    }
    makeRoom();
  }

  /**
   * A NEW call failed without effect: a resend applies it. A client left with nothing applied
   * and nothing in progress is dropped, so that refused calls take no room.
   */
  synchronized void abandon(CallId id) {
    Client c = clients.get(id.getClient());
    if (c != null) {
      c.inProgress.remove(id.getSeq());
      if (c.inProgress.isEmpty() && c.calls.isEmpty()) {
        clients.remove(id.getClient());
      }
    }
  }

  /** A call replayed from the log (recovery). */
  synchronized void replayed(CallId id, long lsn, int[] result) {
    if (id.getClient() == 0) {
      return;
    }
    Client c = clients.computeIfAbsent(id.getClient(), k -> new Client());
    settle(c, id.getLowWater());
    if (id.getSeq() >= c.lowWater) {
      c.calls.put(id.getSeq(), new Entry(lsn, result));
    }
    makeRoom();
  }

  /** The entries of calls logged before {@code lsn}: the ledger as of a snapshot's cut. */
  synchronized List<ClientCalls> snapshot(long beforeLsn) {
    List<ClientCalls> out = new ArrayList<>();
    for (Map.Entry<Long, Client> e : clients.entrySet()) {
      ClientCalls.Builder b = ClientCalls.newBuilder().setClient(e.getKey())
          .setLowWater(e.getValue().lowWater);
      for (Map.Entry<Long, Entry> call : e.getValue().calls.entrySet()) {
        if (call.getValue().lsn < beforeLsn) {
          AppliedCall.Builder a = AppliedCall.newBuilder().setSeq(call.getKey());
          if (call.getValue().result != null) {
            for (int r : call.getValue().result) {
              a.addRowsUpdated(r);
            }
          }
          b.addCalls(a);
        }
      }
      out.add(b.build());
    }
    return out;
  }

  /** Forgets every client (a follower about to load its primary's snapshot). */
  synchronized void clear() {
    clients.clear();
  }

  /** Loads a snapshot's entries (recovery, before the log is replayed). */
  synchronized void restore(List<ClientCalls> list) {
    for (ClientCalls cc : list) {
      Client c = clients.computeIfAbsent(cc.getClient(), k -> new Client());
      c.lowWater = Math.max(c.lowWater, cc.getLowWater());
      for (AppliedCall a : cc.getCallsList()) {
        int[] r = new int[a.getRowsUpdatedCount()];
        for (int i = 0; i < r.length; i++) {
          r[i] = a.getRowsUpdated(i);
        }
        c.calls.put(a.getSeq(), new Entry(0, r));
      }
    }
  }

  /** Clients known (for stats and tests). */
  public synchronized int clients() {
    return clients.size();
  }

  /** Entries held over all clients (for stats and tests). */
  synchronized int entries() {
    int n = 0;
    for (Iterator<Client> it = clients.values().iterator(); it.hasNext(); ) {
      n += it.next().calls.size();
    }
    return n;
  }
}
