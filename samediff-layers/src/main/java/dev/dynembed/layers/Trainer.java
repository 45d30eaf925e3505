package dev.dynembed.layers;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.StepArrays;
import dev.dynembed.ops.StepContext;
import dev.dynembed.table.client.EmbeddingTable;
import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
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
 * and every table under one step id; {@code save} runs between steps, so no step is in flight.
 */
public final class Trainer {
  /** Told after every step. */
  public interface Listener {
    void onStep(long step, double loss);

    /** Also told after every step: the loss and every fetched variable (means). */
    default void onFetched(long step, Map<String, Double> fetched) {}
  }

  static final int FORMAT_VERSION = 1;

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
    List<String> handles = new ArrayList<>();
    for (EmbeddingTable t : tables) {
      String h = DynEmbed.handleName(t);
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
    long s = ++step;
    for (EmbeddingTable t : tables) {
      StepContext.set(t.name(), tableLearningRate, s, stream);
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
      OutAndGrad r = sd.calculateGradientsAndOutputs(feeds, outputs, gradientNames);
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

  /**
   * Writes dense variables, updater state and every table under {@code dir} (replaced if it
   * exists), with a manifest written last. Table checkpoints go to {@code dir/tables}, which every
   * shard must see.
   */
  public void save(Path dir) {
    save(dir, Map.of());
  }

  /**
   * As {@link #save(Path)}, also storing {@code extra} (e.g. a data reader's position) in the
   * manifest, so that it is replaced atomically with the rest; {@link #restore} returns it.
   */
  public void save(Path dir, Map<String, String> extra) {
    Path target = dir.toAbsolutePath().normalize();
    Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
    try {
      deleteTree(tmp);
      Files.createDirectories(tmp.resolve("dense"));
      Files.createDirectories(tmp.resolve("updater"));
      for (String name : dense) {
        Nd4j.saveBinary(sd.getVariable(name).getArr(), tmp.resolve("dense").resolve(name).toFile());
        INDArray st = updaterState.get(name);
        if (st != null) {
          Nd4j.saveBinary(st, tmp.resolve("updater").resolve(name).toFile());
        }
      }
      for (EmbeddingTable t : tables) {
        t.save(tmp.resolve("tables"), step);
      }
      Properties m = new Properties();
      m.setProperty("format_version", String.valueOf(FORMAT_VERSION));
      m.setProperty("step", String.valueOf(step));
      m.setProperty("dense", String.join(",", dense));
      m.setProperty("tables", String.join(",", tables.stream().map(EmbeddingTable::name).toList()));
      extra.forEach((k, v) -> m.setProperty("extra." + k, v));
      try (Writer w = Files.newBufferedWriter(tmp.resolve("MANIFEST.properties"),
          StandardCharsets.UTF_8)) {
        m.store(w, "dynembed training checkpoint");
      }
      deleteTree(target);
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new UncheckedIOException("saving a checkpoint to " + target + " failed", e);
    }
  }

  /**
   * Brings back everything {@link #save} wrote; training continues as if never stopped.
   *
   * @return the extra entries given to {@link #save(Path, Map)}
   */
  public Map<String, String> restore(Path dir) {
    Properties m = readManifest(dir);
    restore(dir, m);
    return extras(m);
  }

  /**
   * The extra entries given to {@link #save(Path, Map)} of the checkpoint in {@code dir}, without
   * restoring anything (to check a checkpoint before restoring it).
   */
  public static Map<String, String> readExtras(Path dir) {
    return extras(readManifest(dir));
  }

  private static Map<String, String> extras(Properties m) {
    Map<String, String> extra = new LinkedHashMap<>();
    for (String k : m.stringPropertyNames()) {
      if (k.startsWith("extra.")) {
        extra.put(k.substring("extra.".length()), m.getProperty(k));
      }
    }
    return extra;
  }

  /** The manifest of a checkpoint written by {@link #save}, with a clear error if it has none. */
  private static Properties readManifest(Path dir) {
    Path src = dir.toAbsolutePath().normalize();
    Properties m = new Properties();
    try (Reader r = Files.newBufferedReader(src.resolve("MANIFEST.properties"),
        StandardCharsets.UTF_8)) {
      m.load(r);
    } catch (IOException e) {
      throw new UncheckedIOException("no training checkpoint in " + src
          + " (MANIFEST.properties missing or unreadable)", e);
    }
    return m;
  }

  private void restore(Path dir, Properties m) {
    Path src = dir.toAbsolutePath().normalize();
    if (!String.valueOf(FORMAT_VERSION).equals(m.getProperty("format_version"))) {
      throw new IllegalStateException("checkpoint " + src + " has format version "
          + m.getProperty("format_version") + "; this build reads " + FORMAT_VERSION);
    }
    List<String> savedDense = List.of(m.getProperty("dense", "").split(","));
    if (!savedDense.equals(dense.isEmpty() ? List.of("") : dense)) {
      throw new IllegalStateException("checkpoint " + src + " holds dense variables "
          + savedDense + " but the graph has " + dense);
    }
    try {
      Map<String, INDArray> loaded = new LinkedHashMap<>();
      Map<String, INDArray> loadedState = new LinkedHashMap<>();
      for (String name : dense) {
        loaded.put(name, Nd4j.readBinary(src.resolve("dense").resolve(name).toFile()));
        if (updaterState.get(name) != null) {
          loadedState.put(name, Nd4j.readBinary(src.resolve("updater").resolve(name).toFile()));
        }
      }
      for (EmbeddingTable t : tables) {
        t.restore(src.resolve("tables"));
      }
      loaded.forEach((name, arr) -> sd.getVariable(name).getArr().assign(arr));
      loadedState.forEach((name, arr) -> updaterState.get(name).assign(arr));
      step = Long.parseLong(m.getProperty("step"));
    } catch (IOException e) {
      throw new UncheckedIOException("reading checkpoint " + src + " failed", e);
    }
  }

  private static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (var walk = Files.walk(p)) {
      for (Path q : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.delete(q);
      }
    }
  }
}
