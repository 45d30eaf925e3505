package dev.dynembed.table.cluster;

/** A cluster map that cannot be read, joined or trusted; the message names the problem. */
public final class ClusterException extends RuntimeException {
  public ClusterException(String message) {
    super(message);
  }

  public ClusterException(String message, Throwable cause) {
    super(message, cause);
  }
}
