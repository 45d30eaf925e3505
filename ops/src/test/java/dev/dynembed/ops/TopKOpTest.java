package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.server.TableServer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

class TopKOpTest {
  @TempDir Path dir;

  @Test
  void topK_overTwoShards_matchesBruteForceScan() throws Exception {
    List<TableServer> servers = new ArrayList<>();
    List<String> endpoints = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      TableServer s = new TableServer(new ShardEngine(i, 2, dir), "127.0.0.1", 0, 2);
      servers.add(s);
      endpoints.add("127.0.0.1:" + s.port());
    }
    try (TableClient c = TableClients.connect(endpoints)) {
      EmbeddingTable emb = c.createTable(TableConfigs.builder("nn", 5)
          .setInitializer(TableConfigs.normal(0f, 1f, 4)).build());
      String[] vocab = IntStream.range(0, 500).mapToObj(i -> "w" + i).toArray(String[]::new);
      float[] rows = emb.findOrInsert(vocab);
      SameDiff sd = SameDiff.create();
      SDVariable q = sd.placeHolder("q", DataType.FLOAT, -1, 5);
      SDVariable[] out = new DynEmbed(sd).topK("nn", q, emb, 4, false, false);
      INDArray queries = Nd4j.rand(DataType.FLOAT, 3, 5).subi(0.5);
      Map<String, INDArray> r = sd.output(Map.of("q", queries), "nn_keys", "nn_scores");
      INDArray keys = r.get("nn_keys");
      INDArray scores = r.get("nn_scores");
      assertEquals(DataType.UTF8, keys.dataType());
      for (int b = 0; b < 3; b++) {
        final int qb = b;
        double[] qv = queries.getRow(b).toDoubleVector();
        double[] score = new double[vocab.length];
        for (int w = 0; w < vocab.length; w++) {
          for (int j = 0; j < 5; j++) {
            score[w] += qv[j] * rows[w * 5 + j];
          }
        }
        List<Integer> best = IntStream.range(0, vocab.length).boxed()
            .sorted(Comparator.comparingDouble(w -> -score[w])).limit(4).toList();
        for (int j = 0; j < 4; j++) {
          assertEquals(vocab[best.get(j)], keys.getString(qb * 4 + j), "query " + b + " rank " + j);
          assertEquals(score[best.get(j)], scores.getDouble(b, j), 1e-4);
        }
      }
    } finally {
      servers.forEach(TableServer::close);
    }
  }
}
