package dev.dynembed.table.bench;

/**
 * The measuring loop every benchmark of this module uses: a step run over and over for the
 * warm-up seconds, then for the measured seconds, each run told its index (0, 1, ... across both
 * phases: the batch to take). What a benchmark counts besides time (CPU, bytes, cache hits) it
 * snapshots in {@code beforeMeasure}, between the phases.
 */
final class Timed {
  private Timed() {}

  interface Step {
    void run(int index) throws Exception;
  }

  /** The measured phase: steps run and seconds taken. */
  record Run(long steps, double seconds) {}

  static Run run(double warmupSeconds, double seconds, Step step, Runnable beforeMeasure)
      throws Exception {
    int i = 0;
    long end = System.nanoTime() + (long) (warmupSeconds * 1e9);
    while (System.nanoTime() < end) {
      step.run(i++);
    }
    beforeMeasure.run();
    long start = System.nanoTime();
    end = start + (long) (seconds * 1e9);
    long n = 0;
    long now;
    do {
      step.run(i++);
      n++;
      now = System.nanoTime();
    } while (now < end);
    return new Run(n, (now - start) / 1e9);
  }
}
