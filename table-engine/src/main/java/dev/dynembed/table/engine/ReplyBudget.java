package dev.dynembed.table.engine;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The memory a shard lets its replies take at once (docs/design/0009-security.md, "What one
 * caller can take"). A call that answers with rows reserves its reply's size, computed from the
 * request before anything is built ({@link ShardCommands#cost}), and gives it back once the
 * reply has left (written to the socket, or the call cancelled): a gRPC reply is a heap array
 * and then its serialized copy, a data-plane reply a direct buffer, and without this bound a
 * handful of small requests asking for the largest replies ran an 8 GiB shard out of memory.
 *
 * <p>Rules: a call larger than the whole budget is RESOURCE_EXHAUSTED (it can never fit: ask for
 * fewer rows per call, or give the shard more); one that fits the budget but not what is left
 * now is UNAVAILABLE (resend later, which the client does); a call of at most {@link
 * #ALWAYS_ADMITTED} bytes is always admitted, so that training steps are served while large
 * calls hold the budget (such calls are bounded by the threads that build them, since each runs
 * on one thread until its reply is written).
 */
public final class ReplyBudget {
  /** Replies this small pass even when the budget is taken (a training step's are ~1 MiB). */
  public static final long ALWAYS_ADMITTED = 8L << 20;

  private final long capacity;
  private final AtomicLong used = new AtomicLong();
  private final AtomicLong refused = new AtomicLong();

  /** @param capacity bytes of replies in flight at once; at least {@link #ALWAYS_ADMITTED} */
  public ReplyBudget(long capacity) {
    if (capacity < ALWAYS_ADMITTED) {
      throw new IllegalArgumentException("a reply budget of " + capacity + " bytes is below the "
          + ALWAYS_ADMITTED + " bytes of one ordinary reply");
    }
    this.capacity = capacity;
  }

  /** A quarter of the heap (direct memory defaults to the heap's size as well). */
  public static long defaultCapacity() {
    return Math.max(ALWAYS_ADMITTED, Runtime.getRuntime().maxMemory() / 4);
  }

  /** Bytes of replies a shard holds at most at once. */
  public long capacity() {
    return capacity;
  }

  /** Bytes reserved now. */
  public long used() {
    return used.get();
  }

  /** Calls refused by this budget since the start (metrics). */
  public long refused() {
    return refused.get();
  }

  /**
   * Reserves {@code bytes} for one reply.
   *
   * @param table named in the refusal
   * @throws TableException RESOURCE_EXHAUSTED if the reply can never fit, UNAVAILABLE if it does
   *     not fit now
   */
  public Lease reserve(long bytes, String table) {
    if (bytes <= ALWAYS_ADMITTED) {
      used.addAndGet(bytes);
      return new Lease(bytes);
    }
    if (bytes > capacity) {
      refused.incrementAndGet();
      throw TableException.exhausted("table '%s': a reply of about %d bytes exceeds this shard's"
          + " reply budget of %d bytes (table-server --reply-budget-mb); ask for fewer rows per"
          + " call", table, bytes, capacity);
    }
    while (true) {
      long u = used.get();
      if (u + bytes > capacity) {
        refused.incrementAndGet();
        throw new TableException(ErrorCode.UNAVAILABLE, String.format("table '%s': the shard"
            + " holds %d bytes of replies already and a reply of about %d bytes would pass its"
            + " budget of %d bytes; resend later", table, u, bytes, capacity));
      }
      if (used.compareAndSet(u, u + bytes)) {
        return new Lease(bytes);
      }
    }
  }

  /** One reply's reservation: closed once, by whoever sees the reply leave first. */
  public final class Lease implements AutoCloseable, Runnable {
    private final long bytes;
    private final AtomicBoolean open = new AtomicBoolean(true);

    private Lease(long bytes) {
      this.bytes = bytes;
    }

    @Override
    public void close() {
      if (open.compareAndSet(true, false)) {
        used.addAndGet(-bytes);
      }
    }

    /** As {@link #close}, for a callback. */
    @Override
    public void run() {
      close();
    }
  }
}
