package dev.dynembed.table.common;

/**
 * The one unchecked exception family of the project. Every failure of a table call, in process or
 * remote, is a {@code TableException} with an {@link ErrorCode}; subclasses give the common kinds a
 * type to catch. Remote failures also name the shard and the call ({@link #shard()}, {@link
 * #call()}); in-process ones have shard -1 and the call name.
 */
public class TableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final ErrorCode code;
  private final String table;
  private final int shard;
  private final String call;

  public TableException(ErrorCode code, String message) {
    this(code, message, null, -1, null, null);
  }

  public TableException(ErrorCode code, String message, Throwable cause) {
    this(code, message, null, -1, null, cause);
  }

  protected TableException(
      ErrorCode code, String message, String table, int shard, String call, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.table = table;
    this.shard = shard;
    this.call = call;
  }

  /** The end of {@link #storeReplaced}'s message: how a client tells that routine resend apart. */
  private static final String STORE_REPLACED = " while the call waited; resend it";

  /**
   * UNAVAILABLE for a call that waited for a table whose store was then replaced (dropped,
   * restored, or rebuilt by an eviction): routine, the client resends to the new store.
   */
  public static TableException storeReplaced(String table) {
    return new TableException(ErrorCode.UNAVAILABLE, String.format("table '%s' was dropped,"
        + " restored or rebuilt by an eviction" + STORE_REPLACED, table));
  }

  /** Whether a status description is {@link #storeReplaced}'s (it may carry a prefix). */
  public static boolean isStoreReplaced(String description) {
    return description != null && description.endsWith(STORE_REPLACED);
  }

  private static final String RUN_AGAIN = "run the resharding again";

  /**
   * FAILED_PRECONDITION for a slot move's step that lost its state on a shard (a restart, a
   * failover, an eviction's rebuild): nothing of it took effect, and running the resharding
   * again redoes it ({@code format} names what happened; the sentence that says so is added).
   */
  public static TableException moveInterrupted(String format, Object... args) {
    return new TableException(ErrorCode.FAILED_PRECONDITION, String.format(format, args) + ": "
        + RUN_AGAIN);
  }

  /** Whether this is a {@link #moveInterrupted} refusal (it may carry a prefix). */
  public boolean isMoveInterrupted() {
    return code == ErrorCode.FAILED_PRECONDITION && getMessage().endsWith(RUN_AGAIN);
  }

  private static final String MOVED = "MOVED(epoch ";

  /**
   * FAILED_PRECONDITION for a call routed by an older slot map than the shard's (epoch {@code
   * epoch}): refused whole before anything was applied; the client re-reads the map, re-routes
   * the call's keys and sends them to their owners (docs/design/0021-slot-moves-proposal.md).
   */
  public static TableException moved(long epoch, long routedAt, int shard) {
    return new TableException(ErrorCode.FAILED_PRECONDITION, String.format(MOVED + "%d): the"
        + " call was routed by slot map epoch %d; shard %d routes by epoch %d (slots moved)",
        epoch, routedAt, shard, epoch));
  }

  private static final String APPLIED_BEFORE = "; this shard applied the call before its reply"
      + " was lost: resend its keys without counting them";

  /**
   * The {@link #moved} refusal {@code moved} of a resent call that this shard had applied (and
   * counted) before the slots moved: the client re-routes the keys as for any MOVED, but sends
   * them without counting occurrences, so a lost reply does not count them twice (once here,
   * once at their new owner).
   */
  public static TableException movedAfterApplied(TableException moved) {
    return new TableException(moved.code, moved.getMessage() + APPLIED_BEFORE);
  }

  /** Whether this is a {@link #movedAfterApplied} refusal. */
  public boolean isMovedAfterApplied() {
    return isMoved() && getMessage().endsWith(APPLIED_BEFORE);
  }

  /** The epoch of a {@link #moved} refusal's description (it may carry a prefix), or -1. */
  public static long movedEpoch(String description) {
    if (description == null) {
      return -1;
    }
    int i = description.indexOf(MOVED);
    if (i < 0) {
      return -1;
    }
    int j = description.indexOf(')', i);
    try {
      return Long.parseLong(description.substring(i + MOVED.length(), j));
    } catch (RuntimeException e) {
      return -1;
    }
  }

  /** Whether this is a {@link #moved} refusal. */
  public boolean isMoved() {
    return code == ErrorCode.FAILED_PRECONDITION && movedEpoch(getMessage()) >= 0;
  }

  /** Creates the typed exception for a code. */
  public static TableException of(
      ErrorCode code, String message, String table, int shard, String call, Throwable cause) {
    String full = context(table, shard, call) + message;
    return switch (code) {
      case NOT_FOUND -> new TableNotFoundException(full, table, shard, call, cause);
      case INVALID_ARGUMENT -> new InvalidRequestException(full, table, shard, call, cause);
      case RESOURCE_EXHAUSTED -> new LimitExceededException(full, table, shard, call, cause);
      case UNAVAILABLE, DEADLINE_EXCEEDED ->
          new ShardUnavailableException(code, full, table, shard, call, cause);
      case DATA_LOSS -> new CheckpointCorruptException(full, table, shard, call, cause);
      default -> new TableException(code, full, table, shard, call, cause);
    };
  }

  private static String context(String table, int shard, String call) {
    if (table == null && shard < 0 && call == null) {
      return "";
    }
    StringBuilder sb = new StringBuilder();
    if (call != null) {
      sb.append(call);
    }
    if (table != null && !table.isEmpty()) {
      sb.append(sb.length() > 0 ? " " : "").append("table '").append(table).append('\'');
    }
    if (shard >= 0) {
      sb.append(sb.length() > 0 ? " " : "").append("shard ").append(shard);
    }
    return sb.append(": ").toString();
  }

  public ErrorCode code() {
    return code;
  }

  /** The table the call was about, or null. */
  public String table() {
    return table;
  }

  /** The shard index that failed, or -1 (in-process or not shard-specific). */
  public int shard() {
    return shard;
  }

  /** The call that failed (e.g. "applyGradients"), or null. */
  public String call() {
    return call;
  }

  public static TableException invalid(String format, Object... args) {
    return new InvalidRequestException(String.format(format, args), null, -1, null, null);
  }

  public static TableException notFound(String table) {
    return new TableNotFoundException("table '" + table + "' does not exist", table, -1, null, null);
  }

  public static TableException exhausted(String format, Object... args) {
    return new LimitExceededException(String.format(format, args), null, -1, null, null);
  }

  public static TableException dataLoss(String format, Object... args) {
    return new CheckpointCorruptException(String.format(format, args), null, -1, null, null);
  }

  public static TableException precondition(String format, Object... args) {
    return new TableException(ErrorCode.FAILED_PRECONDITION, String.format(format, args));
  }

  /** A table that does not exist. */
  public static final class TableNotFoundException extends TableException {
    private static final long serialVersionUID = 1L;

    TableNotFoundException(String m, String table, int shard, String call, Throwable cause) {
      super(ErrorCode.NOT_FOUND, m, table, shard, call, cause);
    }
  }

  /** A request that is malformed: shape, NaN/Inf, empty batch, key length, config. */
  public static final class InvalidRequestException extends TableException {
    private static final long serialVersionUID = 1L;

    InvalidRequestException(String m, String table, int shard, String call, Throwable cause) {
      super(ErrorCode.INVALID_ARGUMENT, m, table, shard, call, cause);
    }
  }

  /** A request over the documented limits ({@link Limits}). */
  public static final class LimitExceededException extends TableException {
    private static final long serialVersionUID = 1L;

    LimitExceededException(String m, String table, int shard, String call, Throwable cause) {
      super(ErrorCode.RESOURCE_EXHAUSTED, m, table, shard, call, cause);
    }
  }

  /** A shard that did not answer (down, shutting down, or past the deadline). */
  public static final class ShardUnavailableException extends TableException {
    private static final long serialVersionUID = 1L;

    ShardUnavailableException(
        ErrorCode code, String m, String table, int shard, String call, Throwable cause) {
      super(code, m, table, shard, call, cause);
    }
  }

  /** A checkpoint file that is corrupt, truncated or missing. */
  public static final class CheckpointCorruptException extends TableException {
    private static final long serialVersionUID = 1L;

    CheckpointCorruptException(String m, String table, int shard, String call, Throwable cause) {
      super(ErrorCode.DATA_LOSS, m, table, shard, call, cause);
    }
  }
}
