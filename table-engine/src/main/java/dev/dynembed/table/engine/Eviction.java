package dev.dynembed.table.engine;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.EvictRequest;
import dev.dynembed.table.v1.EvictionPolicy;
import java.util.Arrays;
import java.util.Comparator;

/**
 * Eviction of one table's rows (docs/design/0012-table-lifecycle.md): the victims are chosen on a
 * frozen copy, deterministically (ties broken by key bytes, so that a replayed log evicts the same
 * rows), and the table is rebuilt without them: a fresh store holding the kept rows with their
 * slots and metadata, and every pending admission count. The caller holds the table's {@link
 * TableStore#quiesce} lock exclusively and swaps the fresh store in.
 */
final class Eviction {
  private Eviction() {}

  /**
   * The rebuilt store (null when nothing was evicted), the number of rows evicted, and with a
   * disk tier the cap's victims to move there ({@link #demote}) once the store is swapped in.
   */
  record Result(TableStore fresh, long evicted, long kept, java.util.List<ColdRows.Record> demoted,
      java.util.List<byte[]> forgotten) {
    Result(TableStore fresh, long evicted, long kept) {
      this(fresh, evicted, kept, java.util.List.of(), java.util.List.of());
    }

    /**
     * Writes the demoted rows to the disk tier. The caller holds the fresh store's lock
     * exclusively until this returns, so no call looks for a victim in neither tier; if the
     * write fails the victims go back into the fresh store (over its cap, not lost).
     */
    void demote() {
      if (!forgotten.isEmpty()) { // victims a tier keeping copies must not bring back
        fresh.cold().forget(forgotten);
      }
      if (demoted.isEmpty()) {
        return;
      }
      try {
        fresh.cold().putAll(demoted);
      } catch (RuntimeException e) {
        for (ColdRows.Record r : demoted) {
          fresh.restoreRecord(PackedKeys.of(new String(r.key(),
              java.nio.charset.StandardCharsets.UTF_8)), 0, r.values(), 0, r.frequency(),
              r.step(), r.updates());
        }
        throw e;
      }
    }
  }

  /** Refuses a request that names no eviction or mixes keys with a policy. */
  static void check(EvictRequest req) {
    boolean byKeys = req.getKeys().getLengthsCount() > 0;
    if (byKeys && (req.getTtlSteps() > 0 || req.getMaxKeys() > 0)) {
      throw TableException.invalid("table '%s': evict either listed keys or by ttl_steps /"
          + " max_keys, not both", req.getTable());
    }
    if (!byKeys && req.getTtlSteps() == 0 && req.getMaxKeys() == 0) {
      throw TableException.invalid("table '%s': an eviction needs ttl_steps > 0, max_keys > 0"
          + " or keys", req.getTable());
    }
    if (req.getPolicy() != EvictionPolicy.EVICTION_POLICY_UNSPECIFIED
        && req.getPolicy() != EvictionPolicy.LFU && req.getPolicy() != EvictionPolicy.LRU) {
      throw TableException.invalid("table '%s': eviction policy %s is not supported",
          req.getTable(), req.getPolicy());
    }
  }

  /** {@code req} with now_step resolved against the table (what the log records). */
  static EvictRequest resolve(EvictRequest req, TableStore t) {
    return req.getNowStep() > 0 || req.getTtlSteps() == 0 ? req
        : req.toBuilder().setNowStep(t.counters().getLastStep()).build();
  }

  /** Chooses the victims and rebuilds the table without them. */
  static Result run(TableStore t, EvictRequest req) {
    TableStore.Frozen f = t.freezeHot();
    int n = f.size();
    boolean[] victim = new boolean[n];
    boolean[] demote = t.cold() == null ? null : new boolean[n];
    long evicted = 0;
    boolean byKeys = req.getKeys().getLengthsCount() > 0; // removed from the tier here
    if (byKeys) {
      PackedKeys keys = PackedKeys.fromProto(req.getKeys(), t.maxKeyBytes, "keys");
      if (t.cold() != null) { // removed from both tiers
        java.util.List<byte[]> bytes = new java.util.ArrayList<>(keys.size());
        for (int i = 0; i < keys.size(); i++) {
          bytes.add(keys.keyBytes(i));
        }
        evicted += t.cold().remove(bytes);
      }
      for (int i = 0; i < keys.size(); i++) {
        int row = t.lookupHot(keys, i);
        if (row >= 0 && row < n && f.isReady(row) && !victim[row]) {
          victim[row] = true;
          evicted++;
        }
      }
    } else {
      long live = 0;
      for (int r = 0; r < n; r++) {
        if (!f.isReady(r)) {
          continue;
        }
        long step = f.meta(r, TableStore.M_STEP);
        if (req.getTtlSteps() > 0 && req.getNowStep() - step > req.getTtlSteps()) {
          victim[r] = true;
          evicted++;
        } else {
          live++;
        }
      }
      if (req.getMaxKeys() > 0 && live > req.getMaxKeys()) {
        Integer[] order = new Integer[(int) live];
        int k = 0;
        for (int r = 0; r < n; r++) {
          if (f.isReady(r) && !victim[r]) {
            order[k++] = r;
          }
        }
        Comparator<Integer> freq = Comparator.comparingLong(r -> f.meta(r, TableStore.M_FREQ));
        Comparator<Integer> step = Comparator.comparingLong(r -> f.meta(r, TableStore.M_STEP));
        Comparator<Integer> byKey = (a, b) -> Arrays.compareUnsigned(key(f, a), key(f, b));
        Comparator<Integer> policy = req.getPolicy() == EvictionPolicy.LRU
            ? step.thenComparing(freq).thenComparing(byKey)
            : freq.thenComparing(step).thenComparing(byKey);
        Arrays.sort(order, policy);
        long drop = live - req.getMaxKeys();
        for (int i = 0; i < drop; i++) {
          victim[order[i]] = true;
          if (demote != null) {
            demote[order[i]] = true;
          }
        }
        evicted += drop;
      }
    }
    if (evicted == 0) {
      return new Result(null, 0, t.size());
    }
    TableStore fresh = new TableStore(t.config(), t.shardIndex, t.numShards);
    fresh.attachCold(t.cold());
    if (t.cold() != null) {
      fresh.samplers().adopt(t.samplers()); // key-based snapshots: valid across the rebuild
    }
    float[] rec = new float[t.rowFloats];
    long kept = 0;
    java.util.List<ColdRows.Record> demoted = new java.util.ArrayList<>();
    boolean copies = t.cold() != null && t.cold().keepsCopies();
    java.util.List<byte[]> forgotten = new java.util.ArrayList<>();
    for (int r = 0; r < n; r++) {
      if (!f.isReady(r)) {
        continue;
      }
      if (victim[r]) {
        if (copies && !byKeys && !demote[r]) {
          forgotten.add(key(f, r));
        }
        if (demote != null && demote[r]) {
          demoted.add(new ColdRows.Record(key(f, r), Arrays.copyOfRange(f.rowPage(r),
              f.rowBase(r), f.rowBase(r) + t.rowFloats), f.meta(r, TableStore.M_FREQ),
              f.meta(r, TableStore.M_STEP), f.meta(r, TableStore.M_UPDATES)));
        }
        continue;
      }
      PackedKeys.Builder b = new PackedKeys.Builder(1);
      f.appendKey(r, b);
      System.arraycopy(f.rowPage(r), f.rowBase(r), rec, 0, t.rowFloats);
      int row = fresh.restoreRow(b.build(), 0, rec, 0, f.meta(r, TableStore.M_FREQ),
          f.meta(r, TableStore.M_STEP), f.meta(r, TableStore.M_UPDATES));
      if (copies) {
        fresh.carryFlushed(row, t, r);
      }
      kept++;
    }
    fresh.adoptPending(t); // t is retired with the swap: its counts move, not copied
    if (f.sketchCounters() != null) {
      fresh.admissionSketch().merge(AdmissionSketch.of(fresh.admissionSketch().width(),
          f.sketchCounters()));
    }
    return new Result(fresh, evicted, kept, demoted, forgotten);
  }

  private static byte[] key(TableStore.Frozen f, int row) {
    PackedKeys.Builder b = new PackedKeys.Builder(1);
    f.appendKey(row, b);
    return b.build().keyBytes(0);
  }
}
