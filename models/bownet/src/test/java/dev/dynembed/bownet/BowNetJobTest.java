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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bow_net as a job of 2 workers (each with its own table client, as separate processes would be)
 * on 2 shard processes, coordinated by a real etcd: the dense layers are averaged through the
 * table service after every epoch, so both workers hold the same model then: they score the
 * held-out lines identically at every epoch, and as well as one process does.
 */
@Tag("etcd")
class BowNetJobTest {
  /** What one worker of a test job does once it has its table client and membership. */
  interface WorkerBody {
    List<BowNet.Accuracy> run(int index, TableClient c, JobCoordinator job, BowNet net,
        List<Path> train, List<Path> test) throws Exception;
  }

  /**
   * A job of {@code workers} threads (each with its own table client and membership, as
   * separate processes would have) on 2 shard processes and a real etcd, over {@code files}
   * training files of {@code lines} lines; each worker's accuracies, by index.
   */
  static List<List<BowNet.Accuracy>> job(Path dir, String name, int workers, boolean elastic,
      int files, int lines, WorkerBody body) throws Exception {
    Random r = new Random(5);
    List<Path> train = new ArrayList<>();
    for (int f = 0; f < files; f++) {
      train.add(BowNetTest.write(dir, "train-" + f + ".txt", lines, r));
    }
    List<Path> test = List.of(BowNetTest.write(dir, "test.txt", 400, r));
    FeedDescription desc = FeedDescription.parse(BowNetTest.DESC);
    BowNet.Config cfg = BowNet.Config.wholeLines(name, 64, 64, true, false);
    ExecutorService pool = Executors.newFixedThreadPool(workers);
    try (LocalEtcd etcd = new LocalEtcd();
        LocalShardProcesses shards = new LocalShardProcesses(2, 0, dir.resolve("shards"),
            "256m", "")) {
      List<Future<List<BowNet.Accuracy>>> running = new ArrayList<>();
      for (int i = 0; i < workers; i++) {
        int index = i;
        running.add(pool.submit(() -> {
          try (TableClient c = TableClients.connect(shards.endpoints());
              JobCoordinator job = JobCoordinator.join(etcd.endpoint(), name, workers, index,
                  Map.of("model", cfg.toString()), new JobCoordinator.Options(
                      Duration.ofSeconds(elastic ? 2 : 5), Duration.ofSeconds(60),
                      Duration.ofSeconds(120), elastic))) {
            BowNet net = new BowNet(cfg, desc, BowNetTest.LABELS, c, 1, job.leader());
            return body.run(index, c, job, net, train, test);
          }
        }));
      }
      List<List<BowNet.Accuracy>> seen = new ArrayList<>();
      for (Future<List<BowNet.Accuracy>> f : running) {
        seen.add(f.get());
      }
      return seen;
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void twoWorkers_averageTheirDenseLayers_andEvaluateTheSameModelEveryEpoch(@TempDir Path dir)
      throws Exception {
    List<List<BowNet.Accuracy>> seen = job(dir, "bowjob", 2, false, 4, 400,
        (index, c, job, net, train, test) -> {
          List<BowNet.Accuracy> acc = new ArrayList<>();
          net.trainAsWorker(train, test, 4, job, c, (e, own, a, secs) -> acc.add(a));
          job.finish();
          return acc;
        });
    List<BowNet.Accuracy> a = seen.get(0);
    assertEquals(4, a.size());
    assertEquals(a, seen.get(1), "after each average both workers hold one model");
    double last = a.get(3).value();
    assertTrue(last > 0.85, "held-out accuracy of the job's model " + a);
  }

  /**
   * An elastic job of 3 that loses a worker after its first epoch (it closes its membership, as
   * a stopped process's lease would end): the other two deal its files between them from then
   * on, average over the two of them, and keep holding one model.
   */
  @Test
  void anElasticJobLosesAWorker_theOthersTakeItsFiles_andStillHoldOneModel(@TempDir Path dir)
      throws Exception {
    long[][] steps = new long[3][5];
    List<List<BowNet.Accuracy>> seen = job(dir, "bowel", 3, true, 6, 300,
        (index, c, job, net, train, test) -> {
          List<BowNet.Accuracy> acc = new ArrayList<>();
          try {
            net.trainAsWorker(train, test, 4, job, c, (e, own, a, secs) -> {
              acc.add(a);
              steps[index][e] = own.steps();
              if (index == 2 && e == 1) {
                job.close(); // leaves before the epoch's last barrier
                throw new IllegalStateException("worker 2 left");
              }
            });
          } catch (IllegalStateException left) {
            return acc;
          }
          job.finish();
          return acc;
        });
    List<BowNet.Accuracy> a = seen.get(0);
    List<BowNet.Accuracy> gone = seen.get(2);
    assertEquals(1, gone.size(), "worker 2 left after its first epoch");
    assertEquals(4, a.size());
    assertEquals(a, seen.get(1), "after each average both remaining workers hold one model");
    assertEquals(a.get(0), gone.get(0), "all three held one model after epoch 1");
    // 6 equal files: 2 per worker in epoch 1, 3 per remaining worker from epoch 2 on
    for (int w = 0; w < 2; w++) {
      assertTrue(steps[w][1] > 0, "worker " + w + " trained in epoch 1");
      assertEquals(steps[w][1] * 3, steps[w][2] * 2, "worker " + w + " took worker 2's files");
    }
    double last = a.get(3).value();
    assertTrue(last > 0.85, "held-out accuracy of the job's model " + a);
  }
}
