package dev.dynembed.table.engine;

import dev.dynembed.table.v1.LogRecord;

/**
 * What a primary's replication needs of its {@link ShardState} (docs/design/0019-cluster-map.md):
 * every record appended, in LSN order, and a say in when a mutating call may be answered.
 */
public interface ReplicationHook {
  /**
   * Record {@code lsn} was appended to the log. Called under the log's append lock, in LSN
   * order: it must only queue the record.
   */
  void appended(long lsn, LogRecord record);

  /**
   * Returns once record {@code lsn} may be acknowledged: held by the followers the replication
   * mode requires, and this process still the primary. Throws UNAVAILABLE otherwise (the client
   * resends; the call ledger answers a resend of an applied call once it is replicated).
   */
  void awaitReplicated(long lsn);

  /**
   * Whether {@link #awaitReplicated} may hold an answer back (a replicated group's primary);
   * false for a shard whose only followers are serving replicas, whose calls then run as an
   * unreplicated shard's do.
   */
  default boolean mayHoldAnswers() {
    return true;
  }
}
