package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.job.LocalEtcd;
import dev.dynembed.layers.Trainer;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Many trainers, one table, all real: an etcd, 2 shard processes and 2 {@code bin/word2vec train
 * --coordinator} worker processes on loopback (docs/design/0013-many-trainers.md). The corpus is
 * the synthetic two-topic one of {@link Word2VecTest}, larger, so that it is always at hand; the
 * Brown/WordSim-353 comparison is {@code bin/word2vec-bench --workers}'s (run by CI).
 */
@Tag("etcd")
class MultiWorkerTest {
  @TempDir static Path dir;
  static LocalEtcd etcd;
  static LocalShardProcesses shards;
  static Path corpus;
  static final int LINES = 16000;
  /** Words of the corpus: every one is frequent enough to be trained (10 a line). */
  static final long CORPUS_WORDS = LINES * 10L;

  @BeforeAll
  static void start() throws Exception {
    etcd = new LocalEtcd();
    shards = new LocalShardProcesses(2, 0, dir, "512m", "");
    Random r = new Random(11);
    StringBuilder b = new StringBuilder();
    for (int s = 0; s < LINES; s++) {
      String[] topic = r.nextBoolean() ? Word2VecTest.ANIMALS : Word2VecTest.METALS;
      for (int i = 0; i < 10; i++) {
        b.append(r.nextInt(3) == 0 ? Word2VecTest.FUNCTION[r.nextInt(5)]
            : topic[r.nextInt(topic.length)]).append(' ');
      }
      b.append('\n');
    }
    corpus = dir.resolve("topics.txt");
    Files.writeString(corpus, b.toString());
  }

  @AfterAll
  static void stop() {
    if (shards != null) {
      shards.close();
    }
    if (etcd != null) {
      etcd.close();
    }
  }

  /** A {@code word2vec train} worker process of job {@code job}. */
  static Process worker(String job, String name, int index, long leaseSeconds, String... extra)
      throws Exception {
    return worker(job, name, index, 2, leaseSeconds, extra);
  }

  /** As above, in a job of {@code workers} workers. */
  static Process worker(String job, String name, int index, int workers, long leaseSeconds,
      String... extra) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx1g",
        "--add-modules", "jdk.incubator.vector", "-cp", System.getProperty("java.class.path"),
        Word2VecCli.class.getName(), "train", "--input", corpus.toString(),
        "--model", dir.resolve(name + "-w" + index).toString(),
        "--endpoints", String.join(",", shards.endpoints()), "--coordinator", etcd.endpoint(),
        "--workers", String.valueOf(workers), "--worker-index", String.valueOf(index), "--job", job, "--lease-seconds", String.valueOf(leaseSeconds),
        "--threads", "1", "--name", name, "--dim", "16", "--window", "3", "--negative", "5",
        "--sample", "0", "--min-count", "5", "--batch", "1024", "--seed", "3"));
    cmd.addAll(Arrays.asList(extra));
    return new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(dir.resolve(name + "-w" + index + "-" + System.nanoTime() + ".log")
            .toFile()).start();
  }

  static String log(Process p) throws Exception {
    String s = "";
    try (var files = Files.list(dir)) {
      for (Path f : files.filter(f -> f.toString().endsWith(".log")).sorted().toList()) {
        s += "== " + f.getFileName() + "\n" + Files.readString(f, StandardCharsets.UTF_8);
      }
    }
    return s;
  }

  static void awaitBoth(Process a, Process b, int seconds) throws Exception {
    awaitAll(List.of(a, b), seconds);
  }

  /**
   * Workers 0..n-1 of elastic job {@code job} (its tables named after it too), {@code epochs}
   * epochs, leases of {@code lease} seconds.
   */
  static List<Process> elasticJob(String job, int n, long lease, int epochs, String... extra)
      throws Exception {
    List<Process> w = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      List<String> args = new ArrayList<>(List.of("--epochs", String.valueOf(epochs),
          "--elastic"));
      args.addAll(Arrays.asList(extra));
      w.add(worker(job, job, i, n, lease, args.toArray(new String[0])));
    }
    return w;
  }

  /** Waits for every worker to end, and fails unless each succeeded. */
  static void awaitAll(List<Process> workers, int seconds) throws Exception {
    for (Process p : workers) {
      assertTrue(p.waitFor(seconds, TimeUnit.SECONDS), "a worker did not end:\n" + log(p));
      assertEquals(0, p.exitValue(), "a worker failed:\n" + log(p));
    }
  }

  static Map<String, float[]> rows(EmbeddingTable t) {
    Map<String, float[]> m = new HashMap<>();
    t.scan(1000, page -> {
      for (int i = 0; i < page.keys().length; i++) {
        m.put(page.keys()[i], Arrays.copyOfRange(page.rows(), i * t.dim(), (i + 1) * t.dim()));
      }
    });
    return m;
  }

  static void assertSameRows(Map<String, float[]> want, Map<String, float[]> got, String what) {
    assertEquals(want.keySet(), got.keySet(), what + ": keys");
    for (Map.Entry<String, float[]> e : want.entrySet()) {
      assertArrayEquals(e.getValue(), got.get(e.getKey()), what + ": row of " + e.getKey());
    }
  }

  /** Mean cosine within a topic minus mean cosine across topics. */
  static double separation(Path model) {
    try (Queries q = new Queries(model)) {
      String[] a = Word2VecTest.ANIMALS;
      String[] m = Word2VecTest.METALS;
      double within = 0;
      double across = 0;
      for (int i = 0; i < a.length; i++) {
        for (int j = 0; j < a.length; j++) {
          if (i != j) {
            within += Word2VecTest.cos(q.vector(a[i]), q.vector(a[j]))
                + Word2VecTest.cos(q.vector(m[i]), q.vector(m[j]));
          }
          across += 2 * Word2VecTest.cos(q.vector(a[i]), q.vector(m[j]));
        }
      }
      return within / (2 * a.length * (a.length - 1)) - across / (2 * a.length * a.length);
    }
  }

  @Test
  void twoWorkers_checkpointAtOneCut_restoreToIdenticalRows_resumeToOneProcessQuality()
      throws Exception {
    long t0 = System.nanoTime();
    // run A: both workers stop (after the leader's checkpoint) once 3 rounds of 4 are done
    awaitBoth(worker("cut", "cut", 0, 10, "--epochs", "3", "--stop-after-rounds", "3"),
        worker("cut", "cut", 1, 10, "--epochs", "3", "--stop-after-rounds", "3"), 240);
    Path leaderModel = dir.resolve("cut-w0");
    assertTrue(!Trainer.hasCheckpoint(dir.resolve("cut-w1").resolve(Word2Vec.CHECKPOINT)),
        "only the leader checkpoints");
    Path ckpt = leaderModel.resolve(Word2Vec.CHECKPOINT);
    Map<String, String> extra = Trainer.readExtras(ckpt);
    assertEquals("2", extra.get("workers"));
    assertEquals("0", extra.get("epoch"));
    assertEquals("6", extra.get("next_split"), "3 rounds of 2 byte ranges");
    long w0 = Long.parseLong(extra.get("worker.0.words"));
    long w1 = Long.parseLong(extra.get("worker.1.words"));
    assertTrue(w0 > 10_000 && w1 > 10_000, "both workers trained: " + w0 + ", " + w1);

    try (TableClient c = TableClients.connect(shards.endpoints())) {
      EmbeddingTable in = c.openTable("cut_in");
      EmbeddingTable out = c.openTable("cut_out");
      // nothing is written after the checkpoint barrier: the shards hold the cut
      Map<String, float[]> inAtCut = rows(in);
      Map<String, float[]> outAtCut = rows(out);
      assertEquals(21, outAtCut.size(), "every word of the corpus");
      // disturb the rows, then restore: every shard comes back to the cut, bit for bit
      String[] keys = inAtCut.keySet().toArray(new String[0]);
      in.applyGradients(keys, filled(keys.length * in.dim(), 7f), 1f, 1);
      assertNotEquals(inAtCut.get(keys[0])[0], rows(in).get(keys[0])[0]);
      Path tables = Trainer.latest(ckpt).resolve("tables");
      in.restore(tables);
      out.restore(tables);
      assertSameRows(inAtCut, rows(in), "cut_in restored");
      assertSameRows(outAtCut, rows(out), "cut_out restored");
    }

    // run B: the job resumes from the cut (the leader restores) and trains to the end
    awaitBoth(worker("cut", "cut", 0, 10, "--epochs", "3", "--resume"),
        worker("cut", "cut", 1, 10, "--epochs", "3", "--resume"), 240);
    Map<String, String> done = Trainer.readExtras(ckpt);
    assertEquals("true", done.get("complete"));
    assertEquals("3", done.get("epoch"));
    // 3 epochs of the corpus, shared between the two: each word trained once per epoch
    assertEveryWordOnce(jobWords(done), 3, CORPUS_WORDS / 100);
    double job = separation(leaderModel);

    // the same model trained by one process with 2 threads on an in-process table
    Path solo = dir.resolve("solo");
    assertEquals(0, Word2VecCli.run(new String[] {"train", "--input", corpus.toString(),
        "--model", solo.toString(), "--threads", "2", "--name", "cut", "--dim", "16", "--window",
        "3", "--negative", "5", "--sample", "0", "--min-count", "5", "--batch", "1024", "--seed",
        "3", "--epochs", "3"}, System.out, System.err));
    double one = separation(solo);
    System.err.printf("multi-worker: separation %.3f (2 workers) vs %.3f (1 process); %.0f s%n",
        job, one, (System.nanoTime() - t0) / 1e9);
    assertTrue(one > 0.3, "the one-process run separates the topics: " + one);
    assertTrue(job > one - 0.1, "2 workers separate the topics within noise of one process: "
        + job + " vs " + one);
  }

  @Test
  void aKilledWorkerStopsTheJobWithAMessageNamingIt() throws Exception {
    Process a = worker("kill", "kill", 0, 2, "--epochs", "200");
    Process b = worker("kill", "kill", 1, 2, "--epochs", "200");
    // wait until both train (their tables exist and grow), then kill -9 one of them
    killWhileTraining("kill_out", List.of(a, b), b, 2000);
    long killed = System.nanoTime();
    assertTrue(a.waitFor(60, TimeUnit.SECONDS), "the surviving worker did not stop:\n" + log(a));
    double seconds = (System.nanoTime() - killed) / 1e9;
    assertEquals(2, a.exitValue(), log(a));
    String out = log(a);
    assertTrue(out.matches("(?s).*word2vec: error: job kill stopped: worker [01] left the job:"
        + " its lease expired.*"), out);
    assertTrue(seconds < 30, "stopped " + seconds + " s after the kill");
  }

  /**
   * An elastic job of 3 workers loses its leader (SIGKILL) mid-run: the other two re-plan its
   * byte ranges at the round's barrier, worker 1 leads from then on, and the job trains the
   * corpus x epochs words (each range once: the killed worker's counters stop at its last
   * finished round, its unfinished ranges are trained again and counted by the others).
   */
  @Test
  void anElasticJobThatLosesAWorkerGoesOnAndTrainsEveryWordOfEveryEpoch() throws Exception {
    int epochs = 6;
    List<Process> w = elasticJob("elastic", 3, 2, epochs);
    killWhileTraining("elastic_out", w, w.get(0), 1000); // the leader
    awaitAll(w.subList(1, 3), 300); // the survivors
    String out = log(w.get(1));
    assertTrue(out.matches("(?s).*word2vec: worker 0 left job during round \\d+-\\d+\\S*; its 1"
        + " byte range\\(s\\) go to the 2 worker\\(s\\) still in it.*"), out);
    Path ckpt = dir.resolve("elastic-w1").resolve(Word2Vec.CHECKPOINT);
    assertTrue(Trainer.hasCheckpoint(ckpt), "worker 1 led after worker 0 left, and saved");
    Map<String, String> done = Trainer.readExtras(ckpt);
    assertEquals("true", done.get("complete"));
    assertEquals(String.valueOf(epochs), done.get("epoch"));
    assertEquals("3", done.get("workers"));
    long jobWords = jobWords(done); // none of worker 0 if it was killed in its first round
    assertEveryWordOnce(jobWords, epochs, CORPUS_WORDS * epochs / 100);
    double sep = separation(dir.resolve("elastic-w1"));
    System.err.printf("elastic job: %d words for %d epochs of %d; separation %.3f%n", jobWords,
        epochs, CORPUS_WORDS, sep);
    assertTrue(sep > 0.3, "the job separates the topics: " + sep);
  }

  /**
   * A worker joins an elastic job of 2 while it runs: the leader admits it at the end of a round
   * with the position and the job's counters, the rounds after that are planned over 3, and the
   * job still trains every word of every epoch once.
   */
  @Test
  void aWorkerJoinsARunningElasticJobAtARoundBoundary() throws Exception {
    int epochs = 6;
    List<Process> w = elasticJob("grow", 2, 10, epochs);
    awaitTraining("grow_out", w);
    w.add(worker("grow", "grow", -1, 2, 10, "--epochs", String.valueOf(epochs), "--elastic"));
    awaitAll(w, 300);
    String out = log(w.get(2));
    assertTrue(out.matches("(?s).*word2vec: worker 2 admitted: epoch \\d+, byte range \\d+,"
        + " with workers \\[0, 1, 2\\].*"), out);
    Map<String, String> done = Trainer.readExtras(dir.resolve("grow-w0")
        .resolve(Word2Vec.CHECKPOINT));
    assertEquals("true", done.get("complete"));
    long joined = Long.parseLong(done.get("worker.2.words"));
    long jobWords = jobWords(done);
    assertTrue(joined > 0, "the joined worker trained");
    assertEveryWordOnce(jobWords, epochs, CORPUS_WORDS * epochs / 100);
    System.err.printf("elastic job, joined: %d words for %d epochs of %d (%d by the joiner)%n",
        jobWords, epochs, CORPUS_WORDS, joined);
  }

  /**
   * A killed worker of an elastic job restarted with its own index (as a Kubernetes indexed Job
   * restarts a pod) waits out its old lease, is admitted back under that index at the end of a
   * round and continues its counters: the job's words stay the corpus x epochs.
   */
  @Test
  void aKilledWorkerRestartedWithItsIndexRejoinsAnElasticJob() throws Exception {
    int epochs = 6;
    List<Process> w = elasticJob("back", 2, 2, epochs);
    killWhileTraining("back_out", w, w.get(1), 1000);
    assertTrue(w.get(1).waitFor(30, TimeUnit.SECONDS));
    Process again = worker("back", "back", 1, 2, 2, "--epochs", String.valueOf(epochs),
        "--elastic");
    awaitAll(List.of(w.get(0), again), 300);
    String out = log(again);
    assertTrue(out.matches("(?s).*word2vec: worker 1 admitted: epoch \\d+, byte range \\d+,"
        + " with workers \\[0, 1\\].*"), out);
    Map<String, String> done = Trainer.readExtras(dir.resolve("back-w0")
        .resolve(Word2Vec.CHECKPOINT));
    assertEquals("true", done.get("complete"));
    assertEveryWordOnce(jobWords(done), epochs, CORPUS_WORDS * epochs / 100);
  }

  /**
   * An elastic job of 3 checkpoints and stops after 2 rounds, and resumes with 2 workers: the
   * plan keeps the checkpoint's byte ranges (made for 3), the rounds are dealt over 2, and the
   * job's words are still the corpus x epochs, worker 2's counters kept from the checkpoint.
   */
  @Test
  void anElasticJobResumesWithFewerWorkers() throws Exception {
    int epochs = 3;
    List<Process> first = elasticJob("shrink", 3, 10, epochs, "--stop-after-rounds", "2");
    awaitAll(first, 300);
    Path ckpt = dir.resolve("shrink-w0").resolve(Word2Vec.CHECKPOINT);
    assertEquals("3", Trainer.readExtras(ckpt).get("workers"));
    List<Process> second = elasticJob("shrink", 2, 10, epochs, "--resume");
    awaitAll(second, 300);
    Map<String, String> done = Trainer.readExtras(ckpt);
    assertEquals("true", done.get("complete"));
    assertEquals("3", done.get("workers"), "the plan's workers");
    assertTrue(done.containsKey("worker.-3.words"), "worker 2's counters, kept: " + done);
    assertEveryWordOnce(jobWords(done), epochs, CORPUS_WORDS * epochs / 100);
  }

  /** Kills {@code victim} with SIGKILL {@code afterMs} after the workers began to train. */
  static void killWhileTraining(String table, List<Process> workers, Process victim,
      long afterMs) throws Exception {
    awaitTraining(table, workers);
    Thread.sleep(afterMs);
    victim.destroyForcibly();
  }

  /** The job's words by a checkpoint: every worker's last counters, those that left too. */
  static long jobWords(Map<String, String> checkpoint) {
    long words = 0;
    for (String c : Word2Vec.workerCounters(checkpoint).values()) {
      words += Long.parseLong(dev.dynembed.job.JobCoordinator.decode(c).get("words"));
    }
    return words;
  }

  /** Asserts that each word of the corpus was trained once per epoch, within {@code slack}. */
  static void assertEveryWordOnce(long jobWords, int epochs, long slack) {
    assertTrue(Math.abs(jobWords - epochs * CORPUS_WORDS) < slack, "job trained " + jobWords
        + " words for " + epochs + " epochs of " + CORPUS_WORDS);
  }

  /** Waits (up to 2 minutes) until the workers train: {@code table} exists and holds keys. */
  static void awaitTraining(String table, List<Process> workers) throws Exception {
    long deadline = System.nanoTime() + 120_000_000_000L;
    try (TableClient c = TableClients.connect(shards.endpoints())) {
      while (true) {
        for (Process p : workers) {
          assertTrue(p.isAlive(), "a worker ended early:\n" + log(p));
        }
        try {
          if (c.openTable(table).describe().getCounters().getKeys() > 0) {
            return;
          }
        } catch (RuntimeException notYet) {
          // the table is not created yet
        }
        assertTrue(System.nanoTime() < deadline, "the job did not start:\n"
            + log(workers.get(0)));
        Thread.sleep(200);
      }
    }
  }

  static float[] filled(int n, float v) {
    float[] f = new float[n];
    Arrays.fill(f, v);
    return f;
  }
}
