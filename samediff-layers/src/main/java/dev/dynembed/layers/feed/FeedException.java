package dev.dynembed.layers.feed;

/** Bad data-feed input: a description, or a line of a multi-slot file (named in the message). */
public final class FeedException extends IllegalArgumentException {
  public FeedException(String message) {
    super(message);
  }

  public FeedException(String message, Throwable cause) {
    super(message, cause);
  }
}
