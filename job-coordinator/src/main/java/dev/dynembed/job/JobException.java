package dev.dynembed.job;

/** A multi-worker job cannot go on: a worker left, a barrier timed out, the job's settings differ. */
public final class JobException extends RuntimeException {
  public JobException(String message) {
    super(message);
  }

  public JobException(String message, Throwable cause) {
    super(message, cause);
  }
}
