package dev.dynembed.bownet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.job.JobCoordinator;
import dev.dynembed.job.LocalEtcd;
import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bow_net as a job of 2 workers (each with its own table client, as separate processes would be)
 * on 2 shard processes, coordinated by a real etcd: the dense layers are averaged through the
 * table service after every epoch, so both workers hold the same model then: they score the
 * held-out lines identically at every epoch, and as well as one process does.
 */
class BowNetJobTest {
  @Test
  void twoWorkers_averageTheirDenseLayers_andEvaluateTheSameModelEveryEpoch(@TempDir Path dir)
      throws Exception {
    Random r = new Random(5);
    List<Path> train = new ArrayList<>();
    for (int f = 0; f < 4; f++) {
      train.add(BowNetTest.write(dir, "train-" + f + ".txt", 400, r));
    }
    List<Path> test = List.of(BowNetTest.write(dir, "test.txt", 400, r));
    FeedDescription desc = FeedDescription.parse(BowNetTest.DESC);
    BowNet.Config cfg = BowNet.Config.wholeLines("bowjob", 64, 64, true, false);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try (LocalEtcd etcd = new LocalEtcd();
        LocalShardProcesses shards = new LocalShardProcesses(2, 0, dir.resolve("shards"),
            "256m", "")) {
      List<Future<List<BowNet.Accuracy>>> workers = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        int index = i;
        workers.add(pool.submit(() -> {
          List<BowNet.Accuracy> seen = new ArrayList<>();
          try (TableClient c = TableClients.connect(shards.endpoints());
              JobCoordinator job = JobCoordinator.join(etcd.endpoint(), "bowjob", 2, index,
                  Map.of("model", cfg.toString()), new JobCoordinator.Options(
                      Duration.ofSeconds(5), Duration.ofSeconds(60), Duration.ofSeconds(120)))) {
            BowNet net = new BowNet(cfg, desc, BowNetTest.LABELS, c, 1, job.leader());
            net.trainAsWorker(train, test, 4, job, c, (e, own, acc, secs) -> seen.add(acc));
            job.finish();
          }
          return seen;
        }));
      }
      List<BowNet.Accuracy> a = workers.get(0).get();
      List<BowNet.Accuracy> b = workers.get(1).get();
      assertEquals(4, a.size());
      assertEquals(a, b, "after each average both workers hold one model");
      double last = a.get(3).value();
      assertTrue(last > 0.85, "held-out accuracy of the job's model " + a);
    } finally {
      pool.shutdownNow();
    }
  }
}
