package dev.dynembed.layers;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.common.Dirs;
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
 * The files of {@link Trainer} checkpoints under one directory {@code D}:
 *
 * <pre>
 *   D/CURRENT              the name of the latest complete checkpoint, e.g. "ckpt-000012"
 *   D/ckpt-000012/         dense/NAME and updater/NAME (ND4J binary arrays), tables/ (the tables'
 *                          own checkpoints, which every shard must see), MANIFEST.properties
 *                          (format version, step, variable and table names, extra entries)
 *   D/ckpt-000011/         the one before (the last {@link #KEEP} are kept)
 * </pre>
 *
 * <h2>Crash safety</h2>
 *
 * A save never touches a complete checkpoint: it writes {@code ckpt-N.tmp/} (every file fsynced,
 * manifest last), renames it to {@code ckpt-N} and fsyncs {@code D}, then writes {@code
 * CURRENT.tmp}, fsyncs it, renames it over {@code CURRENT} and fsyncs {@code D} again; only then
 * are older checkpoints beyond the last {@link #KEEP} and stray {@code .tmp} directories deleted.
 * A process that dies at any point leaves {@code CURRENT} naming a complete checkpoint: the old
 * one until the rename of {@code CURRENT}, the new one after ({@code TrainingCheckpointTest}
 * crashes a save at each step). A directory written by an older build ({@code
 * D/MANIFEST.properties} directly, no {@code CURRENT}) is still read, and replaced by the first
 * save.
 */
final class TrainingCheckpoint {
  static final int FORMAT_VERSION = 1;
  /** Complete checkpoints kept in a directory. */
  static final int KEEP = 2;
  static final String CURRENT = "CURRENT";
  static final String MANIFEST = "MANIFEST.properties";
  private static final java.util.regex.Pattern NAME =
      java.util.regex.Pattern.compile("ckpt-(\\d{6,})");

  /**
   * Tests only: called at each step of a save with the step's name; a hook that throws simulates
   * the process dying there.
   */
  static volatile java.util.function.Consumer<String> crashPoint = point -> { };

  private TrainingCheckpoint() {}

  /**
   * The directory holding the latest complete checkpoint under {@code dir}, or null if there is
   * none.
   */
  static Path latest(Path dir) {
    Path d = dir.toAbsolutePath().normalize();
    Path current = d.resolve(CURRENT);
    if (Files.exists(current)) {
      try {
        String name = Files.readString(current, StandardCharsets.UTF_8).trim();
        if (!NAME.matcher(name).matches() || !Files.exists(d.resolve(name).resolve(MANIFEST))) {
          throw new UncheckedIOException(new IOException(current + " names '" + name
              + "', which is not a complete checkpoint of " + d));
        }
        return d.resolve(name);
      } catch (IOException e) {
        throw new UncheckedIOException("reading " + current + " failed", e);
      }
    }
    return Files.exists(d.resolve(MANIFEST)) ? d : null; // an older build's layout
  }

  /**
   * Writes dense variables, updater state and every table as a new checkpoint under {@code dir}
   * (see the class comment for the order of the steps).
   */
  static void write(Path dir, long step, SameDiff sd, List<String> dense,
      Map<String, INDArray> updaterState, List<EmbeddingTable> tables,
      Map<String, String> extra) {
    Path d = dir.toAbsolutePath().normalize();
    try {
      Files.createDirectories(d);
      String name = String.format(java.util.Locale.ROOT, "ckpt-%06d", nextNumber(d));
      Path tmp = d.resolve(name + ".tmp");
      Dirs.deleteTree(tmp);
      Files.createDirectories(tmp.resolve("dense"));
      Files.createDirectories(tmp.resolve("updater"));
      for (String v : dense) {
        Path f = tmp.resolve("dense").resolve(v);
        Nd4j.saveBinary(sd.getVariable(v).getArr(), f.toFile());
        fsync(f);
        INDArray st = updaterState.get(v);
        if (st != null) {
          Path u = tmp.resolve("updater").resolve(v);
          Nd4j.saveBinary(st, u.toFile());
          fsync(u);
        }
      }
      crashPoint.accept("dense written");
      for (EmbeddingTable t : tables) {
        t.save(tmp.resolve("tables"), step); // each shard fsyncs its files and the manifest
      }
      crashPoint.accept("tables written");
      Properties m = new Properties();
      m.setProperty("format_version", String.valueOf(FORMAT_VERSION));
      m.setProperty("step", String.valueOf(step));
      m.setProperty("dense", String.join(",", dense));
      m.setProperty("tables", String.join(",", tables.stream().map(EmbeddingTable::name).toList()));
      extra.forEach((k, v) -> m.setProperty("extra." + k, v));
      try (Writer w = Files.newBufferedWriter(tmp.resolve(MANIFEST), StandardCharsets.UTF_8)) {
        m.store(w, "dynembed training checkpoint");
      }
      fsync(tmp.resolve(MANIFEST));
      for (String sub : List.of("dense", "updater", "tables", "")) {
        if (Files.isDirectory(tmp.resolve(sub))) {
          fsync(tmp.resolve(sub));
        }
      }
      crashPoint.accept("manifest written");
      Files.move(tmp, d.resolve(name), StandardCopyOption.ATOMIC_MOVE);
      fsync(d);
      crashPoint.accept("checkpoint renamed");
      Path currentTmp = d.resolve(CURRENT + ".tmp");
      Files.writeString(currentTmp, name + "\n", StandardCharsets.UTF_8);
      fsync(currentTmp);
      crashPoint.accept("pointer written");
      Files.move(currentTmp, d.resolve(CURRENT), StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
      fsync(d);
      crashPoint.accept("pointer renamed");
      cleanUp(d, name);
      crashPoint.accept("cleaned up");
    } catch (IOException e) {
      throw new UncheckedIOException("saving a checkpoint to " + d + " failed", e);
    }
  }

  /** One more than the highest checkpoint number in {@code d} (complete or not). */
  private static long nextNumber(Path d) throws IOException {
    long max = 0;
    try (var list = Files.list(d)) {
      for (Path p : list.toList()) {
        java.util.regex.Matcher m = NAME.matcher(p.getFileName().toString().replace(".tmp", ""));
        if (m.matches()) {
          max = Math.max(max, Long.parseLong(m.group(1)));
        }
      }
    }
    return max + 1;
  }

  /**
   * Deletes what the new checkpoint {@code keep} makes obsolete: checkpoints older than the last
   * {@link #KEEP}, unfinished {@code .tmp} directories, and an older build's files.
   */
  private static void cleanUp(Path d, String keep) throws IOException {
    List<Path> complete = new java.util.ArrayList<>();
    try (var list = Files.list(d)) {
      for (Path p : list.toList()) {
        String f = p.getFileName().toString();
        if (f.endsWith(".tmp") && !f.equals(CURRENT + ".tmp")) {
          Dirs.deleteTree(p);
        } else if (NAME.matcher(f).matches()) {
          complete.add(p);
        }
      }
    }
    complete.sort(java.util.Comparator.comparing(p -> p.getFileName().toString()));
    for (int i = 0; i < complete.size() - KEEP; i++) {
      if (!complete.get(i).getFileName().toString().equals(keep)) {
        Dirs.deleteTree(complete.get(i));
      }
    }
    for (String legacy : List.of(MANIFEST, "dense", "updater", "tables")) {
      Dirs.deleteTree(d.resolve(legacy));
    }
    fsync(d);
  }

  /** Forces a file's or a directory's content (for a directory: its entries) to disk. */
  static void fsync(Path p) throws IOException {
    dev.dynembed.table.common.Durable.fsync(p);
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

  /**
   * The manifest of the checkpoint directory {@code src} (see {@link #latest}), with a clear error
   * if it has none.
   */
  static Properties readManifest(Path src) {
    Properties m = new Properties();
    try (Reader r = Files.newBufferedReader(src.resolve(MANIFEST), StandardCharsets.UTF_8)) {
      m.load(r);
    } catch (IOException e) {
      throw new UncheckedIOException("no training checkpoint in " + src
          + " (" + MANIFEST + " missing or unreadable)", e);
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
}
