package dev.dynembed.table.engine;

import dev.dynembed.table.v1.LogRecord;

/**
 * What a {@link ShardEngine} needs of its durability: the write-ahead log it appends mutations
 * to, and the snapshot cut it must not race. {@link ShardState} is the one implementation; the
 * engine knows only this interface, so the dependency runs one way (the state recovers, installs
 * into and snapshots the engine; the engine only logs). An engine without one (in process, or
 * {@code --wal off}) logs nothing.
 */
public interface ShardJournal {
  /**
   * Appends a record; its log sequence number. A full disk refuses it with RESOURCE_EXHAUSTED and
   * nothing written: for records logged before their change is applied.
   */
  long append(LogRecord record);

  /**
   * Reserves room for a record of at most {@code bytes} whose change is about to be applied, so
   * that a full disk refuses the call before anything changed.
   *
   * @return the reservation, for {@link #append(LogRecord, long)} or {@link #release}
   */
  default long reserve(long bytes) {
    return 0;
  }

  /** Appends a record in the room a {@link #reserve} holds. */
  default long append(LogRecord record, long reservation) {
    return append(record);
  }

  /** Gives back a reservation whose record will not be appended. */
  default void release(long reservation) {}

  /** Returns once the record {@code lsn} is as durable as the fsync policy promises. */
  void awaitDurable(long lsn);

  long lastLsn();

  /** Whether a mutating call waits for the disk before it answers (fsync always). */
  boolean waitsForDisk();

  /** Held while a snapshot cuts: a store replaced meanwhile must be logged after it. */
  Object snapshotMutex();

  /** Swaps in a restored table, written first where recovery can find it. */
  void restored(String table, TableStore fresh);

  /** Log bytes a restart would replay now. */
  long logBytesSinceSnapshot();

  /** Seconds since the last durable snapshot, or NaN. */
  double snapshotAgeSeconds();
}
