package dev.dynembed.layers;

import dev.dynembed.table.client.EmbeddingTable;
import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The files of a {@link Trainer} checkpoint: {@code dense/NAME} and {@code updater/NAME} (ND4J
 * binary arrays), {@code tables/} (the tables' own checkpoints, which every shard must see) and
 * {@code MANIFEST.properties} (format version, step, variable and table names, the caller's
 * extra entries), written last.
 */
final class TrainingCheckpoint {
  static final int FORMAT_VERSION = 1;

  private TrainingCheckpoint() {}

  /**
   * Writes dense variables, updater state and every table under {@code dir} (replaced if it
   * exists): into {@code dir.tmp}, manifest last, then renamed over {@code dir}.
   */
  static void write(Path dir, long step, SameDiff sd, List<String> dense,
      Map<String, INDArray> updaterState, List<EmbeddingTable> tables,
      Map<String, String> extra) {
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
  /** The extra entries of a manifest. */
  static Map<String, String> extras(Properties m) {
    Map<String, String> extra = new LinkedHashMap<>();
    for (String k : m.stringPropertyNames()) {
      if (k.startsWith("extra.")) {
        extra.put(k.substring("extra.".length()), m.getProperty(k));
      }
    }
    return extra;
  }

  /** The manifest of a checkpoint written by {@link #save}, with a clear error if it has none. */
  static Properties readManifest(Path dir) {
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

  /**
   * Reads a checkpoint into the graph's dense variables, the updater state and the tables.
   *
   * @return the step it was saved at
   */
  static long read(Path dir, Properties m, SameDiff sd, List<String> dense,
      Map<String, INDArray> updaterState, List<EmbeddingTable> tables) {
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
      return Long.parseLong(m.getProperty("step"));
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
