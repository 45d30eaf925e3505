package dev.dynembed.layers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.ops.Combiner;
import dev.dynembed.ops.KeyArrays;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
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
import org.nd4j.linalg.learning.config.Adam;

/**
 * A bag-of-words classifier trained with the bag pooled on 2 real loopback shards follows the
 * same trajectory as with the bag pooled on the client (rows read, masked mean): the same loss at
 * every step and the same rows at the end, up to float summation order.
 */
class PooledBagTrainingTest {
  @TempDir Path dir;

  private static final int DIM = 8;
  private static final int CLASSES = 3;
  private static final int LEN = 6;
  private static final String[] VOCAB = new String[40];

  static {
    for (int i = 0; i < VOCAB.length; i++) {
      VOCAB[i] = (i % 5 == 0 ? "мир" : "w") + i;
    }
  }

  /** Words of class c come mostly from a third of the vocabulary; bags of 1..LEN words. */
  private static List<Map<String, INDArray>> batches(int n, int b) {
    Random r = new Random(3);
    List<Map<String, INDArray>> out = new ArrayList<>();
    for (int s = 0; s < n; s++) {
      String[][] keys = new String[b][LEN];
      float[][] mask = new float[b][LEN];
      float[][] labels = new float[b][CLASSES];
      for (int i = 0; i < b; i++) {
        int c = r.nextInt(CLASSES);
        labels[i][c] = 1f;
        int len = 1 + r.nextInt(LEN);
        for (int j = 0; j < LEN; j++) {
          int w = r.nextInt(4) == 0 ? r.nextInt(VOCAB.length)
              : c * (VOCAB.length / CLASSES) + r.nextInt(VOCAB.length / CLASSES);
          keys[i][j] = j < len ? VOCAB[w] : keys[i][0];
          mask[i][j] = j < len ? 1f : 0f;
        }
      }
      String[] flat = new String[b * LEN];
      for (int i = 0; i < b; i++) {
        System.arraycopy(keys[i], 0, flat, i * LEN, LEN);
      }
      out.add(Map.of("words", KeyArrays.of(flat).reshape(b, LEN),
          "words_mask", Nd4j.createFromArray(mask), "label", Nd4j.createFromArray(labels)));
    }
    return out;
  }

  private record Run(double[] losses, float[] rows) {}

  private static Run train(TableClient tables, boolean onShards) {
    EmbeddingTable t = tables.createTable(TableConfigs.builder(onShards ? "bag_s" : "bag_c", DIM)
        .setOptimizer(TableConfigs.adagrad(0.3f, 0.1f, 1e-8f))
        .setInitializer(TableConfigs.normal(0f, 0.1f, 9)).build());
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable words = sd.placeHolder("words", DataType.UTF8, -1, LEN);
    SDVariable mask = sd.placeHolder("words_mask", DataType.FLOAT, -1, LEN);
    SDVariable label = sd.placeHolder("label", DataType.FLOAT, -1, CLASSES);
    SDVariable bag = onShards
        ? layers.embeddingBagOnShards("bag", words, mask, t, Combiner.MEAN, true)
        : layers.embeddingBag("bag", words, mask, t, Combiner.MEAN, true);
    SDVariable w = sd.var("w", Nd4j.linspace(-0.5, 0.5, DIM * CLASSES, DataType.FLOAT)
        .reshape(DIM, CLASSES));
    layers.softmaxLoss("loss", bag.mmul(w), label);
    Trainer trainer = new Trainer(sd, "loss", new Adam(0.01), List.of(t));
    List<Map<String, INDArray>> data = batches(40, 16);
    double[] losses = new double[data.size()];
    for (int s = 0; s < data.size(); s++) {
      Map<String, INDArray> next = s + 1 < data.size() ? data.get(s + 1) : null;
      losses[s] = trainer.step(data.get(s), 0f, List.of(), next, 0f).get("loss");
    }
    trainer.flush();
    return new Run(losses, t.find(VOCAB).rows());
  }

  @Test
  void pooledOnTwoShards_trainsAsClientPooling() throws Exception {
    List<TableServer> servers = new ArrayList<>();
    try {
      List<String> endpoints = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        TableServer srv = new TableServer(new ShardEngine(i, 2, dir), "127.0.0.1", 0, 2);
        servers.add(srv);
        endpoints.add("127.0.0.1:" + srv.port());
      }
      Run client;
      Run shards;
      try (TableClient tables = TableClients.connect(endpoints)) {
        client = train(tables, false);
        shards = train(tables, true);
      }
      for (int s = 0; s < client.losses().length; s++) {
        assertEquals(client.losses()[s], shards.losses()[s], 1e-4, "loss of step " + s);
      }
      assertTrue(client.losses()[client.losses().length - 1] < client.losses()[0] - 0.05,
          "the model learns: " + client.losses()[0] + " -> "
              + client.losses()[client.losses().length - 1]);
      assertArrayEquals(client.rows(), shards.rows(), 1e-4f);
    } finally {
      servers.forEach(TableServer::close);
    }
  }

  @Test
  void pooledInProcess_trainsAsClientPooling() {
    Run client;
    Run local;
    try (TableClient tables = TableClients.inProcess(dir)) {
      client = train(tables, false);
      local = train(tables, true);
    }
    assertArrayEquals(client.losses(), local.losses(), 1e-4);
    assertArrayEquals(client.rows(), local.rows(), 1e-4f);
  }
}
