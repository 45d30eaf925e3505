package dev.dynembed.layers;

import dev.dynembed.ops.GraphTables;
import dev.dynembed.ops.StepArrays;
import dev.dynembed.ops.TableStep;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableReads;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.samediff.VariableType;
import org.nd4j.autodiff.samediff.api.OutAndGrad;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.GradientUpdater;
import org.nd4j.linalg.learning.config.IUpdater;

/**
 * Synchronous training steps of a SameDiff graph that uses embedding tables: one forward and
 * backward per step; the dense variables are updated here by an ND4J updater (Adam, SGD, ...),
 * the table rows by each table's own optimizer during the backward pass.
 *
 * <p>Not thread-safe: one trainer per thread (the asynchronous executor gives each thread its
 * own). Checkpoints ({@link #save}, {@link #restore}) hold the dense variables, the updater state
 * and every table under one step id; {@code save} runs between steps, with no gradient in flight.
 *
 * <h2>Table traffic of a step</h2>
 *
 * The reads of a step's table ops go out together (one {@code Read} call per shard for all of
 * them) and its gradients too (one {@code Write} call per shard, once the graph has run). With
 * {@link #setPipelining pipelining} on (docs/design/0007-pipelined-steps.md), {@link #step(Map,
 * float, List, Map, float)} sends the <em>next</em> step's reads before computing the current
 * one, and does not wait for the current step's gradients to be applied: at most one step's
 * reads are in flight ahead, and one step's gradients behind. The next step's reads are sent
 * once the previous step's gradients are applied, so they miss exactly the current step's
 * updates; those are replayed on the rows read (the table's own optimizer, from the optimizer
 * state the reads bring along: read my writes), so a step sees all of its own trainer's updates
 * and may miss only other trainers' (the Hogwild relaxation). With pipelining off (the
 * default), every step reads after the previous step's gradients were applied; a single-thread
 * run is reproducible bit for bit either way in process, and with pipelining off on shards.
 */
public final class Trainer {
  /** Told after every step. */
  public interface Listener {
    void onStep(long step, double loss);

    /** Also told after every step: the loss and every fetched variable (means). */
    default void onFetched(long step, Map<String, Double> fetched) {}
  }


  private final SameDiff sd;
  private final String lossName;
  private final List<EmbeddingTable> tables;
  private final List<String> dense = new ArrayList<>();
  private final Map<String, INDArray> updaterState = new LinkedHashMap<>();
  private final Map<String, GradientUpdater> updaters = new LinkedHashMap<>();
  private final List<String> gradientNames = new ArrayList<>();
  private final List<Listener> listeners = new CopyOnWriteArrayList<>();
  private final List<org.nd4j.autodiff.listeners.Listener> sameDiffListeners =
      new CopyOnWriteArrayList<>();
  private int epoch;
  private long step;
  private int stream;
  private final GraphTables graphTables;
  private boolean pipelining;
  /** The next step, its reads in flight (pipelining), and the feeds they were planned from. */
  private TableStep planned;
  private Map<String, INDArray> plannedFeeds;
  /** Completes when the planned step's reads are answered. */
  private CompletableFuture<Void> plannedReadsDone;
  /** The last step's gradients, in flight (pipelining). */
  private CompletableFuture<Void> pendingWrites = CompletableFuture.completedFuture(null);

  /**
   * @param lossName the graph's scalar loss variable
   * @param updater ND4J updater for every dense variable
   * @param tables every table the graph reads (their handles carry the backward pass)
   */
  public Trainer(SameDiff sd, String lossName, IUpdater updater, List<EmbeddingTable> tables) {
    this.sd = sd;
    this.lossName = lossName;
    this.tables = List.copyOf(tables);
    if (!sd.hasVariable(lossName)) {
      throw new IllegalArgumentException("the graph has no loss variable '" + lossName + "'");
    }
    // the gradient is of this loss alone: SameDiff would otherwise take every scalar leaf of the
    // graph as a loss (a reported per-example mean, say) and differentiate their sum
    sd.setLossVariables(lossName);
    this.graphTables = GraphTables.of(sd);
    List<String> handles = new ArrayList<>();
    for (EmbeddingTable t : tables) {
      String h = graphTables.handleName(t); // IllegalArgumentException if the graph lacks it
      if (!sd.hasVariable(h)) {
        throw new IllegalArgumentException("the graph does not use table '" + t.name() + "'");
      }
      handles.add(h);
    }
    for (SDVariable v : sd.variables()) {
      if (v.getVariableType() == VariableType.VARIABLE && !handles.contains(v.name())) {
        dense.add(v.name());
        INDArray param = v.getArr();
        long size = updater.stateSize(param.length());
        INDArray state = size > 0 ? Nd4j.zeros(param.dataType(), 1, size) : null;
        updaterState.put(v.name(), state);
        updaters.put(v.name(), updater.instantiate(state, true));
      }
    }
    gradientNames.addAll(dense);
    gradientNames.addAll(handles);
  }

  /**
   * Pipelined steps (default off): each step sends the next step's table reads before it
   * computes and leaves its gradients in flight while the next step runs (see the class
   * documentation for the staleness bound).
   */
  public Trainer setPipelining(boolean on) {
    this.pipelining = on;
    return this;
  }

  public boolean pipelining() {
    return pipelining;
  }

  /** Sets the sampling stream (the executor gives each thread its own). */
  public void setStream(int stream) {
    this.stream = stream;
  }

  /** The graph this trainer runs. */
  public SameDiff graph() {
    return sd;
  }

  public void addListener(Listener l) {
    listeners.add(l);
  }

  /**
   * Adds one of SameDiff's own listeners ({@code ScoreListener}, a {@code BaseListener}
   * subclass, ...). Each step it gets {@code iterationStart}, {@code preUpdate} for every dense
   * variable updated, and {@code iterationDone} with the loss, with {@code At} holding the epoch
   * ({@link #setEpoch}), the step and the thread's stream.
   */
  public void addListener(org.nd4j.autodiff.listeners.Listener l) {
    sameDiffListeners.add(l);
  }

  /** The epoch reported to SameDiff listeners. */
  public void setEpoch(int epoch) {
    this.epoch = epoch;
  }

  /** Steps taken (restored by {@link #restore}). */
  public long step() {
    return step;
  }

  /** Names of the dense variables this trainer updates. */
  public List<String> denseVariables() {
    return List.copyOf(dense);
  }

  /**
   * One step: forward, backward (table rows updated by their optimizers), dense update.
   *
   * @param tableLearningRate rate for every table's optimizer in this step; 0 = each table's own
   * @return the loss before the update
   */
  public double step(Map<String, INDArray> feeds, float tableLearningRate) {
    return step(feeds, tableLearningRate, List.of()).get(lossName);
  }

  /**
   * One step, also fetching scalar variables of the graph (their mean, for non-scalars).
   *
   * @return the loss (under the loss name) and every fetched variable, before the update
   */
  public Map<String, Double> step(Map<String, INDArray> feeds, float tableLearningRate,
      List<String> fetch) {
    return step(feeds, tableLearningRate, fetch, null, 0f);
  }

  /**
   * One step that, with pipelining on, also sends the table reads of the next step (the one for
   * {@code nextFeeds}) before computing this one. The next call must then pass exactly {@code
   * nextFeeds} (the same map) to use those reads; a step called with other feeds reads afresh.
   *
   * @param nextFeeds the next step's feeds, or null when not known (ignored without pipelining)
   * @param nextTableLearningRate the next step's table learning rate
   */
  public Map<String, Double> step(Map<String, INDArray> feeds, float tableLearningRate,
      List<String> fetch, Map<String, INDArray> nextFeeds, float nextTableLearningRate) {
    long s = ++step;
    TableStep ts = planned != null && plannedFeeds == feeds && planned.step() == s
        && planned.learningRate() == tableLearningRate ? planned : null;
    CompletableFuture<Void> currentReads = ts != null ? plannedReadsDone : DONE;
    planned = null;
    plannedFeeds = null;
    plannedReadsDone = null;
    boolean ahead = pipelining && nextFeeds != null;
    if (ts == null) {
      ts = graphTables.newStep(s, tableLearningRate, stream);
      // reads its ops make themselves wait for the gradients still in flight
      ts.plannedAfter(null, pendingWrites);
      if (ahead) { // this step's reads go first, so that the next step's come after them
        currentReads = sendAfter(pendingWrites, ts, feeds);
      }
    }
    CompletableFuture<Void> nextReadsDone = null;
    if (ahead) {
      // The next step's reads go out as soon as the previous step's gradients are applied (not
      // when they are sent: gRPC does not order separate calls, so a read could overtake them)
      // and this step's reads are answered, while this step computes. They miss this step's
      // updates only, which the next step's ops replay on the rows they read (read my writes).
      TableStep next = graphTables.newStep(s + 1, nextTableLearningRate, stream);
      nextReadsDone = sendAfter(CompletableFuture.allOf(pendingWrites, currentReads), next,
          nextFeeds);
      if (nextReadsDone != null) {
        planned = next;
        plannedFeeds = nextFeeds;
        plannedReadsDone = nextReadsDone;
      }
    }
    List<String> outputs = new ArrayList<>(fetch);
    if (!outputs.contains(lossName)) {
      outputs.add(lossName);
    }
    org.nd4j.autodiff.listeners.At at = new org.nd4j.autodiff.listeners.At(epoch, (int) s, stream,
        Thread.currentThread().getId(), null, org.nd4j.autodiff.listeners.Operation.TRAINING);
    for (org.nd4j.autodiff.listeners.Listener l : sameDiffListeners) {
      if (l.isActive(at.operation())) {
        l.iterationStart(sd, at, null, 0);
      }
    }
    // the step's arrays are recycled for the next step once the loss is read and the dense
    // updates applied (StepArrays)
    StepArrays.begin();
    try {
      OutAndGrad r;
      graphTables.begin(ts);
      try {
        r = sd.calculateGradientsAndOutputs(feeds, outputs, gradientNames);
      } finally {
        graphTables.end(ts);
      }
      // The step's gradients of every table: one call per shard. With pipelining they go once
      // the next step's reads are answered (so that those miss exactly these updates, which the
      // next step replays), the previous step's must be applied (one step in flight), and these
      // are not awaited.
      if (nextReadsDone != null) {
        nextReadsDone.join();
      }
      CompletableFuture<Void> writes = ts.submitWrites();
      if (pipelining) {
        TableReads.join(pendingWrites);
        pendingWrites = writes;
        if (planned != null) {
          planned.plannedAfter(ts, writes);
        }
      } else {
        TableReads.join(writes);
      }
      ts.release();
      for (String name : dense) {
        INDArray g = r.getGradients().get(name);
        if (g == null) {
          continue; // not on this step's path
        }
        GradientUpdater u = updaters.get(name);
        u.applyUpdater(g, (int) (s - 1), 0); // turns the gradient into the update, in place
        for (org.nd4j.autodiff.listeners.Listener l : sameDiffListeners) {
          if (l.isActive(at.operation())) {
            l.preUpdate(sd, at, sd.getVariables().get(name), g);
          }
        }
        sd.getVariable(name).getArr().subi(g);
      }
      Map<String, Double> fetched = new LinkedHashMap<>();
      for (String name : outputs) {
        fetched.put(name, r.getOutputs().get(name).meanNumber().doubleValue());
      }
      double loss = fetched.get(lossName);
      for (Listener l : listeners) {
        l.onStep(s, loss);
        l.onFetched(s, fetched);
      }
      if (!sameDiffListeners.isEmpty()) {
        org.nd4j.autodiff.listeners.Loss lossValue =
            new org.nd4j.autodiff.listeners.Loss(List.of(lossName), new double[] {loss});
        for (org.nd4j.autodiff.listeners.Listener l : sameDiffListeners) {
          if (l.isActive(at.operation())) {
            l.iterationDone(sd, at, null, lossValue);
          }
        }
      }
      return fetched;
    } finally {
      StepArrays.end();
    }
  }

  private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

  /**
   * Plans the reads of {@code step}'s ops for {@code feeds} and sends them once {@code after} has
   * completed (whatever its outcome: a failure shows where it is awaited).
   *
   * @return completes when the reads are answered (or failed); null when nothing was planned
   */
  private CompletableFuture<Void> sendAfter(CompletableFuture<?> after, TableStep step,
      Map<String, INDArray> feeds) {
    TableReads reads = new TableReads();
    int ops;
    try {
      ops = graphTables.plan(step, feeds, reads);
    } catch (RuntimeException e) {
      return null; // bad feeds: the step reports it when it runs (its ops read themselves)
    }
    if (ops == 0) {
      return null;
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    after.whenComplete((v, failure) -> reads.submit().whenComplete((r, e) -> done.complete(null)));
    return done;
  }

  /**
   * Waits until the gradients of every step taken are applied (pipelining leaves the last step's
   * in flight); a failure of those writes is thrown here. Reads planned for a next step are kept.
   */
  public void flush() {
    CompletableFuture<Void> w = pendingWrites;
    pendingWrites = CompletableFuture.completedFuture(null);
    TableReads.join(w);
  }

  /**
   * Writes dense variables, updater state and every table as a new checkpoint under {@code dir};
   * a crash at any moment leaves the previous or the new one readable, never neither (the last 2
   * are kept; layout and steps: {@code TrainingCheckpoint}). Table checkpoints go to {@code
   * dir/ckpt-N/tables}, which every shard must see.
   */
  public void save(Path dir) {
    save(dir, Map.of());
  }

  /**
   * As {@link #save(Path)}, also storing {@code extra} (e.g. a data reader's position) in the
   * manifest, so that it is replaced atomically with the rest; {@link #restore} returns it.
   */
  public void save(Path dir, Map<String, String> extra) {
    flush();
    TrainingCheckpoint.write(dir, step, sd, dense, updaterState, tables, extra);
  }

  /**
   * Brings back everything {@link #save} wrote; training continues as if never stopped.
   *
   * @return the extra entries given to {@link #save(Path, Map)}
   */
  public Map<String, String> restore(Path dir) {
    Path src = latest(dir);
    Properties m = TrainingCheckpoint.readManifest(src);
    flush();
    planned = null; // reads made before the restore would be of the old rows
    plannedFeeds = null;
    plannedReadsDone = null;
    step = TrainingCheckpoint.read(src, m, sd, dense, updaterState, tables);
    return TrainingCheckpoint.extras(m);
  }

  /**
   * A warm start (continual training, docs/design/0024-vectors-in.md): the dense variables' values
   * and every table (rows, optimizer slots, counts) of the checkpoint in {@code dir}, as {@link
   * #restore} brings them back, while this trainer's step count and its dense updater's state stay
   * a new run's. The graph must have the checkpoint's dense variables and tables (names, shapes,
   * dims); refused with a message naming what differs otherwise.
   *
   * @return the extra entries given to {@link #save(Path, Map)}
   */
  public Map<String, String> initFrom(Path dir) {
    Path src = latest(dir);
    Properties m = TrainingCheckpoint.readManifest(src);
    flush();
    planned = null;
    plannedFeeds = null;
    plannedReadsDone = null;
    TrainingCheckpoint.read(src, m, sd, dense, Map.of(), tables); // no updater state
    return TrainingCheckpoint.extras(m);
  }

  /**
   * The extra entries given to {@link #save(Path, Map)} of the checkpoint in {@code dir}, without
   * restoring anything (to check a checkpoint before restoring it).
   */
  public static Map<String, String> readExtras(Path dir) {
    return TrainingCheckpoint.extras(TrainingCheckpoint.readManifest(latest(dir)));
  }

  /** Whether {@code dir} holds a complete checkpoint written by {@link #save}. */
  public static boolean hasCheckpoint(Path dir) {
    return TrainingCheckpoint.latest(dir) != null;
  }

  /**
   * The directory of the latest complete checkpoint under {@code dir} (its {@code tables/} holds
   * the tables' checkpoints); a clear error if there is none.
   */
  public static Path latest(Path dir) {
    Path src = TrainingCheckpoint.latest(dir);
    if (src == null) {
      throw new UncheckedIOException(new java.io.IOException("no training checkpoint in "
          + dir.toAbsolutePath().normalize() + " (no CURRENT, no MANIFEST.properties)"));
    }
    return src;
  }
}
