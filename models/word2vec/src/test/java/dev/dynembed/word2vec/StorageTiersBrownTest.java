package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 15's acceptance runs on real data: word2vec on Brown (5 epochs) with tables 4x larger
 * than their memory cap (the disk tier holds the rest), and with the tables in Redis (the
 * optimizer in the trainer), each reaches the WordSim-353 of the in-memory run within noise.
 * About 3 minutes, so tagged {@code brown} and left out of {@code mvn verify}; CI runs it.
 * Each run is held to the in-memory run's final loss and WordSim-353, within the noise measured
 * on Brown ({@link MultiWorkerBrownTest#assertSameQuality}).
 */
@Tag("brown")
class StorageTiersBrownTest {
  static final Path DATA = MultiWorkerBrownTest.DATA;
  @TempDir static Path dir;
  static double inMemory;
  static double inMemoryLoss;
  static long inMemoryOutFrequency;

  private static Word2VecConfig config(long maxBytes, boolean diskTier) {
    Word2VecConfig d = Word2VecConfig.defaults();
    return new Word2VecConfig(d.dim(), d.window(), d.negative(), d.sample(), d.minCount(),
        d.epochs(), d.alpha(), d.optimizer(), d.batchPairs(), d.seed(), d.name(),
        d.negativePool(), d.implicitSteps(), d.countPass(), maxBytes, diskTier);
  }

  private static Word2Vec.Result train(Word2VecConfig cfg, TableClient c, Path model) {
    return new Word2Vec(cfg, c, 2).train(List.of(DATA.resolve("brown.txt")),
        new Word2Vec.TrainOptions(model, 0, false, false, 0, 0), s -> {});
  }

  @BeforeAll
  static void inMemoryRun() {
    MultiWorkerBrownTest.requireCorpora();
    Path model = dir.resolve("memory");
    try (TableClient c = TableClients.inProcess(model)) {
      inMemoryLoss = finalLoss(train(config(0, false), c, model));
      inMemoryOutFrequency = c.openTable(config(0, false).outTable()).describe().getCounters()
          .getTotalFrequency();
    }
    inMemory = MultiWorkerBrownTest.wordSim(model);
    System.err.printf("in memory on Brown: WordSim-353 %.3f, final loss %.4f%n", inMemory,
        inMemoryLoss);
  }

  static double finalLoss(Word2Vec.Result r) {
    assertTrue(!Double.isNaN(r.finalLoss()), "the run recorded no loss");
    return r.finalLoss();
  }

  static void assertInMemoryQuality(String what, double wordSim, double loss) {
    MultiWorkerBrownTest.assertSameQuality(what, wordSim, loss, "in memory", inMemory,
        inMemoryLoss);
  }

  @Test
  void tablesFourTimesTheirMemoryCap_onTheDiskTier_reachInMemoryQuality() {
    Path model = dir.resolve("disk");
    Word2VecConfig cfg = config(2L << 20, true); // 2 MiB per table: ~12 MiB of rows each
    TableCounters in;
    double loss;
    try (TableClient c = TableClients.inProcess(model)) {
      loss = finalLoss(train(cfg, c, model));
      in = c.openTable(cfg.inTable()).describe().getCounters();
    }
    double disk = MultiWorkerBrownTest.wordSim(model);
    System.err.printf("disk tier on Brown: WordSim-353 %.3f vs %.3f in memory; input table %,d"
        + " rows, %,d on disk, %,d demotions, %,d promotions%n", disk, inMemory, in.getKeys(),
        in.getColdKeys(), in.getDemotions(), in.getPromotions());
    assertTrue(in.getKeys() >= 4 * (in.getKeys() - in.getColdKeys()),
        "the table is 4x what memory holds: " + in);
    assertTrue(in.getPromotions() > 0 && in.getDemotions() > in.getColdKeys(), in.toString());
    assertInMemoryQuality("disk tier", disk, loss);
  }

  /**
   * Issue 33: Redis under 2 optimizing shard processes, tables capped at 2 MiB of memory each:
   * the words the cap pushes out live in Redis only and come back when next seen, every changed
   * row is written behind; the quality is the in-memory run's.
   */
  @Test
  void tablesOverRedisUnderTwoShards_fourTimesTheirMemoryCap_reachInMemoryQuality()
      throws Exception {
    Path model = dir.resolve("redis-tier");
    Word2VecConfig cfg = config(2L << 20, false).toBuilder().redisTier(true).build();
    TableCounters in;
    TableCounters outCounters;
    double loss;
    try (dev.dynembed.table.redis.LocalRedis redis = dev.dynembed.table.redis.LocalRedis.single();
        dev.dynembed.table.tools.LocalShardProcesses procs =
            new dev.dynembed.table.tools.LocalShardProcesses(2, 0, model, "1g", "", List.of(),
                List.of("--redis-tier", redis.uri()));
        TableClient c = TableClients.connect(procs.endpoints())) {
      loss = finalLoss(train(cfg, c, model));
      in = c.openTable(cfg.inTable()).describe().getCounters();
      outCounters = c.openTable(cfg.outTable()).describe().getCounters();
    }
    double viaRedisTier = MultiWorkerBrownTest.wordSim(model);
    // the counts too (issue 50: a CI run ended 4.2% above the in-memory loss once; counts that
    // drift across demotions would change the negatives' distribution, and so the loss)
    System.err.printf("shards over Redis on Brown: WordSim-353 %.3f vs %.3f in memory; input"
        + " table %,d rows, %,d only in Redis, %,d demotions, %,d promotions, %,d rows written"
        + " behind; output table total frequency %,d (in memory %,d)%n", viaRedisTier, inMemory,
        in.getKeys(), in.getColdKeys(), in.getDemotions(), in.getPromotions(),
        in.getWrittenBehind(), outCounters.getTotalFrequency(), inMemoryOutFrequency);
    assertTrue(in.getKeys() >= 4 * (in.getKeys() - in.getColdKeys()),
        "the table is 4x what memory holds: " + in);
    assertTrue(in.getPromotions() > 0 && in.getWrittenBehind() > 0, in.toString());
    assertInMemoryQuality("shards over Redis", viaRedisTier, loss);
  }

  /**
   * Issue 30: word2vec on 2 replicated shards (one follower each, sync replication) loses the
   * primary of shard 0 with its state directory about a third of the way through; the follower
   * takes over, the trainer's calls are resent to it (no --resume), the lost process comes back
   * as a follower, and the run reaches the in-memory run's quality.
   */
  @Test
  void twoReplicatedShards_loseAPrimaryAndItsDiskMidRun_reachInMemoryQuality()
      throws Exception {
    Path model = dir.resolve("replicated");
    long trainedAt;
    long killedAt;
    double loss;
    try (dev.dynembed.table.tools.LocalShardProcesses procs =
            dev.dynembed.table.tools.LocalShardProcesses.replicated(2, 1, "sync", model, "1g",
                "", List.of(), List.of());
        TableClient c = TableClients.open(procs.spec(), ClientOptions.builder()
            .retryFor(java.time.Duration.ofMinutes(3)).build())) {
      java.util.concurrent.ExecutorService pool =
          java.util.concurrent.Executors.newSingleThreadExecutor();
      java.util.concurrent.Future<Long> killer = pool.submit(() -> {
        Thread.sleep(45_000);
        return procs.killPrimary(0, true);
      });
      loss = finalLoss(train(config(0, false), c, model));
      trainedAt = System.nanoTime();
      killedAt = killer.get();
      pool.shutdown();
      System.err.printf("replicated shards on Brown: primary of shard 0 killed with its disk"
          + " %.0f s before the end; cluster now:%n%s", (trainedAt - killedAt) / 1e9,
          procs.status().format());
    }
    assertTrue(killedAt < trainedAt - 10_000_000_000L, "the kill came after training ended");
    double replicated = MultiWorkerBrownTest.wordSim(model);
    assertInMemoryQuality("replicated shards", replicated, loss);
  }

  @Test
  void tablesInRedis_reachInMemoryQuality() {
    Path model = dir.resolve("redis");
    double loss;
    try (dev.dynembed.table.redis.LocalRedis redis = dev.dynembed.table.redis.LocalRedis.single();
        TableClient c = TableClients.open(redis.uri(), ClientOptions.DEFAULTS)) {
      Word2Vec.Result r = train(config(0, false), c, model);
      loss = finalLoss(r);
      assertEquals(r.vocabulary(), c.openTable("w2v_out").describe().getCounters().getKeys());
    }
    double viaRedis = MultiWorkerBrownTest.wordSim(model);
    MultiWorkerBrownTest.assertSameQuality("Redis backend", viaRedis, loss, "in memory",
        inMemory, inMemoryLoss, MultiWorkerBrownTest.LOSSY_BACKEND_LOSS_BAND);
  }
}
