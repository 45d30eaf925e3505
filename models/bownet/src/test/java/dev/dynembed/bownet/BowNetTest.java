package dev.dynembed.bownet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.layers.feed.FeedException;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bow_net end to end on feed files with a description: 4 labels, each with its own words mixed
 * with shared noise words, lines in random order; 2 Hogwild threads. Held-out lines (unseen
 * combinations, some unseen words) are classified well above chance, as by the naive Bayes
 * baseline.
 */
class BowNetTest {
  static final String DESC = """
      batch_size: 32
      multi_slot_desc {
        slots { name: "words" type: "string" is_used: true }
        slots { name: "label" type: "string" is_used: true }
      }
      """;
  static final List<String> LABELS = List.of("sport", "food", "music", "law");

  static Path write(Path dir, String name, int lines, Random r) throws Exception {
    StringBuilder b = new StringBuilder();
    for (int l = 0; l < lines; l++) {
      int c = r.nextInt(LABELS.size());
      int n = 3 + r.nextInt(8);
      b.append(n);
      for (int i = 0; i < n; i++) {
        // 40% label words (20 per label), 60% noise shared by all labels; some words are rare
        b.append(' ').append(r.nextInt(10) < 4 ? LABELS.get(c) + r.nextInt(20)
            : "noise" + r.nextInt(r.nextInt(10) == 0 ? 5000 : 50));
      }
      b.append(" 1 ").append(LABELS.get(c)).append('\n');
    }
    return Files.writeString(dir.resolve(name), b.toString());
  }

  @Test
  void trainsFromFeedFiles_onTwoThreads_andClassifiesHeldOutLines(@TempDir Path dir)
      throws Exception {
    Random r = new Random(5);
    List<Path> train = new ArrayList<>();
    for (int f = 0; f < 4; f++) {
      train.add(write(dir, "train-" + f + ".txt", 400, r));
    }
    List<Path> test = List.of(write(dir, "test.txt", 400, r));
    FeedDescription desc = FeedDescription.parse(DESC);
    double accuracy;
    try (TableClient c = TableClients.inProcess(dir.resolve("model"))) {
      BowNet net = new BowNet(BowNet.Config.defaults(), desc, LABELS, c, 2);
      double before = net.evaluate(test).value();
      double firstLoss = Double.NaN;
      double lastLoss = Double.NaN;
      for (int e = 1; e <= 8; e++) { // the defaults: sub-bags, the table rate decaying
        var res = net.trainEpoch(train, e, 8);
        assertEquals(4 * (400 / 32 + 1), res.steps(), "every batch of every file, once");
        lastLoss = res.averages().get("loss");
        firstLoss = e == 1 ? lastLoss : firstLoss;
      }
      accuracy = net.evaluate(test).value();
      assertTrue(lastLoss < 0.5 * firstLoss, "loss " + firstLoss + " -> " + lastLoss);
      assertTrue(accuracy > 0.85 && accuracy > before + 0.3, "held-out accuracy " + before
          + " -> " + accuracy);
    }
    double nb = new NaiveBayes(desc, LABELS).train(train).evaluate(test).value();
    assertTrue(nb > 0.85, "naive Bayes held-out accuracy " + nb);
    double nbHalf = new NaiveBayes(desc, LABELS, 0.5).train(train).evaluate(test).value();
    assertTrue(nbHalf > 0.85, "naive Bayes (add-0.5) held-out accuracy " + nbHalf);
    IllegalArgumentException alpha = assertThrows(IllegalArgumentException.class,
        () -> new NaiveBayes(desc, LABELS, 0));
    assertTrue(alpha.getMessage().contains("alpha must be > 0"), alpha.getMessage());
    LogisticRegression lr = new LogisticRegression(desc, LABELS);
    double untrained = lr.evaluate(test).value();
    double trained = lr.train(train).evaluate(test).value();
    assertTrue(trained > 0.85 && trained > untrained + 0.3,
        "logistic regression held-out accuracy " + untrained + " -> " + trained);
  }

  /**
   * With the bag pooled on the shards, bow_net trains as well; the model saved after an epoch
   * loads in a fresh JVM ({@code bownet classify}, its table restored from the saved checkpoint)
   * and classifies the held-out lines exactly as the training process does.
   */
  @Test
  void pooledOnShards_savedModel_classifiesInAFreshJvm(@TempDir Path dir) throws Exception {
    Random r = new Random(6);
    List<Path> train = new ArrayList<>();
    for (int f = 0; f < 2; f++) {
      train.add(write(dir, "train-" + f + ".txt", 400, r));
    }
    Path test = write(dir, "test.txt", 200, r);
    FeedDescription desc = FeedDescription.parse(DESC);
    BowNet.Config cfg = BowNet.Config.wholeLines("bowp", 32, 32, true, true);
    Path saved = dir.resolve("servable/epoch-3");
    List<String> inProcess = new ArrayList<>();
    double accuracy;
    try (TableClient c = TableClients.inProcess(dir.resolve("model"))) {
      BowNet net = new BowNet(cfg, desc, LABELS, c, 2);
      for (int e = 1; e <= 3; e++) {
        net.trainEpoch(train);
      }
      accuracy = net.evaluate(List.of(test)).value();
      net.saveServable(saved, 3);
      try (TableClient fresh = TableClients.inProcess(dir.resolve("fresh"))) {
        for (BowNetServable.Prediction p
            : BowNetServable.open(saved, fresh, true).classify(test)) {
          inProcess.add(p.predicted());
        }
      }
    }
    assertTrue(accuracy > 0.8, "held-out accuracy with the bag pooled on shards " + accuracy);
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p = new ProcessBuilder(javaBin, "-cp", System.getProperty("java.class.path"),
        BowNetCli.class.getName(), "classify", "--model", saved.toString(), "--data",
        test.toString()).redirectError(dir.resolve("classify.err").toFile()).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS));
    String err = Files.readString(dir.resolve("classify.err"));
    assertEquals(0, p.exitValue(), err);
    assertEquals(inProcess, List.of(out.split("\n")));
    long correct = 0;
    List<String> truth = Files.readAllLines(test).stream()
        .map(l -> l.substring(l.lastIndexOf(' ') + 1)).toList();
    for (int i = 0; i < truth.size(); i++) {
      correct += truth.get(i).equals(inProcess.get(i)) ? 1 : 0;
    }
    assertEquals(accuracy, (double) correct / truth.size(), 1e-9);
    assertTrue(err.contains("accuracy on the 200 with a label"), err);
  }

  /**
   * {@code bownet train --local-shards 2 --pooling shards} starts 2 shard processes, trains on
   * them, saves a servable model in their data directory, stops them; {@code bownet classify}
   * then serves the model from its saved table in process.
   */
  @Test
  @Tag("processes")
  void cli_trainsOnLocalShardProcesses_andTheSavedModelClassifies(@TempDir Path dir)
      throws Exception {
    Random r = new Random(8);
    for (int f = 0; f < 2; f++) {
      write(dir, "train-" + f + ".txt", 300, r);
    }
    write(dir, "test.txt", 100, r);
    Files.writeString(dir.resolve("feed.prototxt"), DESC);
    Files.write(dir.resolve("labels.txt"), LABELS);
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    java.io.PrintStream saved = System.out;
    int code;
    try {
      System.setOut(new java.io.PrintStream(out, true, StandardCharsets.UTF_8));
      code = new picocli.CommandLine(new BowNetCli()).execute("train", "--data", dir.toString(),
          "--epochs", "3", "--shards", "2", "--pooling", "shards", "--shard-heap", "256m");
    } finally {
      System.setOut(saved);
    }
    String printed = out.toString(StandardCharsets.UTF_8);
    assertEquals(0, code, printed);
    assertTrue(printed.contains("epoch  3"), printed);
    Path model = dir.resolve("shards/servable/epoch-3");
    assertTrue(Files.exists(model.resolve("servable.properties")), "no model at " + model);
    try (TableClient c = TableClients.inProcess(dir.resolve("serve"))) {
      List<BowNetServable.Prediction> p = BowNetServable.open(model, c, true)
          .classify(dir.resolve("test.txt"));
      long correct = p.stream().filter(x -> x.predicted().equals(x.truth())).count();
      assertEquals(100, p.size());
      assertTrue(correct > 60, correct + " of 100 held-out lines right");
    }
    // new shard processes on the same data directory, the saved table restored onto them,
    // serve it to classify --endpoints through a local cache of rows (--cache-mb): the same
    // predictions as in process
    List<String> inProcess;
    try (TableClient c = TableClients.inProcess(dir.resolve("serve2"))) {
      inProcess = BowNetServable.open(model, c, true).classify(dir.resolve("test.txt")).stream()
          .map(BowNetServable.Prediction::predicted).toList();
    }
    try (dev.dynembed.table.tools.LocalShardProcesses shards =
        new dev.dynembed.table.tools.LocalShardProcesses(2, 0, dir.resolve("shards"), "256m", "");
        TableClient onShards = TableClients.connect(shards.endpoints())) {
      BowNetServable.open(model, onShards, true); // restores the table onto the shards
      String[] run = classify("--model", model.toString(), "--data",
          dir.resolve("test.txt").toString(), "--endpoints", String.join(",", shards.endpoints()),
          "--cache-mb", "4");
      String log = run[2];
      assertEquals("0", run[0], log);
      assertEquals(inProcess, List.of(run[1].split("\n")), log);
      assertTrue(log.contains("cache of table 'bow_words'") && log.contains("rows cached"), log);
      // serving replicas of those shards (table-server --serve-from, issue 54) serve classify
      // the same predictions
      try (dev.dynembed.table.tools.LocalShardProcesses replicas =
          dev.dynembed.table.tools.LocalShardProcesses.servingReplicas(shards.endpoints(),
              dir.resolve("replicas"), "256m", 5000);
          TableClient onReplicas = TableClients.connect(replicas.endpoints())) {
        long ready = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(60);
        while (true) { // they serve once they loaded their shards' snapshots
          try {
            onReplicas.openTable("bow_words").find("x");
            break;
          } catch (dev.dynembed.table.common.TableException e) {
            if (System.nanoTime() > ready) {
              throw e;
            }
            Thread.sleep(100);
          }
        }
        run = classify("--model", model.toString(), "--data", dir.resolve("test.txt").toString(),
            "--endpoints", String.join(",", replicas.endpoints()));
        assertEquals("0", run[0], run[2]);
        assertEquals(inProcess, List.of(run[1].split("\n")), run[2]);
      }
    }
    // a cache without shards to read through is refused, naming the options
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    picocli.CommandLine cl = new picocli.CommandLine(new BowNetCli());
    cl.setErr(new java.io.PrintWriter(err, true));
    code = cl.execute("classify", "--model", model.toString(), "--data",
        dir.resolve("test.txt").toString(), "--cache-mb", "4");
    assertTrue(code != 0, "--cache-mb without --endpoints was accepted");
    assertTrue(err.toString(StandardCharsets.UTF_8).contains("--cache-mb"), err.toString());
  }

  /** {@code bownet classify ARGS}: its exit code, standard output and standard error. */
  private static String[] classify(String... args) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    java.io.PrintStream savedOut = System.out;
    java.io.PrintStream savedErr = System.err;
    int code;
    try {
      System.setOut(new java.io.PrintStream(out, true, StandardCharsets.UTF_8));
      System.setErr(new java.io.PrintStream(err, true, StandardCharsets.UTF_8));
      String[] all = new String[args.length + 1];
      all[0] = "classify";
      System.arraycopy(args, 0, all, 1, args.length);
      code = new picocli.CommandLine(new BowNetCli()).execute(all);
    } finally {
      System.setOut(savedOut);
      System.setErr(savedErr);
    }
    return new String[] {String.valueOf(code), out.toString(StandardCharsets.UTF_8),
        err.toString(StandardCharsets.UTF_8)};
  }

  @Test
  void badFeeds_areRefusedNamingTheProblem(@TempDir Path dir) throws Exception {
    FeedDescription noLabel = FeedDescription.parse("""
        multi_slot_desc { slots { name: "words" type: "string" is_used: true } }
        """);
    try (TableClient c = TableClients.inProcess(dir.resolve("m1"))) {
      FeedException e = assertThrows(FeedException.class,
          () -> new BowNet(BowNet.Config.defaults(), noLabel, LABELS, c, 1));
      assertTrue(e.getMessage().contains("no slot 'label'"), e.getMessage());
    }
    Path f = Files.writeString(dir.resolve("x.txt"), "2 a b 1 sport\n1 c 1 chess\n");
    try (TableClient c = TableClients.inProcess(dir.resolve("m2"))) {
      BowNet net = new BowNet(BowNet.Config.defaults(), FeedDescription.parse(DESC), LABELS, c, 1);
      FeedException e = assertThrows(FeedException.class, () -> net.evaluate(List.of(f)));
      assertTrue(e.getMessage().contains("label 'chess' is not one of the 4 labels"),
          e.getMessage());
      // training on sub-bags reads the labels the same way
      RuntimeException t = assertThrows(RuntimeException.class,
          () -> net.trainEpoch(List.of(f), 1, 1));
      String chain = "";
      for (Throwable x = t; x != null; x = x.getCause()) {
        chain += x.getMessage() + " / ";
      }
      assertTrue(chain.contains("label 'chess' is not one of the 4 labels"), chain);
      IllegalArgumentException late = assertThrows(IllegalArgumentException.class,
          () -> net.trainEpoch(List.of(f), 2, 1));
      assertTrue(late.getMessage().contains("epoch 2 of 1"), late.getMessage());
    }
    IllegalArgumentException bag = assertThrows(IllegalArgumentException.class,
        () -> BowNet.Config.builder().name("b").batch(0).build());
    assertTrue(bag.getMessage().contains("batch in 1..65536"), bag.getMessage());
  }

  @Test
  void configBuilder_startsAtTheDefaults_andRoundTrips() {
    BowNet.Config d = BowNet.Config.defaults();
    assertEquals(new BowNet.Config("bow", 16, 0, 0.05f, 5e-4f, 1, false,
        dev.dynembed.ops.Combiner.MEAN, false, 16, 32, true), d);
    BowNet.Config w = BowNet.Config.wholeLines("w", 32, 8, true, true);
    assertEquals(w, w.toBuilder().build());
    assertEquals(0, w.trainBag());
    assertEquals(0.1f, w.tableRate());
    assertEquals(64, d.toBuilder().dim(64).build().dim());
  }
}
