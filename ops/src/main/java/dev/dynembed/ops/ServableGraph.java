package dev.dynembed.ops;

import com.google.protobuf.TextFormat;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.Durable;
import dev.dynembed.table.v1.TableConfig;
import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Function;
import org.nd4j.autodiff.functions.DifferentialFunction;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * An inference graph with table ops, saved so that another process loads it and runs it against
 * the tables it reads: a table service's shards, or an in-process table restored from a
 * checkpoint. The graph itself (ops, the custom table ops with their properties, dense variables)
 * is SameDiff's FlatBuffers file; beside it a small properties file names each table the graph
 * binds (binding id, full config), the outputs to serve, and the model's own extras (e.g. a label
 * list). Rows are not in the graph: they live in the table, which is saved and restored as usual
 * ({@link EmbeddingTable#save}).
 *
 * <p>Layout of a directory: {@code graph.fb} (written first), {@code servable.properties}
 * (written last, atomically: a directory without it is incomplete). Only inference graphs are
 * servable: a lookup built with {@code training = true} would create rows for every unseen key
 * it serves, so {@link #save} refuses it.
 */
public final class ServableGraph {
  public static final int FORMAT_VERSION = 1;
  static final String GRAPH_FILE = "graph.fb";
  static final String PROPERTIES_FILE = "servable.properties";

  private final SameDiff graph;
  private final List<String> outputs;
  private final Map<String, TableConfig> tables;
  private final Map<String, String> extras;

  private ServableGraph(SameDiff graph, List<String> outputs, Map<String, TableConfig> tables,
      Map<String, String> extras) {
    this.graph = graph;
    this.outputs = outputs;
    this.tables = tables;
    this.extras = extras;
  }

  /**
   * Saves {@code sd} (its current variable values) and its table bindings under {@code dir}.
   *
   * @param outputs the variables {@link #output} returns
   * @param extras the model's own settings, returned by {@link #extras()} after loading
   * @throws IllegalArgumentException for a graph with a training lookup, or an unknown output
   */
  public static void save(SameDiff sd, Path dir, List<String> outputs, Map<String, String> extras)
      throws IOException {
    for (DifferentialFunction f : sd.ops()) {
      if (f instanceof RowReadOp r && r.training()) {
        throw new IllegalArgumentException("op '" + f.getOwnName() + "' is a training lookup"
            + " (it would create rows for unseen keys and send gradients); save the inference"
            + " graph, built with training = false");
      }
    }
    if (outputs.isEmpty()) {
      throw new IllegalArgumentException("name at least one output to serve");
    }
    for (String o : outputs) {
      if (!sd.hasVariable(o)) {
        throw new IllegalArgumentException("the graph has no variable '" + o + "' to serve");
      }
    }
    Files.createDirectories(dir);
    Files.deleteIfExists(dir.resolve(PROPERTIES_FILE)); // incomplete until written again
    Path tmp = dir.resolve(GRAPH_FILE + ".tmp");
    sd.save(tmp.toFile(), false);
    Durable.fsync(tmp);
    Files.move(tmp, dir.resolve(GRAPH_FILE), java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    Properties p = new Properties();
    p.setProperty("format_version", String.valueOf(FORMAT_VERSION));
    p.setProperty("outputs", String.join(",", outputs));
    Map<String, EmbeddingTable> bound = GraphTables.of(sd).bindings();
    p.setProperty("tables", String.valueOf(bound.size()));
    int i = 0;
    for (Map.Entry<String, EmbeddingTable> e : bound.entrySet()) {
      p.setProperty("table." + i + ".id", e.getKey());
      p.setProperty("table." + i + ".config",
          TextFormat.printer().shortDebugString(e.getValue().config()));
      i++;
    }
    for (Map.Entry<String, String> e : extras.entrySet()) {
      p.setProperty("extra." + e.getKey(), e.getValue());
    }
    StringWriter w = new StringWriter();
    p.store(w, "dynembed servable graph (docs/design/0011-pooled-lookups.md)");
    Durable.writeAtomically(dir.resolve(PROPERTIES_FILE), w.toString().getBytes(
        StandardCharsets.UTF_8));
  }

  /** Loads a servable graph whose tables are opened by name from {@code client}. */
  public static ServableGraph load(Path dir, TableClient client) throws IOException {
    return load(dir, config -> client.openTable(config.getName()));
  }

  /**
   * Loads a servable graph, each table it reads opened by {@code open} from its saved config;
   * the opened table's dim must be the saved one.
   */
  public static ServableGraph load(Path dir, Function<TableConfig, EmbeddingTable> open)
      throws IOException {
    Path props = dir.resolve(PROPERTIES_FILE);
    if (!Files.exists(props)) {
      throw new IllegalArgumentException(dir + " holds no servable graph (no " + PROPERTIES_FILE
          + "; a save that did not finish leaves none)");
    }
    Properties p = new Properties();
    p.load(new StringReader(Files.readString(props, StandardCharsets.UTF_8)));
    String version = p.getProperty("format_version", "");
    if (!version.equals(String.valueOf(FORMAT_VERSION))) {
      throw new IllegalArgumentException(props + ": format_version '" + version + "', this"
          + " version reads " + FORMAT_VERSION);
    }
    Map<String, TableConfig> configs = new LinkedHashMap<>();
    int n = Integer.parseInt(required(p, "tables", props));
    for (int i = 0; i < n; i++) {
      TableConfig.Builder c = TableConfig.newBuilder();
      try {
        TextFormat.merge(required(p, "table." + i + ".config", props), c);
      } catch (TextFormat.ParseException e) {
        throw new IllegalArgumentException(props + ": table." + i + ".config does not parse: "
            + e.getMessage());
      }
      configs.put(required(p, "table." + i + ".id", props), c.build());
    }
    Map<String, String> extras = new LinkedHashMap<>();
    for (String k : p.stringPropertyNames().stream().sorted().toList()) {
      if (k.startsWith("extra.")) {
        extras.put(k.substring("extra.".length()), p.getProperty(k));
      }
    }
    JavaOps.install(); // before the graph exists: its sessions must run the table ops
    SameDiff sd = SameDiff.load(dir.resolve(GRAPH_FILE).toFile(), false);
    GraphTables bindings = GraphTables.of(sd);
    for (Map.Entry<String, TableConfig> e : configs.entrySet()) {
      TableConfig c = e.getValue();
      EmbeddingTable t = open.apply(c);
      if (t.dim() != c.getDim()) {
        throw new IllegalArgumentException("the graph reads table '" + c.getName()
            + "' with dim " + c.getDim() + " but the table opened has dim " + t.dim());
      }
      bindings.bindAs(e.getKey(), t);
    }
    List<String> outputs = new ArrayList<>(Arrays.asList(required(p, "outputs", props)
        .split(",")));
    return new ServableGraph(sd, List.copyOf(outputs), Map.copyOf(configs), extras);
  }

  private static String required(Properties p, String key, Path file) {
    String v = p.getProperty(key);
    if (v == null) {
      throw new IllegalArgumentException(file + " has no '" + key + "'");
    }
    return v;
  }

  /** The served outputs for {@code feeds} (placeholders by name). */
  public Map<String, INDArray> output(Map<String, INDArray> feeds) {
    return graph.output(feeds, outputs.toArray(new String[0]));
  }

  public SameDiff graph() {
    return graph;
  }

  public List<String> outputs() {
    return outputs;
  }

  /** The saved config of each table the graph binds, by binding id. */
  public Map<String, TableConfig> tables() {
    return tables;
  }

  /** The model's own settings saved with the graph. */
  public Map<String, String> extras() {
    return extras;
  }
}
