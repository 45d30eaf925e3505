package dev.dynembed.table.common;

/** The limits every implementation enforces. The README lists them in its configuration table. */
public final class Limits {
  private Limits() {}

  /** Largest row width. */
  public static final int MAX_DIM = 4096;
  /** Key length in UTF-8 bytes when the table config leaves max_key_bytes at 0. */
  public static final int DEFAULT_MAX_KEY_BYTES = 256;
  /** Upper bound of a table's max_key_bytes. */
  public static final int MAX_KEY_BYTES = 4096;
  /** Most keys in one request (per shard request, and per client call). */
  public static final int MAX_BATCH_KEYS = 1 << 20;
  /** Most floats of rows in one request or reply (256 MiB). */
  public static final long MAX_BATCH_FLOATS = 64L << 20;

  /**
   * Refuses (RESOURCE_EXHAUSTED) a reply of {@code rows} rows of {@code width} floats beyond
   * {@link #MAX_BATCH_FLOATS}, computed in {@code long} before anything is allocated.
   */
  public static void checkReplyFloats(String table, String what, long rows, long width) {
    long floats = rows * width;
    if (floats > MAX_BATCH_FLOATS) {
      throw TableException.exhausted("table '%s': %s of %d rows x %d floats = %d floats exceed"
          + " the %d floats of one reply; ask for fewer rows per call", table, what, rows, width,
          floats, MAX_BATCH_FLOATS);
    }
  }
  /**
   * Largest learning rate a call or a table may ask for: far above any rate that trains, and low
   * enough that a finite gradient times it stays finite for every gradient a shard accepts.
   */
  public static final float MAX_LEARNING_RATE = 1e6f;
  /**
   * Largest magnitude an optimizer may leave in a row's weights: with {@link #MAX_DIM} values a
   * dot product or a norm of two such rows stays finite in float (4096 x 1e30 &lt; 3.4e38), so
   * top-k scores never become infinite or NaN. An update that would pass it, or leave a
   * non-finite slot value, is not applied to that row (docs/design/0009-security.md).
   */
  public static final float MAX_ROW_VALUE = 1e15f;
  /** Most draws in one sample call. */
  public static final int MAX_NUM_SAMPLED = 1 << 22;
  /** Largest k of a top-k query. */
  public static final int MAX_TOP_K = 10_000;
  /** Most queries in one top-k call. */
  public static final int MAX_TOP_K_QUERIES = 4096;
  /**
   * Most hits one shard works on for a top-k call: queries x min(k, the shard's rows). A shard
   * keeps a score and a row id per hit (8 bytes): 32 MiB at this bound.
   */
  public static final long MAX_TOP_K_HITS = 1L << 22;
  /** Most items in one Read or Write call. */
  public static final int MAX_ITEMS_PER_CALL = 4096;
  /** Largest gRPC message either side accepts. */
  public static final int MAX_MESSAGE_BYTES = 512 << 20;
  /**
   * HTTP/2 flow-control window of both ends: replies of a batch are megabytes, and grpc-java's
   * 1 MiB default stalls every reply on window updates (measured: docs/benchmarks.md).
   */
  public static final int FLOW_CONTROL_WINDOW = 64 << 20;
  /** Table names: letters, digits, '_', '.', '-'; 1..128 characters. */
  public static final String TABLE_NAME_PATTERN = "[A-Za-z0-9_.\\-]{1,128}";

  /**
   * Calls a shard runs at once per client connection (a client's further calls queue in its
   * transport): with the message limit and the flow-control window, it bounds the memory one
   * connection can hold on a shard.
   */
  public static final int MAX_CALLS_PER_CONNECTION = 256;
}
