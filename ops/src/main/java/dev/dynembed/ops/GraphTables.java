package dev.dynembed.ops;

import com.google.common.collect.MapMaker;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableReads;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;
import org.nd4j.autodiff.functions.DifferentialFunction;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The table ops' state of one graph: which {@link EmbeddingTable} each op reads, and the training
 * step in progress ({@link TableStep}). Nothing of it is process-wide: two graphs, or two clients
 * whose tables share a name, never see each other's tables.
 *
 * <h2>Why it is attached to the graph</h2>
 *
 * Ops carry only plain properties: SameDiff builds a graph's gradient function from a FlatBuffers
 * clone, which cannot hold object references. So an op names its table by a <em>binding id</em>,
 * unique within its graph (the table's name, or {@code name#2} if another table object of the
 * same name is already bound), and finds the table through the graph it runs in. SameDiff M2.1
 * has no slot for such state, so it is attached to the graph object itself, weakly and by
 * identity; a gradient function (which M2.1 does not link back to its graph) is matched to the
 * graph whose function it is, once, when its session first runs a table op. An entry goes when
 * its graph does.
 *
 * <h2>Steps</h2>
 *
 * A graph trains on one thread at a time (SameDiff's training session is not thread-safe; the
 * asynchronous executor gives every thread its own graph), so the step in progress is one field.
 * {@code Trainer} opens a step with {@link #begin} and closes it with {@link #end}; it may also
 * {@link #plan} the next step's reads ahead (docs/design/0007-pipelined-steps.md). Ops run
 * outside a trainer's step (a direct {@code sd.output} or {@code sd.calculateGradients}) see a
 * detached step: reads and gradient writes go to the tables at once, with the settings of {@link
 * #setDetachedSettings} (by default the tables' own learning rates, step 0, and fresh draws on
 * every call).
 */
public final class GraphTables {
  private static final ConcurrentMap<SameDiff, GraphTables> GRAPHS =
      new MapMaker().weakKeys().makeMap();
  static final String HANDLE_PREFIX = "dynembed_handle_";

  private final SameDiff graph;
  private final Map<String, EmbeddingTable> bound = new LinkedHashMap<>();
  private final AtomicLong detachedCalls = new AtomicLong();
  private final AtomicLong plannedUsed = new AtomicLong();
  private final AtomicLong plannedUnused = new AtomicLong();
  private volatile TableStep current;
  private volatile TableStep detached = TableStep.detached(this, 0f, 0, 0, false);

  private GraphTables(SameDiff graph) {
    this.graph = graph;
  }

  /**
   * The state of {@code sd}'s graph. For a graph's own functions (its gradient function, built
   * lazily by SameDiff and not linked back to the graph in M2.1) it is the graph's state.
   */
  public static GraphTables of(SameDiff sd) {
    GraphTables g = GRAPHS.get(sd);
    if (g != null) {
      return g;
    }
    for (Map.Entry<SameDiff, GraphTables> e : GRAPHS.entrySet()) { // a function of a graph?
      SameDiff graph = e.getKey();
      for (String f : graph.definedFunctionNames()) {
        if (graph.getFunction(f) == sd) {
          GRAPHS.putIfAbsent(sd, e.getValue());
          return e.getValue();
        }
      }
    }
    return GRAPHS.computeIfAbsent(sd, GraphTables::new);
  }

  /**
   * Binds a table to this graph and returns its binding id. The same table object always gets
   * the same id.
   */
  synchronized String bind(EmbeddingTable table) {
    for (Map.Entry<String, EmbeddingTable> e : bound.entrySet()) {
      if (e.getValue() == table) {
        return e.getKey();
      }
    }
    String id = table.name();
    for (int k = 2; bound.containsKey(id); k++) {
      id = table.name() + "#" + k;
    }
    bound.put(id, table);
    return id;
  }

  /** Every binding of this graph, id to table, in binding order. */
  synchronized Map<String, EmbeddingTable> bindings() {
    return new LinkedHashMap<>(bound);
  }

  /**
   * Binds {@code table} under a given id: the id a loaded graph's ops name ({@link
   * ServableGraph}). Refused when the id is bound to another table.
   */
  synchronized void bindAs(String id, EmbeddingTable table) {
    EmbeddingTable old = bound.putIfAbsent(id, table);
    if (old != null && old != table) {
      throw new IllegalStateException("'" + id + "' is already bound to another table");
    }
  }

  /** The table bound under {@code id}. */
  synchronized EmbeddingTable table(String id) {
    EmbeddingTable t = bound.get(id);
    if (t == null) {
      throw new IllegalStateException("no embedding table is bound to this graph as '" + id
          + "'; build the graph's table ops through DynEmbed (bound tables: " + bound.keySet()
          + ")");
    }
    return t;
  }

  /** The binding id of {@code table}, or null if no op of this graph uses it. */
  synchronized String idOf(EmbeddingTable table) {
    for (Map.Entry<String, EmbeddingTable> e : bound.entrySet()) {
      if (e.getValue() == table) {
        return e.getKey();
      }
    }
    return null;
  }

  /** The tables this graph's ops use, in binding order. */
  public synchronized List<EmbeddingTable> tables() {
    return new ArrayList<>(bound.values());
  }

  /**
   * The name of the trainable scalar whose gradient path carries {@code table}'s backward pass in
   * this graph ({@link DynEmbed} creates it with the table's first op).
   *
   * @throws IllegalArgumentException if no op of this graph uses the table
   */
  public String handleName(EmbeddingTable table) {
    String id = idOf(table);
    if (id == null) {
      throw new IllegalArgumentException("the graph does not use table '" + table.name() + "'");
    }
    return HANDLE_PREFIX + id;
  }

  // ------------------------------------------------------------------ steps

  /**
   * Settings of the ops run outside a trainer's step. With {@code fixedDraws}, sampled candidates
   * are a function of (seed, step, stream), the same on every call (finite-difference checks
   * need that); otherwise every call draws afresh.
   *
   * @param learningRate 0 keeps each table's configured rate
   */
  public void setDetachedSettings(float learningRate, long step, int stream, boolean fixedDraws) {
    detached = TableStep.detached(this, learningRate, step, stream, fixedDraws);
  }

  /** A step of this graph (not yet begun): the trainer makes one per training step. */
  public TableStep newStep(long step, float learningRate, int stream) {
    return TableStep.trainer(this, step, learningRate, stream);
  }

  /**
   * Adds the table reads the graph's ops will make for {@code feeds} to {@code reads}, for
   * {@code step}; an op whose keys are not fed placeholders (computed in the graph) is not
   * planned and reads when it runs. The caller submits {@code reads}.
   *
   * @return how many ops were planned
   */
  public int plan(TableStep step, Map<String, INDArray> feeds, TableReads reads) {
    int planned = 0;
    for (DifferentialFunction f : graph.ops()) {
      if (f instanceof TableOp op && op.plan(this, step, feeds, reads)) {
        planned++;
      }
    }
    return planned;
  }

  /** Opens {@code step}: the graph's ops run in it until {@link #end}. */
  public void begin(TableStep step) {
    if (step.graph() != this) {
      throw new IllegalArgumentException("the step belongs to another graph");
    }
    if (current != null) {
      throw new IllegalStateException("a step of this graph is already running (a graph trains"
          + " on one thread at a time)");
    }
    current = step;
  }

  /** Closes the step opened by {@link #begin}. */
  public void end(TableStep step) {
    if (current == step) {
      current = null;
    }
  }

  /** The step the graph's ops run in now. */
  TableStep step() {
    TableStep s = current;
    return s != null ? s : detached;
  }

  /** Counts an op's run that used reads planned ahead ({@code used}) or read itself. */
  void countPlanned(boolean used) {
    (used ? plannedUsed : plannedUnused).incrementAndGet();
  }

  /**
   * Table-reading op runs that used reads planned ahead of their step, and those that read when
   * they ran (not planned, or planned for other inputs): how much of the traffic a pipelined
   * trainer actually overlapped.
   */
  public long[] plannedReadCounts() {
    return new long[] {plannedUsed.get(), plannedUnused.get()};
  }

  /** A fresh draw stream for a detached call without fixed draws. */
  long nextDetachedCall() {
    return detachedCalls.getAndIncrement();
  }
}
