package dev.dynembed.layers;

import dev.dynembed.ops.Combiner;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import java.nio.file.Path;
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
import org.nd4j.linalg.learning.config.Adam;

/**
 * The README's SameDiff quick start, as written there, on a task it can learn (each example's
 * label is a function of its keys); and two clients whose tables share a name, training side by
 * side in one JVM (the ops bind tables per graph, not by name).
 */
class QuickStartTest {
  static final int B = 64;
  static final int LABELS = 8;

  /** The README's model; returns the trainer (its graph is the one built here). */
  static Trainer readmeModel(TableClient tables) {
    EmbeddingTable words = tables.createTable(TableConfigs.builder("words", 64)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f)).build());
    EmbeddingTable labels = tables.createTable(TableConfigs.builder("labels", 32)
        .setOptimizer(TableConfigs.adagrad(0.1f, 0f, 0f)).build());
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1, 5);
    SDVariable mask = sd.placeHolder("mask", DataType.FLOAT, -1, 5);
    SDVariable bag = layers.embeddingBag("bag", keys, mask, words, Combiner.MEAN, true);
    SDVariable w = sd.var("w", Nd4j.rand(DataType.FLOAT, 64, 32).muli(0.1));
    SDVariable target = sd.placeHolder("target", DataType.UTF8, -1, 1);
    SDVariable targetMask = sd.placeHolder("target_mask", DataType.FLOAT, -1, 1);
    SDVariable loss = layers.sampledSoftmaxLoss("loss", bag.mmul(w), target, targetMask,
        labels, /*numSampled*/ 64, /*seed*/ 7);
    sd.setLossVariables(loss);
    return new Trainer(sd, "loss", new Adam(1e-3), List.of(words, labels));
  }

  /** A batch: 1-5 keys per example from 40 words; every key's word is its label mod 8. */
  static Map<String, INDArray> batch(Random rnd) {
    String[] batchKeys = new String[B * 5];
    float[] batchMask = new float[B * 5];
    String[] batchLabels = new String[B];
    for (int i = 0; i < B; i++) {
      int label = rnd.nextInt(LABELS);
      int n = 1 + rnd.nextInt(5);
      for (int j = 0; j < 5; j++) {
        int word = label + LABELS * rnd.nextInt(5);
        batchKeys[i * 5 + j] = j < n ? "w" + word : "<pad>"; // padding: any key, mask 0
        batchMask[i * 5 + j] = j < n ? 1 : 0;
      }
      batchLabels[i] = "label-" + label;
    }
    return Map.of("keys", KeyArrays.of(batchKeys, B, 5),
        "mask", Nd4j.create(batchMask, new long[] {B, 5}, 'c'),
        "target", KeyArrays.of(batchLabels, B, 1),
        "target_mask", Nd4j.ones(DataType.FLOAT, B, 1));
  }

  @Test
  void readmeQuickStart_trainsAndSaves(@TempDir Path dir) {
    try (TableClient tables = TableClients.inProcess(dir.resolve("tables"))) {
      Trainer trainer = readmeModel(tables);
      Random rnd = new Random(1);
      double first = 0;
      double last = 0;
      for (int step = 0; step < 150; step++) {
        double l = trainer.step(batch(rnd), 0f);
        if (step < 10) {
          first += l / 10;
        } else if (step >= 140) {
          last += l / 10;
        }
      }
      // 8 labels among 64 sampled: chance is ln(65) ~ 4.2; a learnt model is far below it
      assertTrue(last < 0.5 * first, "loss " + first + " -> " + last);
      trainer.save(dir.resolve("ckpt"));
      assertTrue(java.nio.file.Files.isDirectory(dir.resolve("ckpt")));
    }
  }

  @Test
  void twoClients_tablesOfTheSameName_trainSideBySide(@TempDir Path dir) {
    try (TableClient a = TableClients.inProcess(dir.resolve("a"));
        TableClient b = TableClients.inProcess(dir.resolve("b"))) {
      Trainer ta = readmeModel(a);
      Trainer tb = readmeModel(b);
      Random ra = new Random(1);
      Random rb = new Random(1);
      Random other = new Random(99);
      for (int step = 0; step < 20; step++) {
        ta.step(batch(ra), 0f);
        tb.step(batch(rb), 0f); // same batches as a
        if (step == 9) {
          // a extra step on b's tables only: a's rows must not see it
          tb.step(batch(other), 0f);
        }
      }
      // each graph wrote to its own client's "words": a saw 20 steps, b 21
      assertEquals(20, ta.step());
      assertEquals(21, tb.step());
      EmbeddingTable wa = a.openTable("words");
      EmbeddingTable wb = b.openTable("words");
      long ua = wa.describe().getCounters().getUpdates();
      long ub = wb.describe().getCounters().getUpdates();
      assertTrue(ub > ua, "b's table took b's extra step: " + ua + " vs " + ub);
      float[] rowA = wa.find("w3").rows();
      float[] rowB = wb.find("w3").rows();
      assertTrue(!java.util.Arrays.equals(rowA, rowB), "the tables are distinct");
    }
  }
}
