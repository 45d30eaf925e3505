package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** An inference graph with table ops saves, loads against a table by name and serves alike. */
class ServableGraphTest {
  @TempDir Path dir;

  private static SameDiff graph(ProbeTable t, boolean training) {
    SameDiff sd = SameDiff.create();
    DynEmbed ops = new DynEmbed(sd);
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1, 3);
    SDVariable mask = sd.placeHolder("mask", DataType.FLOAT, -1, 3);
    SDVariable bag = ops.dynamicEmbeddingBag("bag", keys, mask, t, Combiner.MEAN, training);
    SDVariable w = sd.var("w", Nd4j.linspace(-1, 1, 8, DataType.FLOAT).reshape(4, 2));
    sd.updateVariableNameAndReference(bag.mmul(w), "scores");
    return sd;
  }

  private static Map<String, INDArray> feeds() {
    return Map.of("keys", Strings.matrix(new String[][] {{"a", "b", "c"}, {"c", "c", "a"}}),
        "mask", Nd4j.createFromArray(new float[][] {{1, 1, 0}, {1, 1, 1}}));
  }

  @Test
  void savedGraph_loadsAgainstTheTableByName_andServesTheSameScores() throws Exception {
    ProbeTable t = new ProbeTable("words", 4);
    SameDiff sd = graph(t, false);
    INDArray expected = sd.output(feeds(), "scores").get("scores");
    ServableGraph.save(sd, dir, List.of("scores"), Map.of("note", "a\nb"));
    ProbeTable again = new ProbeTable("words", 4); // rows are a function of the key
    ServableGraph g = ServableGraph.load(dir, c -> {
      assertEquals("words", c.getName());
      return again;
    });
    assertEquals(Map.of("note", "a\nb"), g.extras());
    float[] served = g.output(feeds()).get("scores").dup().data().asFloat();
    assertArrayEquals(expected.dup().data().asFloat(), served, 1e-6f);
    // served through a bounded cache of the table's rows: the same scores, the second call
    // from the cache alone
    dev.dynembed.table.client.ServingTable cached = new dev.dynembed.table.client.ServingTable(
        new ProbeTable("words", 4), 1 << 20, java.time.Duration.ofMinutes(1));
    ServableGraph viaCache = ServableGraph.load(dir, c -> cached);
    for (int call = 0; call < 2; call++) {
      assertArrayEquals(expected.dup().data().asFloat(),
          viaCache.output(feeds()).get("scores").dup().data().asFloat(), 1e-6f);
    }
    assertEquals(3, cached.keysRead(), "a, b, c read once");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ServableGraph.load(dir, c -> new ProbeTable("words", 5)));
    assertTrue(e.getMessage().contains("reads table 'words' with dim 4 but the table opened has"
        + " dim 5"), e.getMessage());
  }

  @Test
  void trainingGraphs_andIncompleteSaves_areRefused() throws Exception {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ServableGraph.save(graph(new ProbeTable("words", 4), true), dir,
            List.of("scores"), Map.of()));
    assertTrue(e.getMessage().contains("is a training lookup"), e.getMessage());
    Files.writeString(dir.resolve("graph.fb"), "partial");
    e = assertThrows(IllegalArgumentException.class,
        () -> ServableGraph.load(dir, c -> new ProbeTable("words", 4)));
    assertTrue(e.getMessage().contains("holds no servable graph"), e.getMessage());
  }
}
