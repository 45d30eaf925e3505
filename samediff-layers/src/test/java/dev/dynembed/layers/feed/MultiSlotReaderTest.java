package dev.dynembed.layers.feed;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.layers.AsyncExecutor;
import dev.dynembed.ops.Combiner;
import dev.dynembed.layers.Layers;
import dev.dynembed.layers.Trainer;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Sgd;

class MultiSlotReaderTest {
  @TempDir Path dir;

  /** Paddle's own example layout: words (sparse ids), an unused dense float slot, a label. */
  static final String DESC = """
      name: "MultiSlotDataFeed"
      batch_size: 2
      multi_slot_desc {
        slots { name: "words" type: "string" is_dense: false is_used: true }
        slots { name: "score" type: "float" is_dense: true is_used: true shape: 2 }
        slots { name: "ids" type: "uint64" is_dense: false is_used: false }
        slots { name: "label" type: "uint64" is_dense: false is_used: true }
      }
      """;

  @Test
  void batches_padSparseSlots_withMasks_keepDenseShapes_skipUnusedSlots() throws Exception {
    FeedDescription d = FeedDescription.parse(DESC);
    assertEquals(List.of("words", "words_mask", "score", "label", "label_mask"), d.placeholders());
    Path f = Files.writeString(dir.resolve("part-0"), """
        3 the cat sat 2 0.5 1.5 1 9 1 007
        1 dog 2 -1 2 2 18446744073709551615 1 1 2

        2 café 亜鉛 2 3 4 1 5 1 0
        """);
    List<Map<String, INDArray>> b = new MultiSlotReader(d).readAll(f);
    assertEquals(2, b.size(), "2 + 1 examples (the blank line is skipped)");
    Map<String, INDArray> first = b.get(0);
    assertEquals(List.of("the", "cat", "sat", "dog", "dog", "dog"),
        KeyArrays.toList(first.get("words")), "padded with the line's first value, masked");
    assertArrayEquals(new long[] {2, 3}, first.get("words").shape());
    assertArrayEquals(new float[] {1, 1, 1, 1, 0, 0},
        first.get("words_mask").reshape(6).toFloatVector());
    assertArrayEquals(new long[] {2, 2}, first.get("score").shape());
    assertArrayEquals(new float[] {0.5f, 1.5f, -1f, 2f}, first.get("score").reshape(4).toFloatVector());
    assertEquals(List.of("7", "2"), KeyArrays.toList(first.get("label")), "uint64 canonical");
    assertTrue(!first.containsKey("ids"), "unused slots are not fed");
    Map<String, INDArray> last = b.get(1);
    assertEquals(List.of("café", "亜鉛"), KeyArrays.toList(last.get("words")), "UTF-8 keys");
    assertArrayEquals(new long[] {1, 2}, last.get("score").shape(), "a short last batch");
  }

  @Test
  void malformedLines_nameFileLineAndSlot() throws Exception {
    FeedDescription d = FeedDescription.parse(DESC);
    String good = "1 a 2 0 0 1 3 1 4\n";
    String[][] cases = {
        {"1 a 2 0 0 1 3 1\n", ":2: slot 'label': count 1 but only 0 values left"},
        {"x a 2 0 0 1 3 1 4\n", ":2: slot 'words': expected a count, found 'x'"},
        {"0 2 0 0 1 3 1 4\n", ":2: slot 'words': count 0 but a sparse slot needs at least 1"},
        {"1 a 3 0 0 0 1 3 1 4\n", ":2: slot 'score': count 3 but the slot is dense with 2"},
        {"1 a 2 0 zero 1 3 1 4\n", ":2: slot 'score' (float): value 2 is 'zero', not a number"},
        {"1 a 2 0 NaN 1 3 1 4\n", ":2: slot 'score' (float): value 2 is NaN, not finite"},
        {"1 a 2 0 0 1 -3 1 4\n", ":2: slot 'ids' (uint64): value 1 is '-3', not an unsigned"},
        {"1 a 2 0 0 1 3 1 4 5\n", ":2: 1 values after the last slot ('label')"},
        {"1 a 2 0 0\n", ":2: slot 'ids': the line ends before its count"},
    };
    for (String[] c : cases) {
      Path f = Files.writeString(dir.resolve("bad"), good + c[0]);
      byte[] before = Files.readAllBytes(f);
      FeedException e = assertThrows(FeedException.class,
          () -> new MultiSlotReader(d).readAll(f), c[0]);
      assertTrue(e.getMessage().contains(f + c[1]), "'" + e.getMessage() + "' should say '"
          + c[1] + "'");
      assertArrayEquals(before, Files.readAllBytes(f), "the input is never modified");
    }
    Path latin1 = dir.resolve("latin1");
    Files.write(latin1, "1 caf\u00e9 2 0 0 1 3 1 4\n".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
    FeedException e = assertThrows(FeedException.class, () -> new MultiSlotReader(d).readAll(latin1));
    assertTrue(e.getMessage().contains(latin1 + ":1: not valid UTF-8"), e.getMessage());
  }

  @Test
  void descriptions_areCheckedNamingTheSlot() {
    String[][] cases = {
        {"batch_size: 4", "multi_slot_desc has no slots"},
        {"multi_slot_desc { slots { name: \"a\" type: \"int\" is_used: true } }",
            "slot 'a': type must be uint64, string or float but was 'int'"},
        {"multi_slot_desc { slots { name: \"a\" type: \"float\" is_dense: true is_used: true } }",
            "slot 'a' is dense but has no shape"},
        {"multi_slot_desc { slots { name: \"a\" type: \"float\" is_used: true } }",
            "slot 'a': a sparse slot holds keys"},
        {"multi_slot_desc { slots { name: \"a\" type: \"string\" is_used: true shape: 3 } }",
            "slot 'a' is sparse (its length varies per line) but has a shape"},
        {"multi_slot_desc { slots { name: \"a\" type: \"string\" is_used: true }"
            + " slots { name: \"a\" type: \"string\" } }", "slot 'a' is described twice"},
        {"multi_slot_desc { slots { name: \"a\" type: \"string\" is_used: true }"
            + " slots { name: \"a_mask\" type: \"string\" } }",
            "slot 'a_mask' clashes with the mask placeholder of sparse slot 'a'"},
        {"multi_slot_desc { slots { name: \"a b\" type: \"string\" is_used: true } }",
            "slot name 'a b' must match"},
        {"multi_slot_desc { slots { name: \"a\" type: \"string\" } }", "no slot is used"},
        {"batch_size: -1 multi_slot_desc { slots { name: \"a\" type: \"string\" is_used: true } }",
            "batch_size must be in 1..1048576 but was -1"},
        {"pipe_command: \"cat\"", "not a valid DataFeedDesc"},
    };
    for (String[] c : cases) {
      FeedException e = assertThrows(FeedException.class, () -> FeedDescription.parse(c[0]), c[0]);
      assertTrue(e.getMessage().contains(c[1]), "'" + e.getMessage() + "' should say '" + c[1]
          + "'");
    }
    assertEquals(32, FeedDescription.parse("multi_slot_desc { slots { name: \"a\" type: \"string\""
        + " is_used: true } }").batchSize(), "0 means Paddle's default");
  }

  /** Feed files of a learnable bag-of-words task train through the asynchronous executor. */
  @Test
  void feedFiles_trainABagOfWordsModel_onTwoThreads() throws Exception {
    Random r = new Random(4);
    List<Path> files = new ArrayList<>();
    for (int f = 0; f < 4; f++) {
      StringBuilder b = new StringBuilder();
      for (int l = 0; l < 256; l++) {
        int topic = r.nextInt(6);
        int n = 1 + r.nextInt(5);
        b.append(n);
        for (int i = 0; i < n; i++) {
          b.append(" t").append(topic).append('w').append(r.nextInt(4));
        }
        b.append(" 2 ").append(r.nextFloat()).append(' ').append(r.nextFloat());
        b.append(" 1 ").append(r.nextInt(100)).append(" 1 ").append(topic).append('\n');
      }
      files.add(Files.writeString(dir.resolve("part-" + f), b.toString()));
    }
    FeedDescription d = FeedDescription.parse(DESC.replace("batch_size: 2", "batch_size: 32"));
    try (TableClient tables = TableClients.inProcess(dir)) {
      EmbeddingTable words = tables.createTable(TableConfigs.builder("words", 8)
          .setOptimizer(TableConfigs.adagrad(0.3f, 1e-3f, 0f))
          .setInitializer(TableConfigs.uniform(-0.3f, 0.3f, 1)).build());
      EmbeddingTable labels = tables.createTable(TableConfigs.builder("labels", 8)
          .setOptimizer(TableConfigs.adagrad(0.3f, 1e-3f, 0f))
          .setInitializer(TableConfigs.zeros()).build());
      AsyncExecutor ex = new AsyncExecutor(i -> {
        SameDiff sd = SameDiff.create();
        Layers layers = new Layers(sd);
        SDVariable w = sd.placeHolder("words", DataType.UTF8, -1, -1);
        SDVariable wm = sd.placeHolder("words_mask", DataType.FLOAT, -1, -1);
        SDVariable y = sd.placeHolder("label", DataType.UTF8, -1, -1);
        SDVariable ym = sd.placeHolder("label_mask", DataType.FLOAT, -1, -1);
        sd.placeHolder("score", DataType.FLOAT, -1, 2); // fed, not used by this model
        SDVariable bag = layers.embeddingBag("bag", w, wm, words, Combiner.MEAN, true);
        layers.negativeSamplingLoss("loss", bag, y, ym, labels, 3, 7);
        return new Trainer(sd, "loss", new Sgd(0.1), List.of(words, labels));
      }, 2);
      MultiSlotReader reader = new MultiSlotReader(d);
      double first = Double.NaN;
      double last = Double.NaN;
      for (int epoch = 0; epoch < 8; epoch++) {
        AsyncExecutor.RunResult res = ex.runFromFiles(files, 2, reader, List.of("loss"), 0f);
        assertEquals(4 * 256 / 32, res.steps());
        if (epoch == 0) {
          first = res.averages().get("loss");
        }
        last = res.averages().get("loss");
      }
      assertTrue(last < 0.5 * first, "loss " + first + " -> " + last);
    }
  }
}
