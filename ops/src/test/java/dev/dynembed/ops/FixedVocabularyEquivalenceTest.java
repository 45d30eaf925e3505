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
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A model over dynamicEmbeddingLookup + table-side SGD gives the same losses and final rows as the
 * same model over a dense [V, d] variable and SGD, on the same batches.
 *
 * <p>The dense model selects rows as {@code onehot(idx) . E}, not with {@code gather}: in ND4J
 * 1.0.0-M2.1 the backward of SameDiff's gather drops the contributions of duplicate indices
 * (indices [0, 0, 0, 1] give dE[0] = 1 instead of 3), which batches of words always contain.
 */
class FixedVocabularyEquivalenceTest {
  static final int V = 30;
  static final int D = 6;
  static final int C = 4;
  static final int B = 8;
  static final int S = 3;
  static final float LR = 0.2f;

  @TempDir Path dir;

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void dynamicLookup_sameBatches_sameLossesAndRowsAsGather(int shards) throws Exception {
    List<TableServer> servers = new ArrayList<>();
    List<String> endpoints = new ArrayList<>();
    for (int i = 0; i < shards; i++) {
      TableServer s = new TableServer(new ShardEngine(i, shards, dir), "127.0.0.1", 0, 2);
      servers.add(s);
      endpoints.add("127.0.0.1:" + s.port());
    }
    try (TableClient tables = shards == 0 ? TableClients.inProcess(dir)
        : TableClients.connect(endpoints)) {
      String table = "equiv" + shards;
      EmbeddingTable emb = tables.createTable(TableConfigs.builder(table, D)
          .setOptimizer(TableConfigs.sgd(LR))
          .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 9)).build());
      String[] vocab = new String[V];
      for (int i = 0; i < V; i++) {
        vocab[i] = "w" + i;
      }
      float[] init = emb.findOrInsert(vocab); // the table's own initial rows seed the dense model
      INDArray w0 = Nd4j.rand(DataType.FLOAT, D, C).subi(0.5);

      // dynamic model
      SameDiff dyn = SameDiff.create();
      SDVariable keys = dyn.placeHolder("keys", DataType.UTF8, B, S);
      SDVariable labels1 = dyn.placeHolder("labels", DataType.FLOAT, B, C);
      SDVariable rows = new DynEmbed(dyn).dynamicEmbeddingLookup("rows", keys, emb, true);
      SDVariable w1 = dyn.var("w", w0.dup());
      SDVariable loss1 = dyn.loss().softmaxCrossEntropy("loss", labels1,
          rows.sum(1).mmul(w1), null);
      dyn.setLossVariables(loss1);

      // fixed-vocabulary model
      SameDiff fix = SameDiff.create();
      SDVariable idx = fix.placeHolder("idx", DataType.INT, B, S);
      SDVariable labels2 = fix.placeHolder("labels", DataType.FLOAT, B, C);
      SDVariable e = fix.var("E", Nd4j.create(init, new long[] {V, D}, 'c'));
      SDVariable w2 = fix.var("w", w0.dup());
      SDVariable picked = fix.oneHot("onehot", idx, V, -1, 1.0, 0.0, DataType.FLOAT)
          .reshape(B * S, V).mmul(e).reshape(B, S, D); // = gather(E, idx), with a correct backward
      SDVariable loss2 = fix.loss().softmaxCrossEntropy("loss", labels2,
          picked.sum(1).mmul(w2), null);
      fix.setLossVariables(loss2);

      Random rnd = new Random(5);
      for (int step = 1; step <= 15; step++) {
        String[][] k = new String[B][S];
        int[][] ix = new int[B][S];
        float[][] lab = new float[B][C];
        for (int b = 0; b < B; b++) {
          for (int s = 0; s < S; s++) {
            ix[b][s] = rnd.nextInt(V / 2) * (rnd.nextBoolean() ? 1 : 2) % V; // duplicates likely
            k[b][s] = vocab[ix[b][s]];
          }
          lab[b][rnd.nextInt(C)] = 1f;
        }
        INDArray labels = Nd4j.createFromArray(lab);
        Map<String, INDArray> ph1 = new HashMap<>(Map.of("keys", Strings.matrix(k), "labels", labels));
        Map<String, INDArray> ph2 = new HashMap<>(Map.of("idx", Nd4j.createFromArray(ix),
            "labels", labels));
        double l1 = dyn.output(ph1, "loss").get("loss").getDouble(0);
        double l2 = fix.output(ph2, "loss").get("loss").getDouble(0);
        assertEquals(l2, l1, 1e-5, "loss at step " + step);
        GraphTables.of(dyn).setDetachedSettings(0f, step, 0, true);
        Map<String, INDArray> g1 = dyn.calculateGradients(ph1, "w", DynEmbed.handleName(dyn, emb));
        Map<String, INDArray> g2 = fix.calculateGradients(ph2, "w", "E");
        w1.getArr().subi(g1.get("w").mul(LR));
        w2.getArr().subi(g2.get("w").mul(LR));
        e.getArr().subi(g2.get("E").mul(LR));
      }
      float[] finalRows = emb.find(vocab).rows();
      float[] dense = e.getArr().dup('c').data().asFloat();
      for (int i = 0; i < finalRows.length; i++) {
        assertEquals(dense[i], finalRows[i], 1e-5, "row " + vocab[i / D] + " column " + i % D);
      }
    } finally {
      servers.forEach(TableServer::close);
    }
  }
}
