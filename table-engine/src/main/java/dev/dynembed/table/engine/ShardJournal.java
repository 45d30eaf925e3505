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
  /** Appends a record; its log sequence number. */
  long append(LogRecord record);

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
