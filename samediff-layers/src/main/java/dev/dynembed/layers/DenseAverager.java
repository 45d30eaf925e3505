package dev.dynembed.layers;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.TableConfigs;
import java.util.ArrayList;
import java.util.List;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Model averaging of a trainer's dense variables over the W workers of a job, through the table
 * service itself (docs/design/0013-many-trainers.md): the average lives in a table of the shards,
 * one row per chunk of {@value #CHUNK} values (key {@code variable#chunk}), with plain SGD.
 *
 * <p>A sync is {@link #push} on every worker, a barrier, then {@link #pull} on every worker: each
 * worker sends {@code -(w_local - w_last) / W} as its gradient at rate 1, so the row becomes
 * {@code w_last + mean(w_local - w_last) = mean(w_local)}, which every worker then reads into its
 * variables (in place: the threads of a process share them). At the start the leader {@link
 * #publish}es its values and the others pull them, so all start from one point. No server call
 * beyond find and applyGradients is needed.
 */
public final class DenseAverager {
  /** Values per table row. */
  public static final int CHUNK = 256;

  private final EmbeddingTable table;
  private final Trainer trainer;
  private final int workers;
  private final List<String> variables;
  private final String[] keys;
  /** Where each variable starts in the flattened values: its chunks are zero-padded. */
  private final int[] offsets;
  /** The values of the last pull (or publish), flattened over the variables in order. */
  private float[] last;

  /**
   * @param tableName the averages' table (created with SGD and zero rows, or opened)
   * @param workers W, the job's workers
   */
  public DenseAverager(TableClient client, String tableName, Trainer trainer, int workers) {
    if (workers < 1) {
      throw new IllegalArgumentException("workers must be >= 1 but was " + workers);
    }
    this.trainer = trainer;
    this.workers = workers;
    this.variables = trainer.denseVariables();
    this.table = client.createTable(TableConfigs.builder(tableName, CHUNK)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
    List<String> k = new ArrayList<>();
    this.offsets = new int[variables.size()];
    for (int i = 0; i < variables.size(); i++) {
      offsets[i] = k.size() * CHUNK;
      long n = trainer.graph().getVariable(variables.get(i)).getArr().length();
      for (long c = 0; c < (n + CHUNK - 1) / CHUNK; c++) {
        k.add(variables.get(i) + "#" + c);
      }
    }
    this.keys = k.toArray(new String[0]);
  }

  /** The dense values this process trains with, flattened in chunk order (zero-padded). */
  private float[] local() {
    float[] out = new float[keys.length * CHUNK];
    for (int i = 0; i < variables.size(); i++) {
      float[] values = trainer.graph().getVariable(variables.get(i)).getArr().dup('c').data()
          .asFloat();
      System.arraycopy(values, 0, out, offsets[i], values.length);
    }
    return out;
  }

  /** Sets the table's averages to this worker's values (the leader, before the others pull). */
  public void publish(long step) {
    float[] now = table.findOrInsert(keys, false);
    float[] mine = local();
    float[] g = new float[mine.length];
    for (int i = 0; i < g.length; i++) {
      g[i] = now[i] - mine[i]; // row - 1 * g = mine
    }
    table.applyGradients(keys, g, 1f, step);
    last = mine;
  }

  /** Sends this worker's change since the last pull, divided by W. */
  public void push(long step) {
    push(step, workers);
  }

  /**
   * Sends this worker's change since the last pull, divided by {@code among}: the workers that
   * push this time (an elastic job's participants, fewer than W once some left).
   */
  public void push(long step, int among) {
    if (last == null) {
      throw new IllegalStateException("push before the first pull or publish");
    }
    if (among < 1) {
      throw new IllegalArgumentException("workers pushing must be >= 1 but was " + among);
    }
    float[] mine = local();
    float[] g = new float[mine.length];
    for (int i = 0; i < g.length; i++) {
      g[i] = -(mine[i] - last[i]) / among;
    }
    table.applyGradients(keys, g, 1f, step);
  }

  /** Reads the averages into this process's variables (in place). */
  public void pull() {
    float[] avg = table.findOrInsert(keys, false);
    for (int i = 0; i < variables.size(); i++) {
      INDArray arr = trainer.graph().getVariable(variables.get(i)).getArr();
      float[] values = java.util.Arrays.copyOfRange(avg, offsets[i],
          offsets[i] + (int) arr.length());
      arr.assign(Nd4j.create(values, arr.shape(), 'c').castTo(arr.dataType()));
    }
    last = avg;
  }
}
