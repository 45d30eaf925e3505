package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.RowTraffic;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 55's quality bar: word2vec on Brown (5 epochs, 2 threads) through 2 shard processes with
 * the trainer's row cache (docs/design/0022-row-cache.md) reaches the in-memory run's quality
 * within the Brown tests' bands ({@link MultiWorkerBrownTest#assertSameQuality}), for the default
 * staleness bound and for one four times larger; and at least 3x fewer rows cross per trained word
 * than the same run without a cache moves (3.29 rows a word on Brown, measured; the benchmark,
 * docs/benchmarks.md, reports the factor: about 4 at the default).
 * Minutes, so tagged {@code brown}; CI runs it.
 */
@Tag("brown")
class RowCacheBrownTest {
  static final Path DATA = MultiWorkerBrownTest.DATA;
  @TempDir static Path dir;
  static double inMemory;
  static double inMemoryLoss;

  private static Word2Vec.Result train(TableClient c, Path model, Word2Vec[] out) {
    Word2Vec w = new Word2Vec(Word2VecConfig.defaults(), c, 2);
    out[0] = w;
    return w.train(List.of(DATA.resolve("brown.txt")),
        new Word2Vec.TrainOptions(model, 0, false, false, 0, 0), s -> {});
  }

  @BeforeAll
  static void inMemoryRun() {
    MultiWorkerBrownTest.requireCorpora();
    Path model = dir.resolve("memory");
    try (TableClient c = TableClients.inProcess(model)) {
      inMemoryLoss = StorageTiersBrownTest.finalLoss(train(c, model, new Word2Vec[1]));
    }
    inMemory = MultiWorkerBrownTest.wordSim(model);
  }

  @ParameterizedTest
  @ValueSource(ints = {dev.dynembed.table.tools.cli.ConnectionOptions.DEFAULT_MAX_STALENESS,
      4 * dev.dynembed.table.tools.cli.ConnectionOptions.DEFAULT_MAX_STALENESS})
  void twoShardsWithARowCache_reachInMemoryQuality_movingAThirdOfTheRowsAtMost(int staleness)
      throws Exception {
    Path model = dir.resolve("cache-" + staleness);
    Word2Vec[] w = new Word2Vec[1];
    double loss;
    try (dev.dynembed.table.tools.LocalShardProcesses procs =
            new dev.dynembed.table.tools.LocalShardProcesses(2, 0, model, "1g", "");
        TableClient c = TableClients.connect(procs.endpoints(), ClientOptions.builder()
            .rowCache(new ClientOptions.RowCaching(64L << 20, staleness)).build())) {
      Word2Vec.Result r = train(c, model, w);
      loss = StorageTiersBrownTest.finalLoss(r);
      RowTraffic t = w[0].traffic();
      double perWord = (double) (t.rowsRead() + t.rowsWritten()) / r.words();
      System.err.printf("row cache S = %d on Brown: %.3f rows crossed per trained word, hit rate"
          + " %.3f, %d flushes%n", staleness, perWord, t.hitRate(), t.flushes());
      assertTrue(perWord < 3.29 / 3, "rows per trained word: " + perWord + " (" + t + ")");
    }
    MultiWorkerBrownTest.assertSameQuality("row cache S = " + staleness,
        MultiWorkerBrownTest.wordSim(model), loss, "in memory", inMemory, inMemoryLoss);
  }
}
