package dev.dynembed.bownet;

import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.ops.Combiner;
import dev.dynembed.table.client.ServingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bin/bownet train --data DIR}: bow_net on a feed directory (feed.prototxt, labels.txt,
 * train-*.txt, test.txt; {@code bin/get-corpus brown-genres DIR} writes one from the Brown
 * corpus), held-out accuracy after every epoch, and the naive Bayes baseline on the same split.
 */
@Command(name = "bownet", mixinStandardHelpOptions = true,
    description = "bow_net text classifier on the dictionary-free embedding table",
    subcommands = {BowNetCli.Train.class, BowNetCli.Classify.class})
public final class BowNetCli {
  public static void main(String[] args) {
    CommandLine cl = new CommandLine(new BowNetCli());
    cl.setExecutionExceptionHandler((e, line, parsed) -> {
      System.err.println("bownet: error: " + e.getMessage());
      return 2;
    });
    System.exit(cl.execute(args));
  }

  @Command(name = "classify", mixinStandardHelpOptions = true,
      description = "Print the predicted label of every line of a feed file with a saved model;"
          + " the accuracy on stderr")
  static final class Classify implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "a saved model (train's"
        + " SAVE/epoch-N)") Path model;
    @Option(names = "--data", required = true, description = "feed file in the model's format")
    Path file;
    @Option(names = "--endpoints", description = "host:port,... of shards holding the model's"
        + " table (default: restore the saved table in process)")
    String shards;
    @picocli.CommandLine.Mixin
    dev.dynembed.table.tools.cli.ConnectionOptions connection =
        new dev.dynembed.table.tools.cli.ConnectionOptions();
    @Option(names = "--cache-mb", defaultValue = "0", description = "with --endpoints: serve the"
        + " rows through a local cache of this many MiB (0: none)") long cacheMb;
    @Option(names = "--cache-max-age-s", defaultValue = "60", description = "a cached row is"
        + " read again after this many seconds") long cacheMaxAge;

    @Override
    public Integer call() throws IOException {
      Path scratch = Files.createTempDirectory("bownet-classify");
      if (cacheMb < 0 || (cacheMb > 0 && shards == null)) {
        throw new IllegalArgumentException("--cache-mb must be >= 0 and needs --endpoints (rows"
            + " served from running shards) but was " + cacheMb);
      }
      try (TableClient client = shards != null
          ? TableClients.open(shards, connection.apply(
              dev.dynembed.table.client.ClientOptions.builder()).build())
          : TableClients.inProcess(scratch)) {
        java.util.List<ServingTable> caches = new java.util.ArrayList<>();
        BowNetServable m = shards != null && cacheMb > 0
            ? BowNetServable.open(model, config -> {
                ServingTable t = new ServingTable(client.openTable(config.getName()),
                    cacheMb << 20, java.time.Duration.ofSeconds(cacheMaxAge));
                caches.add(t);
                return t;
              })
            : BowNetServable.open(model, client, shards == null);
        List<BowNetServable.Prediction> predicted = m.classify(file);
        long correct = 0;
        long labelled = 0;
        StringBuilder out = new StringBuilder();
        for (BowNetServable.Prediction p : predicted) {
          out.append(p.predicted()).append('\n');
          if (p.truth() != null) {
            labelled++;
            correct += p.predicted().equals(p.truth()) ? 1 : 0;
          }
        }
        System.out.print(out);
        System.err.printf(Locale.ROOT, "bownet: %d lines classified; accuracy on the %d with a"
            + " label %.4f (%d/%d)%n", predicted.size(), labelled,
            (double) correct / Math.max(1, labelled), correct, labelled);
        for (ServingTable t : caches) {
          System.err.printf(Locale.ROOT, "bownet: cache of table '%s': %d rows cached, hit rate"
              + " %.3f, %d keys read from the shards%n", t.name(), t.cachedKeys(),
              t.stats().hitRate(), t.keysRead());
        }
      }
      return 0;
    }
  }

  @Command(name = "train", mixinStandardHelpOptions = true,
      description = "Train on DIR/train-*.txt, report accuracy on DIR/test.txt")
  static final class Train implements Callable<Integer> {
    @Option(names = "--data", required = true, description = "feed directory") Path data;
    @Option(names = "--threads", defaultValue = "2", description = "Hogwild training threads"
        + " (default ${DEFAULT-VALUE})") int threads;
    @Option(names = "--epochs", defaultValue = "20", description = "passes over the training"
        + " files (default ${DEFAULT-VALUE})") int epochs;
    @Option(names = "--dim", defaultValue = "16", description = "vector length of each word"
        + " row (default ${DEFAULT-VALUE})") int dim;
    @Option(names = "--hidden", defaultValue = "0", description = "tanh hidden layer size; 0"
        + " (default): the softmax reads the bag") int hidden;
    @Option(names = "--table-rate", defaultValue = "0.05", description = "the word table's"
        + " Adagrad rate (default ${DEFAULT-VALUE})") float tableRate;
    @Option(names = "--table-rate-decay", negatable = true, defaultValue = "true",
        fallbackValue = "true", description = "the table rate falls linearly to 0 over the"
        + " epochs (default; --no-table-rate-decay keeps it)") boolean decay;
    @Option(names = "--dense-rate", defaultValue = "0.0005", description = "the dense layers'"
        + " Adam rate (default ${DEFAULT-VALUE})") float denseRate;
    @Option(names = "--train-bag", defaultValue = "16", description = "train on bags of this"
        + " many of a line's words drawn at random (0: whole lines; default ${DEFAULT-VALUE})")
    int trainBag;
    @Option(names = "--batch", defaultValue = "32", description = "with --train-bag: bags per"
        + " step (default ${DEFAULT-VALUE})") int batch;
    @Option(names = "--seed", defaultValue = "1", description = "seed of the initializers and"
        + " the bags drawn from each line (default ${DEFAULT-VALUE})") long seed;
    @Option(names = "--name", defaultValue = "bow", description = "model name: its word table is"
        + " NAME_words (default ${DEFAULT-VALUE})") String name;
    @Option(names = "--pooling", defaultValue = "client", description = "where an example's"
        + " word rows are averaged: client (rows read into the trainer, reads made ahead of each"
        + " step) or shards (on the table's shards: one vector per example on the wire)")
    String pooling;
    @Option(names = "--combiner", defaultValue = "MEAN", description = "how an example's word"
        + " rows are combined: ${COMPLETION-CANDIDATES}") Combiner combiner;
    @Option(names = "--bigrams", description = "also bag each pair of adjacent words")
    boolean bigrams;
    /** --endpoints, or --shards N started here under DIR/shards (the servable models' default). */
    @picocli.CommandLine.Mixin
    dev.dynembed.table.tools.cli.TableServiceOptions service =
        new dev.dynembed.table.tools.cli.TableServiceOptions("1g");
    @picocli.CommandLine.Mixin
    dev.dynembed.table.tools.cli.ConnectionOptions connection =
        new dev.dynembed.table.tools.cli.ConnectionOptions();
    @picocli.CommandLine.Mixin
    dev.dynembed.job.JobOptions jobOpts = new dev.dynembed.job.JobOptions();
    @Option(names = "--save", description = "save a servable model after every epoch under"
        + " SAVE/epoch-N (default DIR/servable; with --endpoints, a directory inside the shards'"
        + " --data-dir)")
    Path save;

    @Override
    public Integer call() throws IOException {
      jobOpts.check();
      FeedDescription desc = FeedDescription.read(data.resolve("feed.prototxt"));
      List<String> labels = Files.readAllLines(data.resolve("labels.txt")).stream()
          .map(String::trim).filter(s -> !s.isEmpty()).toList();
      List<Path> train;
      try (Stream<Path> s = Files.list(data)) {
        train = s.filter(p -> p.getFileName().toString().matches("train-.*\\.txt")).sorted()
            .toList();
      }
      List<Path> test = List.of(data.resolve("test.txt"));
      if (train.isEmpty()) {
        throw new IllegalArgumentException(data + " holds no train-*.txt feed files");
      }
      if (!pooling.equals("client") && !pooling.equals("shards")) {
        throw new IllegalArgumentException("--pooling must be client or shards but was '"
            + pooling + "'");
      }
      BowNet.Config cfg = BowNet.Config.builder().name(name).dim(dim).hidden(hidden)
          .tableRate(tableRate).denseRate(denseRate).seed(seed)
          .poolOnShards(pooling.equals("shards")).combiner(combiner).bigrams(bigrams)
          .trainBag(trainBag).batch(batch).decay(decay).build();
      service.check();
      String shards = service.endpoints();
      int localShards = service.shards();
      Path shardDir = data.resolve("shards").toAbsolutePath();
      Path saveDir = save != null ? save
          : localShards > 0 ? shardDir.resolve("servable") : data.resolve("servable");
      dev.dynembed.table.tools.LocalShardProcesses procs = null;
      if (localShards > 0) {
        Files.createDirectories(shardDir);
        procs = service.start(shardDir, "");
        System.err.printf("bownet: %d shard processes: %s%n", localShards, procs.endpoints());
      }
      System.err.printf("bownet: %d labels, %d training files, %d threads%n", labels.size(),
          train.size(), threads);
      try (dev.dynembed.table.tools.LocalShardProcesses ignored = procs;
          TableClient client = service.remote() ? service.open(procs,
              connection.apply(dev.dynembed.table.client.ClientOptions.builder()).build())
              : TableClients.inProcess(data.resolve("model"))) {
        if (jobOpts.enabled()) {
          if (shards == null) {
            throw new IllegalArgumentException("--coordinator needs --endpoints: a job's workers"
                + " share running shards");
          }
          trainAsWorker(cfg, desc, labels, train, test, client, saveDir);
          return 0;
        }
        BowNet net = new BowNet(cfg, desc, labels, client, threads);
        long start = System.nanoTime();
        for (int e = 1; e <= epochs; e++) {
          long t0 = System.nanoTime();
          var r = net.trainEpoch(train, e, epochs);
          double secs = (System.nanoTime() - t0) / 1e9;
          BowNet.Accuracy acc = net.evaluate(test);
          System.out.printf(Locale.ROOT, "epoch %2d  loss %.4f  held-out accuracy %.4f (%d/%d)"
              + "  %.1f s, %.0f steps/s%n", e, r.averages().get("loss"), acc.value(),
              acc.correct(), acc.total(), secs, r.steps() / secs);
          Path epochDir = saveDir.resolve("epoch-" + e);
          net.saveServable(epochDir, e);
          System.err.println("bownet: saved " + epochDir);
        }
        System.out.printf(Locale.ROOT, "trained in %.1f s%n", (System.nanoTime() - start) / 1e9);
      }
      printBaselines(desc, labels, train, test);
      return 0;
    }

    private void trainAsWorker(BowNet.Config cfg, FeedDescription desc, List<String> labels,
        List<Path> train, List<Path> test, TableClient client, Path saveDir) throws IOException {
      java.util.Map<String, String> settings = new java.util.TreeMap<>();
      settings.put("config", cfg.toString());
      settings.put("threads", String.valueOf(threads));
      settings.put("epochs", String.valueOf(epochs));
      settings.put("shards", service.endpoints());
      settings.put("files", train.toString());
      dev.dynembed.job.JobCoordinator c = jobOpts.join(name, settings);
      System.err.printf("bownet: worker %d %s %d%s%n", c.index(),
          c.joining() ? "joining the running job started by" : "of", c.workers(),
          c.leader() ? " (leader: saves the servable models)" : "");
      try {
        BowNet net = new BowNet(cfg, desc, labels, client, threads, c.leader());
        net.trainAsWorker(train, test, epochs, c, client, (e, r, acc, secs) -> {
          System.out.printf(Locale.ROOT, "epoch %2d  loss %.4f (own files)  held-out accuracy"
              + " %.4f (%d/%d)  %.1f s, %.0f steps/s%n", e, r.averages().get("loss"),
              acc.value(), acc.correct(), acc.total(), secs, r.steps() / secs);
          if (c.leader()) {
            Path epochDir = saveDir.resolve("epoch-" + e);
            net.saveServable(epochDir, e);
            System.err.println("bownet: saved " + epochDir);
          }
        });
        c.finish();
      } catch (RuntimeException | IOException e) {
        c.fail(e);
        throw e;
      } finally {
        c.close();
      }
    }

    private static void printBaselines(FeedDescription desc, List<String> labels,
        List<Path> train, List<Path> test) {
      BowNet.Accuracy nb = new NaiveBayes(desc, labels).train(train).evaluate(test);
      System.out.printf(Locale.ROOT, "baseline (multinomial naive Bayes) held-out accuracy %.4f"
          + " (%d/%d)%n", nb.value(), nb.correct(), nb.total());
      // less smoothing, the best of add-1 / 0.5 / 0.2 on Brown genres' fold 0 (docs/benchmarks.md)
      BowNet.Accuracy nbHalf = new NaiveBayes(desc, labels, 0.5).train(train).evaluate(test);
      System.out.printf(Locale.ROOT, "baseline (multinomial naive Bayes, add-0.5) held-out"
          + " accuracy %.4f (%d/%d)%n", nbHalf.value(), nbHalf.correct(), nbHalf.total());
      BowNet.Accuracy lr = new LogisticRegression(desc, labels).train(train).evaluate(test);
      System.out.printf(Locale.ROOT, "baseline (bag-of-words logistic regression) held-out"
          + " accuracy %.4f (%d/%d)%n", lr.value(), lr.correct(), lr.total());
    }
  }
}
