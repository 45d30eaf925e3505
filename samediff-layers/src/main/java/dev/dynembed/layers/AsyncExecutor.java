package dev.dynembed.layers;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.DoubleAdder;
import java.util.function.IntFunction;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Hogwild-style asynchronous training from files (the design of Paddle's AsyncExecutor): N
 * threads take files from a shared list, each thread trains on its own batches with its own graph
 * and {@link Trainer}. Dense parameters are <em>shared</em>: every thread's graph uses the same
 * arrays as thread 0's, updated in place without locks (Recht et al. 2011); each thread keeps its
 * own updater state. Sparse parameters live in the tables, which are thread-safe. Sampling streams
 * differ per thread.
 */
public final class AsyncExecutor {
  /** Reads one file as a sequence of batches (placeholder name to array). */
  public interface BatchReader {
    Iterable<Map<String, INDArray>> read(Path file);
  }

  /** Reads one unit of work (a file, a byte range of a file, ...) as a sequence of batches. */
  public interface WorkReader<T> {
    Iterable<Map<String, INDArray>> read(T item);
  }

  /** The outcome of one {@link #runFromFiles} call. */
  public record RunResult(Map<String, Double> averages, long steps, double seconds) {}

  private final List<Trainer> trainers = new ArrayList<>();
  private int prefetch = 2;

  /**
   * Pipelined steps on every thread (default off; see {@link Trainer#setPipelining}): while a
   * thread computes a step, the table reads of its next batch (when that batch is already
   * prepared) are in flight, and the step's gradients are applied while the next step runs.
   */
  public AsyncExecutor setPipelining(boolean on) {
    for (Trainer t : trainers) {
      t.setPipelining(on);
    }
    return this;
  }

  /**
   * Batches each training thread has prepared ahead (default 2; 0 = read on the training thread).
   * A producer thread per training thread runs the reader: its work (parsing, and any table calls
   * it makes, such as word2vec's counting) overlaps the current step's compute and table calls.
   * The learning rate of a batch is taken when the batch is produced, so a run's rates do not
   * depend on thread timing.
   */
  public AsyncExecutor setPrefetch(int batches) {
    if (batches < 0 || batches > 64) {
      throw new IllegalArgumentException("prefetch must be in 0..64 but was " + batches);
    }
    this.prefetch = batches;
    return this;
  }

  /** A produced batch and its learning rate; a failure, or the end, of a producer. */
  private record Item(Map<String, INDArray> batch, float rate, RuntimeException error) {
    static final Item END = new Item(null, 0f, null);
  }

  /**
   * @param trainerFactory builds the graph and trainer of thread i (called once per thread, here)
   * @param threads how many trainers to build
   */
  public AsyncExecutor(IntFunction<Trainer> trainerFactory, int threads) {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1 but was " + threads);
    }
    for (int i = 0; i < threads; i++) {
      Trainer t = trainerFactory.apply(i);
      t.setStream(i);
      trainers.add(t);
    }
    SameDiff first = trainers.get(0).graph();
    for (Trainer t : trainers.subList(1, threads)) {
      if (!t.denseVariables().equals(trainers.get(0).denseVariables())) {
        throw new IllegalArgumentException("every thread's graph must have the same dense"
            + " variables; got " + t.denseVariables() + " and " + trainers.get(0).denseVariables());
      }
      // Hogwild: every graph reads and updates thread 0's arrays. (Setting one variable's array
      // copies it in ND4J M2.1; sharing the graph's variable-array holder shares the buffers.)
      t.graph().setVariablesArrays(first.getVariablesArrays());
    }
  }

  /** Trainer of thread i (e.g. to save a checkpoint after a run). */
  public Trainer trainer(int i) {
    return trainers.get(i);
  }

  /**
   * Trains on every batch of every file once, with up to {@code threads} threads.
   *
   * @param fetchVariables scalars to average over all steps of the run (the loss is always fetched)
   * @param tableLearningRate passed to every step (0 = each table's own rate)
   */
  public RunResult runFromFiles(List<Path> files, int threads, BatchReader reader,
      List<String> fetchVariables, float tableLearningRate) {
    return run(files, threads, reader::read, fetchVariables, () -> tableLearningRate);
  }

  /**
   * Trains on every batch of every work item once, with up to {@code threads} threads; items are
   * handed out in list order to whichever thread is free.
   *
   * @param tableLearningRate asked before every step (a decaying schedule; 0 = each table's own)
   */
  public <T> RunResult run(List<T> work, int threads, WorkReader<T> reader,
      List<String> fetchVariables, java.util.function.DoubleSupplier tableLearningRate) {
    if (threads < 1 || threads > trainers.size()) {
      throw new IllegalArgumentException("threads must be in [1, " + trainers.size()
          + "] but was " + threads);
    }
    ConcurrentLinkedQueue<T> queue = new ConcurrentLinkedQueue<>(work);
    Map<String, DoubleAdder> sums = new ConcurrentHashMap<>();
    AtomicLong steps = new AtomicLong();
    long start = System.nanoTime();
    ExecutorService pool = Executors.newFixedThreadPool(prefetch > 0 ? 2 * threads : threads);
    java.util.concurrent.atomic.AtomicBoolean failed = new java.util.concurrent.atomic.AtomicBoolean();
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        Trainer trainer = trainers.get(i);
        if (prefetch == 0) {
          done.add(pool.submit(() -> { // the reader runs on the training thread
            java.util.Iterator<Map<String, INDArray>> batches = new java.util.Iterator<>() {
              private java.util.Iterator<Map<String, INDArray>> current =
                  java.util.Collections.emptyIterator();

              @Override
              public boolean hasNext() {
                T item;
                while (!current.hasNext() && (item = queue.poll()) != null) {
                  current = reader.read(item).iterator();
                }
                return current.hasNext();
              }

              @Override
              public Map<String, INDArray> next() {
                return current.next();
              }
            };
            if (!batches.hasNext()) {
              return null;
            }
            Item cur = new Item(batches.next(), (float) tableLearningRate.getAsDouble(), null);
            while (cur != null) {
              Item next = !trainer.pipelining() || !batches.hasNext() ? null
                  : new Item(batches.next(), (float) tableLearningRate.getAsDouble(), null);
              step(trainer, cur, next, fetchVariables, sums, steps);
              cur = next != null ? next : batches.hasNext()
                  ? new Item(batches.next(), (float) tableLearningRate.getAsDouble(), null)
                  : null;
            }
            trainer.flush();
            return null;
          }));
          continue;
        }
        java.util.concurrent.BlockingQueue<Item> ahead =
            new java.util.concurrent.ArrayBlockingQueue<>(prefetch);
        pool.submit(() -> { // producer: reads work items into batches, prefetch ahead
          try {
            T item;
            while (!failed.get() && (item = queue.poll()) != null) {
              for (Map<String, INDArray> batch : reader.read(item)) {
                ahead.put(new Item(batch, (float) tableLearningRate.getAsDouble(), null));
                if (failed.get()) {
                  break;
                }
              }
            }
            ahead.put(Item.END);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } catch (RuntimeException e) {
            try {
              ahead.put(new Item(null, 0f, e));
            } catch (InterruptedException ie) {
              Thread.currentThread().interrupt();
            }
          }
          return null;
        });
        done.add(pool.submit(() -> { // consumer: trains on the prepared batches
          try {
            Item cur = ahead.take();
            while (true) {
              if (cur.error() != null) {
                throw cur.error();
              }
              if (cur == Item.END) {
                trainer.flush();
                return null;
              }
              // the next batch, if already prepared: its reads overlap this step (pipelining)
              Item next = trainer.pipelining() ? ahead.poll() : null;
              step(trainer, cur, next == null || next.batch() == null ? null : next,
                  fetchVariables, sums, steps);
              cur = next != null ? next : ahead.take();
            }
          } catch (RuntimeException e) {
            failed.set(true);
            ahead.clear(); // unblock the producer
            throw e;
          }
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException re) {
        throw re; // the reader's or the step's own error, with its message
      }
      throw new IllegalStateException("a training thread failed: " + e.getCause(), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } finally {
      pool.shutdownNow();
    }
    Map<String, Double> averages = new LinkedHashMap<>();
    long n = steps.get();
    sums.forEach((k, v) -> averages.put(k, n == 0 ? Double.NaN : v.sum() / n));
    return new RunResult(averages, n, (System.nanoTime() - start) / 1e9);
  }

  /**
   * One training step; its fetched values go into the run's sums. {@code next}, when known, is
   * the batch this trainer takes next (its reads are sent during this step if pipelining).
   */
  private static void step(Trainer trainer, Item cur, Item next, List<String> fetch,
      Map<String, DoubleAdder> sums, AtomicLong steps) {
    Map<String, Double> f = next == null ? trainer.step(cur.batch(), cur.rate(), fetch)
        : trainer.step(cur.batch(), cur.rate(), fetch, next.batch(), next.rate());
    f.forEach((k, v) -> sums.computeIfAbsent(k, x -> new DoubleAdder()).add(v));
    steps.incrementAndGet();
  }
}
