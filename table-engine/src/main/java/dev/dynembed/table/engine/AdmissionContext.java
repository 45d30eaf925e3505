package dev.dynembed.table.engine;

/**
 * Admission under memory pressure ({@code TableConfig.admission_pressure}, docs/design/
 * 0027-admission-under-pressure.md) for the find_or_insert item running on this thread: the
 * shard's memory figures, taken once per call, and what the item admitted, for its log record.
 *
 * <p>{@link ShardCommands} opens one around each inserting item of a table with the policy; a
 * replay opens one with the logged decisions ({@link #replaying}), which then stand in for the
 * pressure. A {@code findOrInsert} with no context open (a caller of the store itself) sees only
 * the table's own pressure (its max_bytes share) and records nothing.
 */
final class AdmissionContext {
  private static final ThreadLocal<AdmissionContext> CURRENT = new ThreadLocal<>();

  /** The shard's memory budget (0 = none) and its bytes in use when the call began. */
  final long budget;
  final long used;
  /** Logged decisions (replay), or null: bit i = key i had a row after the item. */
  final byte[] logged;
  /** Bytes this item may still add under the shard's budget (rows it admitted are taken off). */
  long room;
  /** Set by the store: bit i = key i had a row after the item (null: no policy applied). */
  byte[] admitted;

  private AdmissionContext(long budget, long used, byte[] logged) {
    this.budget = budget;
    this.used = used;
    this.logged = logged;
    this.room = budget > 0 ? budget - used : Long.MAX_VALUE;
  }

  /** Opens a context for an item run by the shard: decisions taken from the memory now. */
  static AdmissionContext open(long budget, long used) {
    AdmissionContext c = new AdmissionContext(budget, used, null);
    CURRENT.set(c);
    return c;
  }

  /** Opens a context for an item replayed from the log: the logged decisions are taken. */
  static AdmissionContext replaying(byte[] logged) {
    AdmissionContext c = new AdmissionContext(0, 0, logged);
    CURRENT.set(c);
    return c;
  }

  static AdmissionContext current() {
    return CURRENT.get();
  }

  static void close() {
    CURRENT.remove();
  }

  /** The shard's bytes in use after the item: what it began with and the rows it admitted. */
  long usedAfter() {
    return budget > 0 ? budget - room : used;
  }

  /** The shard's part of the pressure: bytes in use over the budget (0 without a budget). */
  double shardPressure() {
    return budget > 0 ? (double) used / budget : 0;
  }
}
