package dev.dynembed.word2vec;

/** A problem with the user's input (corpus, query, model directory), told as one clear message. */
public final class CorpusException extends RuntimeException {
  public CorpusException(String message) {
    super(message);
  }

  public CorpusException(String message, Throwable cause) {
    super(message, cause);
  }
}
