package dev.dynembed.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.ops.GraphTables;
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
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.learning.config.Sgd;

/**
 * What a pipelined step reads. A counter model makes every row's value the number of updates it
 * has received: SGD at learning rate 1 on a zero-initialised table, loss = -(sum of the rows
 * read), so every step adds exactly 1 to each column of each key it reads, and the loss of a step
 * is minus the total of the values it read. Without pipelining a key read by every step reads t
 * at step t (0-based). With pipelining the step's reads were made while the previous step's
 * gradients were still in flight; the step replays its own trainer's in-flight update on them,
 * so it must read exactly the same values, in process and on shards.
 */
class PipelineTest {
  @TempDir Path dir;

  static final int DIM = 4;
  static final int STEPS = 60;

  private static double[] lossesOf(TableClient tables, boolean pipelining) {
    EmbeddingTable t = tables.createTable(TableConfigs.builder("count", DIM)
        .setOptimizer(TableConfigs.sgd(1f)).setInitializer(TableConfigs.zeros()).build());
    SameDiff sd = SameDiff.create();
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, -1);
    SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", keys, t, true);
    sd.updateVariableNameAndReference(rows.sum().neg(), "loss");
    Trainer trainer = new Trainer(sd, "loss", new Sgd(0), List.of(t)).setPipelining(pipelining);
    List<Map<String, INDArray>> batches = new ArrayList<>();
    for (int s = 0; s < STEPS; s++) {
      // "every" in every step, and keys spread over both shards of a 2-shard deployment
      batches.add(Map.of("keys", KeyArrays.of(new String[] {"every", "k" + s, "k" + (s + 1)})));
    }
    double[] losses = new double[STEPS];
    for (int s = 0; s < STEPS; s++) {
      Map<String, INDArray> next = s + 1 < STEPS ? batches.get(s + 1) : null;
      losses[s] = trainer.step(batches.get(s), 0f, List.of(), next, 0f).get("loss");
    }
    trainer.flush();
    // after the flush every update is applied: "every" holds one per step
    for (float v : t.find("every").rows()) {
      assertEquals(STEPS, v);
    }
    long[] reads = GraphTables.of(sd).plannedReadCounts();
    assertEquals(pipelining ? STEPS : 0, reads[0], "reads made ahead");
    return losses;
  }

  /** What step s reads with every earlier update applied: "every" s, k_s one (from step s - 1). */
  private static double expectedLoss(int s) {
    return -DIM * (s + (s >= 1 ? 1 : 0)) + 0.0;
  }

  /**
   * With a trainer-side row cache (docs/design/0022-row-cache.md; S = 4, so rows are served
   * from it, refreshed and flushed many times in 60 steps) a single trainer reads exactly the
   * same: its own updates are applied to the cached rows at once, pipelined or not.
   */
  @ParameterizedTest(name = "shards={0} pipelining={1} row cache S={2}")
  @CsvSource({"0, false, 0", "0, true, 0", "2, false, 0", "2, true, 0", "2, false, 4",
      "2, true, 4"})
  void step_readsEveryEarlierUpdate_withOrWithoutPipelining(int shards, boolean pipelining,
      int staleness) throws Exception {
    List<TableServer> servers = new ArrayList<>();
    try {
      TableClient tables;
      if (shards == 0) {
        tables = TableClients.inProcess(dir);
      } else {
        List<String> endpoints = new ArrayList<>();
        for (int i = 0; i < shards; i++) {
          TableServer srv = new TableServer(new ShardEngine(i, shards, dir), "127.0.0.1", 0, 2);
          servers.add(srv);
          endpoints.add("127.0.0.1:" + srv.port());
        }
        tables = TableClients.connect(endpoints, dev.dynembed.table.client.ClientOptions.builder()
            .rowCache(new dev.dynembed.table.client.ClientOptions.RowCaching(1 << 20, staleness))
            .build());
      }
      try (tables) {
        double[] losses = lossesOf(tables, pipelining);
        for (int s = 0; s < STEPS; s++) {
          assertEquals(expectedLoss(s), losses[s] + 0.0, "loss of step " + s); // -0.0 -> 0.0
        }
      }
    } finally {
      servers.forEach(TableServer::close);
    }
  }

  /**
   * A model with Adagrad (with duplicate keys per batch), SGD, a dense layer and sampled
   * negatives trains bit for bit alike with and without pipelining in process: the replay of the
   * previous step's updates on rows read ahead gives exactly what a fresh read gives.
   */
  @org.junit.jupiter.api.Test
  void pipelined_inProcess_trainsBitForBitAsUnpipelined() {
    List<double[]> losses = new ArrayList<>();
    List<float[]> states = new ArrayList<>();
    // one native thread per op: a parallel reduction's sum depends on how many threads it got.
    // (The ulp this test lost twice in CI, 2026-11-28 and -30, came from the sigmoid kernels'
    // exp, whose bits depended on the JIT tier until they became IEEE-only polynomials.) The
    // table's own arithmetic (RowOptimizer, on both sides of the pipeline) is plain Java
    int threads = org.nd4j.linalg.factory.Nd4j.getEnvironment().maxThreads();
    org.nd4j.linalg.factory.Nd4j.getEnvironment().setMaxThreads(1);
    try {
      trainBothWays(losses, states);
    } finally {
      org.nd4j.linalg.factory.Nd4j.getEnvironment().setMaxThreads(threads);
    }
    org.junit.jupiter.api.Assertions.assertArrayEquals(losses.get(0), losses.get(1));
    org.junit.jupiter.api.Assertions.assertArrayEquals(states.get(0), states.get(1));
  }

  private void trainBothWays(List<double[]> losses, List<float[]> states) {
    for (boolean pipelining : new boolean[] {false, true}) {
      try (TableClient tables = TableClients.inProcess(dir)) {
        TrainerTest.Model m = new TrainerTest.Model(tables, "bit_");
        m.trainer.setPipelining(pipelining);
        java.util.Random data = new java.util.Random(9);
        List<Map<String, INDArray>> batches = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
          batches.add(m.batch(data));
        }
        double[] l = new double[batches.size()];
        for (int i = 0; i < l.length; i++) {
          Map<String, INDArray> next = i + 1 < l.length ? batches.get(i + 1) : null;
          l[i] = m.trainer.step(batches.get(i), 0f, List.of(), next, 0f).get("loss");
        }
        m.trainer.flush();
        assertEquals(pipelining ? l.length : 0,
            GraphTables.of(m.sd).plannedReadCounts()[0] / 2, "steps whose reads were ahead");
        losses.add(l);
        states.add(m.state());
      }
    }
  }
}
