package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableReads;
import dev.dynembed.table.client.TableWrites;
import dev.dynembed.table.common.KeyBags;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * One step of one graph, as its table ops see it: the step's learning rate, number and sampling
 * stream; the state each op's forward leaves for its backward; the reads planned for it ahead
 * ({@link GraphTables#plan}); and the gradient rows its backward ops produce, which a trainer's
 * step sends together when the graph has run ({@link #submitWrites}: one {@code Write} call per
 * shard for every table of the step).
 *
 * <p>A detached step (ops run outside a trainer) applies each op's gradients at once, as it
 * produces them, and keeps only the forward state between an op's forward and its backward.
 * Not thread-safe: a step runs on one thread.
 */
public final class TableStep {
  private final GraphTables graph;
  private final long step;
  private final float learningRate;
  private final int stream;
  private final boolean trainer;
  private final boolean fixedDraws;
  private final Map<String, Object> forward = new HashMap<>();
  private final Map<String, Object> planned = new HashMap<>();
  private TableWrites writes;
  /** The batches this step sent, for the next step's replay (trainer steps only). */
  private final OwnUpdates sent = new OwnUpdates();
  /** The step whose gradients this step's planned reads miss (null: none). */
  private TableStep previous;
  /** What a read made by an op itself must wait for to see every earlier update. */
  private CompletableFuture<?> freshAfter = CompletableFuture.completedFuture(null);

  private TableStep(GraphTables graph, long step, float learningRate, int stream, boolean trainer,
      boolean fixedDraws) {
    this.graph = graph;
    this.step = step;
    this.learningRate = learningRate;
    this.stream = stream;
    this.trainer = trainer;
    this.fixedDraws = fixedDraws;
  }

  static TableStep trainer(GraphTables g, long step, float learningRate, int stream) {
    return new TableStep(g, step, learningRate, stream, true, true);
  }

  static TableStep detached(GraphTables g, float learningRate, long step, int stream,
      boolean fixedDraws) {
    return new TableStep(g, step, learningRate, stream, false, fixedDraws);
  }

  GraphTables graph() {
    return graph;
  }

  /** The step number: recorded as the rows' last-update step, and seeds the draws. */
  public long step() {
    return step;
  }

  /** The tables' learning rate in this step; 0 keeps each table's own. */
  public float learningRate() {
    return learningRate;
  }

  /** The sampling stream (the executor's thread index). */
  public int stream() {
    return stream;
  }

  /**
   * The seed of an op's draws in this step: a function of (op seed, step, stream), so a resumed
   * run draws what the original drew and threads draw differently; a detached step without fixed
   * draws draws afresh on every call.
   */
  long drawSeed(long opSeed) {
    if (!fixedDraws) {
      return opSeed + graph.nextDetachedCall();
    }
    return opSeed + 0x9E3779B97F4A7C15L * (step + 1) + 0xC2B2AE3D27D4EB4FL * stream;
  }

  // ------------------------------------------------------------------ forward to backward

  /** Keeps what an op's forward computed for its backward in this step. */
  void putForward(String op, Object state) {
    forward.put(op, state);
  }

  /** Takes (and forgets) what the forward of {@code op} kept. */
  <T> T takeForward(String op, Class<T> type) {
    Object s = forward.remove(op);
    if (s == null) {
      throw new IllegalStateException("the backward of " + op + " ran without its forward in"
          + " this step");
    }
    return type.cast(s);
  }

  /**
   * Publishes the curvature of each row of {@code variable} (an op's activations) for the
   * backward of the op that produced it ({@link ImplicitSteps}).
   */
  void putCurvature(String variable, ImplicitSteps.RowCurvature perRow) {
    forward.put("curvature\u0000" + variable, perRow);
  }

  /** Takes the curvature published for {@code variable} in this step, or null. */
  ImplicitSteps.RowCurvature takeCurvature(String variable) {
    return (ImplicitSteps.RowCurvature) forward.remove("curvature\u0000" + variable);
  }

  // ------------------------------------------------------------------ pipelining

  /**
   * Marks this step as planned ahead of {@code previous}: its planned reads were made before
   * {@code previous}'s gradients were applied, so the ops replay those gradients on the rows
   * ({@link #replayPrevious}), and a read an op makes itself waits for them ({@code
   * previousWrites}) first.
   */
  public void plannedAfter(TableStep previous, CompletableFuture<?> previousWrites) {
    this.previous = previous;
    this.freshAfter = previousWrites;
  }

  /** Reads of this step made ahead need the optimizer state of their rows for the replay. */
  boolean wantsState() {
    return trainer;
  }

  /**
   * Replays the previous step's own gradients of {@code table} on rows read ahead (see {@link
   * OwnUpdates#replay}); nothing when this step was not planned after another.
   */
  void replayPrevious(EmbeddingTable table, String[] keys, boolean[] found, float[] rows,
      float[] slots, long[] counts) {
    if (previous != null && !previous.sent.isEmpty()) {
      previous.sent.replay(table, keys, found, rows, slots, counts);
    }
  }

  /** Forgets the previous step once this one has run (steps would otherwise chain up). */
  public void release() {
    previous = null;
    freshAfter = CompletableFuture.completedFuture(null);
    planned.clear();
    forward.clear();
  }

  /** Waits until a read made now sees every earlier update of this trainer. */
  void awaitFreshReads() {
    TableReads.join(freshAfter);
  }

  // ------------------------------------------------------------------ planned reads

  /** Records the reads planned for op {@code op} (see {@link GraphTables#plan}). */
  void putPlanned(String op, Object reads) {
    planned.put(op, reads);
  }

  /** The reads planned for {@code op}, taken (null if none were planned). */
  <T> T takePlanned(String op, Class<T> type) {
    Object p = planned.remove(op);
    return p == null ? null : type.cast(p);
  }

  /** Whether reads were planned for this step. */
  public boolean hasPlannedReads() {
    return !planned.isEmpty();
  }

  // ------------------------------------------------------------------ gradient writes

  /**
   * Sends gradient rows to a table: in a trainer's step they are kept for {@link #submitWrites};
   * in a detached step they are applied now.
   */
  void applyGradients(EmbeddingTable table, String[] keys, float[] gradients) {
    if (!trainer) {
      table.applyGradients(keys, gradients, learningRate, step);
      return;
    }
    if (writes == null) {
      writes = new TableWrites();
    }
    writes.applyGradients(table, keys, gradients, learningRate, step);
    sent.add(table, keys, gradients, learningRate);
  }

  /**
   * Sends the gradient of a pooled lookup (one row per bag) to a table, as {@link
   * #applyGradients} does; a trainer also keeps the per-key gradients the shards will apply, for
   * the next step's replay.
   */
  void applyPooledGradients(EmbeddingTable table, String[] keys, KeyBags bags,
      float[] bagGradients) {
    if (!trainer) {
      table.applyPooledGradients(keys, bags, bagGradients, learningRate, step);
      return;
    }
    if (writes == null) {
      writes = new TableWrites();
    }
    writes.applyPooledGradients(table, keys, bags, bagGradients, learningRate, step);
    sent.add(table, keys, bags.spread(bagGradients, keys.length, table.dim()), learningRate);
  }

  /**
   * Sends every gradient batch of the step: one call per shard for all its tables. The future
   * completes when every shard has applied its part (at once when there was nothing to send).
   */
  public CompletableFuture<Void> submitWrites() {
    TableWrites w = writes;
    writes = null;
    return w == null || w.isEmpty() ? CompletableFuture.completedFuture(null) : w.submit();
  }

  /** A fresh batch of reads for this step's ops (a read that was not planned ahead). */
  static TableReads reads() {
    return new TableReads();
  }
}
