package dev.dynembed.table.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A client interceptor that adds a network round trip to every call, for benchmarks on loopback:
 * the call's messages leave half the delay late, and its reply (headers, messages, close) is
 * handed to the caller half the delay late. Order within a call is kept. Install it with {@link
 * ClientOptions.Builder#interceptors}; {@code bin/word2vec --simulated-rtt} does.
 */
public final class SimulatedLatency implements ClientInterceptor {
  private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(
      r -> {
        Thread t = new Thread(r, "simulated-latency");
        t.setDaemon(true);
        return t;
      });

  private final long halfNanos;

  /** @param roundTrip the delay each call gets in all, half each way; must be &gt; 0 */
  public SimulatedLatency(Duration roundTrip) {
    if (roundTrip.isNegative() || roundTrip.isZero()) {
      throw new IllegalArgumentException("roundTrip must be > 0 but was " + roundTrip);
    }
    this.halfNanos = roundTrip.toNanos() / 2;
  }

  /** Runs {@code r} after half the round trip, in order with the other events of its call. */
  private void later(SerialQueue q, Runnable r) {
    long due = System.nanoTime() + halfNanos;
    q.add(() -> {
      long wait = due - System.nanoTime();
      if (wait > 0) {
        TIMER.schedule(() -> q.runNow(r), wait, TimeUnit.NANOSECONDS);
        return false;
      }
      r.run();
      return true;
    });
  }

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method,
      CallOptions options, Channel next) {
    SerialQueue out = new SerialQueue();
    SerialQueue in = new SerialQueue();
    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        Listener<R> delayed = new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(
            listener) {
          @Override
          public void onHeaders(Metadata h) {
            later(in, () -> super.onHeaders(h));
          }

          @Override
          public void onMessage(R message) {
            later(in, () -> super.onMessage(message));
          }

          @Override
          public void onClose(Status status, Metadata trailers) {
            later(in, () -> super.onClose(status, trailers));
          }

          @Override
          public void onReady() {
            later(in, super::onReady);
          }
        };
        later(out, () -> super.start(delayed, headers));
      }

      @Override
      public void request(int n) {
        later(out, () -> super.request(n));
      }

      @Override
      public void sendMessage(Q message) {
        later(out, () -> super.sendMessage(message));
      }

      @Override
      public void halfClose() {
        later(out, super::halfClose);
      }

      @Override
      public void cancel(String message, Throwable cause) {
        later(out, () -> super.cancel(message, cause));
      }
    };
  }

  /**
   * The events of one direction of one call, run in order: an event whose time has not come
   * parks the queue until the timer runs it.
   */
  private static final class SerialQueue {
    /** An event: true if it ran, false if it handed itself to the timer. */
    interface Event {
      boolean runOrPark();
    }

    private final java.util.ArrayDeque<Event> events = new java.util.ArrayDeque<>();
    private boolean parked;
    private boolean draining;

    synchronized void add(Event e) {
      events.add(e);
      if (!parked && !draining) {
        drain();
      }
    }

    /** The timer ran a parked event's action: go on with the next events. */
    void runNow(Runnable r) {
      r.run();
      synchronized (this) {
        parked = false;
        events.poll();
        drain();
      }
    }

    private void drain() {
      draining = true;
      try {
        Event e;
        while ((e = events.peek()) != null) {
          if (!e.runOrPark()) {
            parked = true;
            return;
          }
          events.poll();
        }
      } finally {
        draining = false;
      }
    }
  }
}
