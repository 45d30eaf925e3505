package dev.dynembed.table.client;

import java.time.Duration;

/**
 * Options of the sharded gRPC client. Defaults: deadline 30 s per data call, 10 min for
 * save/restore, up to 4 attempts for idempotent calls on UNAVAILABLE (backoff 0.1 s .. 2 s).
 */
public record ClientOptions(Duration deadline, Duration checkpointDeadline, int maxAttempts) {
  public static final ClientOptions DEFAULTS =
      new ClientOptions(Duration.ofSeconds(30), Duration.ofMinutes(10), 4);

  public ClientOptions {
    if (deadline.isNegative() || deadline.isZero()) {
      throw new IllegalArgumentException("deadline must be > 0 but was " + deadline);
    }
    if (checkpointDeadline.isNegative() || checkpointDeadline.isZero()) {
      throw new IllegalArgumentException(
          "checkpointDeadline must be > 0 but was " + checkpointDeadline);
    }
    if (maxAttempts < 1 || maxAttempts > 5) {
      throw new IllegalArgumentException("maxAttempts must be in [1, 5] but was " + maxAttempts);
    }
  }

  public ClientOptions withDeadline(Duration d) {
    return new ClientOptions(d, checkpointDeadline, maxAttempts);
  }

  public ClientOptions withMaxAttempts(int n) {
    return new ClientOptions(deadline, checkpointDeadline, n);
  }
}
