package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.layers.feed.MultiSlotReader;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.ops.ServableGraph;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.v1.TableConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A bow_net model saved by {@link BowNet#saveServable}, loaded for inference in any process:
 * the graph, its labels and feed description, and its word table, either restored from the saved
 * checkpoint into a table client (an in-process table, or fresh shards) or read live from shards
 * that already hold it.
 */
public final class BowNetServable {
  static final String TABLE_DIR = "table";

  private final ServableGraph graph;
  private final List<String> labels;
  private final MultiSlotReader feed;
  private final boolean bigrams;

  private BowNetServable(ServableGraph graph) {
    this.graph = graph;
    Map<String, String> x = graph.extras();
    if (!"bow_net".equals(x.get("model")) || x.get("labels") == null || x.get("feed") == null) {
      throw new IllegalArgumentException("not a bow_net servable graph (extras: " + x.keySet()
          + ")");
    }
    this.labels = Arrays.asList(x.get("labels").split("\n"));
    this.feed = new MultiSlotReader(FeedDescription.parse(x.get("feed")));
    this.bigrams = Boolean.parseBoolean(x.getOrDefault("bigrams", "false"));
  }

  /**
   * Loads the model in {@code dir}.
   *
   * @param restore true: create each table in {@code client} and restore it from the saved
   *     checkpoint (a fresh in-process table or fresh shards); false: use the tables {@code
   *     client} already holds (the shards the model was trained on)
   */
  public static BowNetServable open(Path dir, TableClient client, boolean restore)
      throws IOException {
    return new BowNetServable(ServableGraph.load(dir, (TableConfig c) -> {
      if (!restore) {
        return client.openTable(c.getName());
      }
      EmbeddingTable t = client.createTable(c);
      t.restore(dir.resolve(TABLE_DIR));
      return t;
    }));
  }

  /**
   * Loads the model in {@code dir}, each table it reads opened by {@code open} from its saved
   * config (e.g. a {@link dev.dynembed.table.client.ServingTable} over the shards).
   */
  public static BowNetServable open(Path dir,
      java.util.function.Function<TableConfig, EmbeddingTable> open) throws IOException {
    return new BowNetServable(ServableGraph.load(dir, open));
  }

  public List<String> labels() {
    return labels;
  }

  /** A line's predicted label, and the label its label slot holds (null without one). */
  public record Prediction(String predicted, String truth) {}

  /** The prediction for every line of a feed file in the model's format, in line order. */
  public List<Prediction> classify(Path file) {
    List<Prediction> out = new ArrayList<>();
    for (Map<String, INDArray> batch : feed.read(file)) {
      INDArray logits = graph.output(Features.bag(batch, bigrams)).get("logits");
      INDArray best = logits.argMax(1);
      INDArray truth = batch.get("label");
      List<String> truths = truth == null ? null : KeyArrays.toList(truth);
      for (int e = 0; e < best.length(); e++) {
        out.add(new Prediction(labels.get(best.getInt(e)),
            truths == null ? null : truths.get(e * (int) truth.size(1))));
      }
    }
    return out;
  }
}
