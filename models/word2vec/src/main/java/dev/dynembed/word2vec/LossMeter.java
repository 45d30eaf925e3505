package dev.dynembed.word2vec;

import dev.dynembed.layers.Trainer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.DoubleAdder;

/**
 * The loss curve: the trainers' per-step losses (fetched {@code loss_per_pair}) averaged over
 * each sampling interval, as (words trained, loss) points.
 */
final class LossMeter implements Trainer.Listener {
  private final DoubleAdder sum = new DoubleAdder();
  private final AtomicLong steps = new AtomicLong();
  private final List<double[]> curve;
  private volatile double last;

  LossMeter(List<double[]> resumed) {
    this.curve = new ArrayList<>(resumed);
    this.last = curve.isEmpty() ? Double.NaN : curve.get(curve.size() - 1)[1];
  }

  @Override
  public void onStep(long step, double loss) {}

  @Override
  public void onFetched(long step, Map<String, Double> fetched) {
    sum.add(fetched.get("loss_per_pair"));
    steps.incrementAndGet();
  }

  /** Closes an interval: its mean loss becomes a point of the curve (none without steps). */
  synchronized void sample(long words) {
    long n = steps.getAndSet(0);
    double total = sum.sumThenReset();
    if (n > 0) {
      last = total / n;
      curve.add(new double[] {words, last});
    }
  }

  /** The mean loss of the last interval with steps (NaN before the first). */
  double last() {
    return last;
  }

  synchronized List<double[]> curve() {
    return new ArrayList<>(curve);
  }
}
