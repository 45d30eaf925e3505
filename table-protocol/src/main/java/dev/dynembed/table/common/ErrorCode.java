package dev.dynembed.table.common;

/**
 * The error kinds of the project, one per canonical gRPC status the table service uses. The
 * mapping to and from {@code io.grpc.Status.Code} is by name ({@link #grpcName()}).
 */
public enum ErrorCode {
  /** Bad shape, dtype, NaN/Inf, empty batch, over-long key, invalid config. Never retried. */
  INVALID_ARGUMENT(false),
  /** Unknown table. */
  NOT_FOUND(false),
  /** Create of an existing table with a different config. */
  ALREADY_EXISTS(false),
  /** A batch or request over the documented limits. */
  RESOURCE_EXHAUSTED(false),
  /** The state does not allow the call (e.g. checkpoint of another format or dim). */
  FAILED_PRECONDITION(false),
  /** A corrupt or truncated checkpoint. */
  DATA_LOSS(false),
  /** A shard is down or shutting down; idempotent calls may be retried. */
  UNAVAILABLE(true),
  /** The call's deadline passed; idempotent calls may be retried. */
  DEADLINE_EXCEEDED(true),
  /** The caller presented no credentials the shard knows (certificate or bearer token). */
  UNAUTHENTICATED(false),
  /** The caller's role does not allow the call (a trainer calling drop, save, ...). */
  PERMISSION_DENIED(false),
  /** A bug or an I/O failure on the server. */
  INTERNAL(false);

  private final boolean transientFailure;

  ErrorCode(boolean transientFailure) {
    this.transientFailure = transientFailure;
  }

  /** Whether resending an idempotent call may succeed. */
  public boolean isTransient() {
    return transientFailure;
  }

  public String grpcName() {
    return name();
  }
}
