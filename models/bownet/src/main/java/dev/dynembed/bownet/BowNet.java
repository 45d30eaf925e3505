package dev.dynembed.bownet;

import dev.dynembed.job.JobCoordinator;
import dev.dynembed.layers.AsyncExecutor;
import dev.dynembed.layers.DenseAverager;
import dev.dynembed.ops.Combiner;
import dev.dynembed.ops.ServableGraph;
import dev.dynembed.layers.Layers;
import dev.dynembed.layers.Trainer;
import dev.dynembed.layers.feed.FeedDescription;
import dev.dynembed.layers.feed.FeedException;
import dev.dynembed.layers.feed.MultiSlotReader;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.TableConfigs;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

/**
 * bow_net, Paddle's bag-of-words text classifier: the mean of an example's word rows (table
 * {@code <name>_words}, dictionary-free: a word met for the first time gets a row), an optional
 * tanh hidden layer, a softmax over a fixed list of labels. Trained from multi-slot feed files (a
 * sparse key slot {@code words} and a one-key slot {@code label}) on N Hogwild threads through
 * the {@link AsyncExecutor}, by default on sub-bags of each line's words ({@link
 * Config#trainBag}) with the table's rate decaying over the run; evaluated on whole lines by an
 * inference graph (lookups that never create rows) sharing the dense variables. Why sub-bags:
 * docs/design/0010-data-feed.md.
 *
 * @see dev.dynembed.layers.feed.FeedDescription
 */
public final class BowNet {
  /**
   * @param dim word row size
   * @param hidden hidden layer size; 0: the softmax reads the bag itself (fastText's shape)
   * @param tableRate the word table's Adagrad rate
   * @param denseRate the dense layers' Adam rate
   * @param poolOnShards pool each example's word rows on the table's shards ({@code
   *     Layers.embeddingBagOnShards}) instead of reading every row into the trainer
   * @param combiner how an example's rows are combined
   * @param bigrams also put each pair of adjacent words ("w1 w2") in the bag, as a key of the
   *     same table (fastText's bigrams; no vocabulary of pairs is needed)
   * @param trainBag train on bags of this many of a line's keys, drawn at random without
   *     replacement (a line gives ceil(keys / trainBag) examples); 0: each line is one example.
   *     Evaluation and serving read whole lines.
   * @param batch with {@code trainBag > 0}: examples per step (without it, a step is one feed
   *     batch)
   * @param decay the table's rate falls linearly from {@code tableRate} to 0 over the run's
   *     epochs ({@link #trainEpoch(List, int, int)}); otherwise it stays {@code tableRate}
   */
  public record Config(String name, int dim, int hidden, float tableRate, float denseRate,
      long seed, boolean poolOnShards, Combiner combiner, boolean bigrams, int trainBag,
      int batch, boolean decay) {
    /**
     * The settings measured best on Brown genres (docs/benchmarks.md): 16-dimensional rows, no
     * hidden layer, bags of 16 words in steps of 32, table rate 0.05 decaying to 0.
     */
    public static Config defaults() {
      return builder().build();
    }

    /** A builder at {@link #defaults()}; named setters instead of 12 positional arguments. */
    public static Builder builder() {
      return new Builder();
    }

    /** A builder holding this configuration's values. */
    public Builder toBuilder() {
      return new Builder().name(name).dim(dim).hidden(hidden).tableRate(tableRate)
          .denseRate(denseRate).seed(seed).poolOnShards(poolOnShards).combiner(combiner)
          .bigrams(bigrams).trainBag(trainBag).batch(batch).decay(decay);
    }

    /** Builds a {@link Config}; starts at the defaults, checked whole by {@link #build}. */
    public static final class Builder {
      private String name = "bow";
      private int dim = 16;
      private int hidden;
      private float tableRate = 0.05f;
      private float denseRate = 5e-4f;
      private long seed = 1;
      private boolean poolOnShards;
      private Combiner combiner = Combiner.MEAN;
      private boolean bigrams;
      private int trainBag = 16;
      private int batch = 32;
      private boolean decay = true;

      private Builder() {}

      public Builder name(String v) {
        name = v;
        return this;
      }

      public Builder dim(int v) {
        dim = v;
        return this;
      }

      public Builder hidden(int v) {
        hidden = v;
        return this;
      }

      public Builder tableRate(float v) {
        tableRate = v;
        return this;
      }

      public Builder denseRate(float v) {
        denseRate = v;
        return this;
      }

      public Builder seed(long v) {
        seed = v;
        return this;
      }

      public Builder poolOnShards(boolean v) {
        poolOnShards = v;
        return this;
      }

      public Builder combiner(Combiner v) {
        combiner = v;
        return this;
      }

      public Builder bigrams(boolean v) {
        bigrams = v;
        return this;
      }

      public Builder trainBag(int v) {
        trainBag = v;
        return this;
      }

      public Builder batch(int v) {
        batch = v;
        return this;
      }

      public Builder decay(boolean v) {
        decay = v;
        return this;
      }

      public Config build() {
        return new Config(name, dim, hidden, tableRate, denseRate, seed, poolOnShards, combiner,
            bigrams, trainBag, batch, decay);
      }
    }

    /** Paddle's shape: each line one example, a tanh hidden layer, rates held constant. */
    public static Config wholeLines(String name, int dim, int hidden, boolean poolOnShards,
        boolean bigrams) {
      return builder().name(name).dim(dim).hidden(hidden).tableRate(0.1f).denseRate(2e-3f)
          .poolOnShards(poolOnShards).bigrams(bigrams).trainBag(0).batch(0).decay(false)
          .build();
    }

    public Config {
      if (dim < 1 || dim > 4096 || hidden < 0 || hidden > 4096) {
        throw new IllegalArgumentException("dim must be in 1..4096 and hidden in 0..4096 but"
            + " were " + dim + " and " + hidden);
      }
      if (!(tableRate > 0) || !(denseRate > 0)) {
        throw new IllegalArgumentException("rates must be > 0 but were " + tableRate + " and "
            + denseRate);
      }
      if (trainBag < 0 || (trainBag > 0 && (batch < 1 || batch > 65536))) {
        throw new IllegalArgumentException("trainBag must be >= 0 (0: whole lines) and, with"
            + " trainBag > 0, batch in 1..65536, but were " + trainBag + " and " + batch);
      }
    }
  }

  /** Held-out accuracy: correct of total examples. */
  public record Accuracy(long correct, long total) {
    public double value() {
      return total == 0 ? Double.NaN : (double) correct / total;
    }
  }

  private final Labels labels;
  private final FeedDescription desc;
  private final MultiSlotReader feed;
  private final EmbeddingTable words;
  private final AsyncExecutor executor;
  private final SameDiff inference;
  private final int threads;
  /**
   * Sub-bags are shuffled over this many lines of a file (a shuffle buffer, as tf.data's): steps
   * drawn from one feed batch's lines trained measurably worse (loss +0.08 after 20 epochs, held-
   * out accuracy lower on each of 3 seeds; docs/design/0010-data-feed.md).
   */
  static final int SHUFFLE_LINES = 4096;

  private final boolean bigrams;
  private final String name;
  private final Config cfg;
  /** Lines of each training file, counted once (the rate schedule's progress is in lines). */
  private final Map<Path, Long> linesOf = new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * @param desc the feed's description: a used sparse key slot {@code words} and a used sparse
   *     key slot {@code label} (one key per line)
   * @param labels the classes, in output order
   */
  public BowNet(Config cfg, FeedDescription desc, List<String> labels, TableClient client,
      int threads) {
    this(cfg, desc, labels, client, threads, true);
  }

  /**
   * As above; {@code fresh} refuses a word table that already holds keys (a job's other workers
   * open the table its leader checked).
   */
  public BowNet(Config cfg, FeedDescription desc, List<String> labels, TableClient client,
      int threads, boolean fresh) {
    this.labels = new Labels(labels);
    for (String slot : List.of("words", "label")) {
      FeedDescription.Slot s = desc.slots().stream().filter(x -> x.name().equals(slot))
          .findFirst().orElseThrow(() -> new FeedException("the feed description has no slot '"
              + slot + "' (bow_net reads 'words' and 'label')"));
      if (!s.used() || s.dense() || !s.keys()) {
        throw new FeedException("slot '" + slot + "' must be a used sparse key slot (uint64 or"
            + " string, is_used: true, is_dense: false)");
      }
    }
    this.threads = threads;
    this.bigrams = cfg.bigrams();
    this.desc = desc;
    this.feed = new MultiSlotReader(desc);
    this.words = client.createTable(TableConfigs.builder(cfg.name() + "_words", cfg.dim())
        .setOptimizer(TableConfigs.adagrad(cfg.tableRate(), 1e-4f, 1e-8f))
        .setInitializer(TableConfigs.uniform(-0.1f, 0.1f, cfg.seed())).build());
    long held = words.describe().getCounters().getKeys();
    if (fresh && held > 0) { // a fresh model must not inherit an earlier run's rows
      throw new IllegalArgumentException("table '" + words.name() + "' already holds " + held
          + " keys (an earlier run's); drop it (bin/table-cli drop) or name this model"
          + " otherwise (--name)");
    }
    this.executor = new AsyncExecutor(i -> new Trainer(graph(cfg, true), "loss",
        new Adam(cfg.denseRate()), List.of(words)), threads);
    this.inference = graph(cfg, false);
    this.name = cfg.name();
    this.cfg = cfg;
    // the inference graph reads the trained dense arrays themselves (as the threads share them)
    inference.setVariablesArrays(executor.trainer(0).graph().getVariablesArrays());
  }

  private SameDiff graph(Config cfg, boolean training) {
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable w = sd.placeHolder("words", DataType.UTF8, -1, -1);
    SDVariable wm = sd.placeHolder("words_mask", DataType.FLOAT, -1, -1);
    SDVariable y = sd.placeHolder("label_onehot", DataType.FLOAT, -1, labels.size());
    SDVariable bag = cfg.poolOnShards()
        ? layers.embeddingBagOnShards("bag", w, wm, words, cfg.combiner(), training)
        : layers.embeddingBag("bag", w, wm, words, cfg.combiner(), training);
    // the same initial values in every thread's graph (they share thread 0's arrays anyway)
    Nd4j.getRandom().setSeed(cfg.seed());
    SDVariable h = bag;
    int width = cfg.dim();
    if (cfg.hidden() > 0) {
      SDVariable w1 = sd.var("w1", Nd4j.randn(DataType.FLOAT, cfg.dim(), cfg.hidden())
          .muli(Math.sqrt(1.0 / cfg.dim())));
      SDVariable b1 = sd.var("b1", Nd4j.zeros(DataType.FLOAT, 1, cfg.hidden()));
      h = sd.math().tanh(bag.mmul(w1).add(b1));
      width = cfg.hidden();
    }
    SDVariable w2 = sd.var("w2", Nd4j.randn(DataType.FLOAT, width, labels.size())
        .muli(Math.sqrt(1.0 / width)));
    SDVariable b2 = sd.var("b2", Nd4j.zeros(DataType.FLOAT, 1, labels.size()));
    SDVariable logits = sd.updateVariableNameAndReference(h.mmul(w2).add(b2), "logits");
    layers.softmaxLoss("loss", logits, y);
    return sd;
  }

  /** The feed's batch with the label as a one-hot row over {@link #labels}. */
  private Map<String, INDArray> withOneHot(Map<String, INDArray> batch, Path file) {
    Map<String, INDArray> bag = Features.bag(batch, bigrams);
    return Map.of("words", bag.get("words"), "words_mask", bag.get("words_mask"),
        "label_onehot", labels.oneHot(labels.of(batch, file)));
  }

  /**
   * One epoch over {@code files} on the threads at the table's own rate (no schedule); the mean
   * training loss.
   */
  public AsyncExecutor.RunResult trainEpoch(List<Path> files) {
    return trainEpoch(files, 1, 0);
  }

  /**
   * Epoch {@code epoch} of {@code epochs} over {@code files} on the threads; the mean training
   * loss. With {@link Config#decay} the table's rate at a step is {@code tableRate * (1 - p)},
   * p the run's progress in lines read (floored at 1e-4 of the rate); {@code epochs = 0} keeps
   * the table's own rate.
   */
  public AsyncExecutor.RunResult trainEpoch(List<Path> files, int epoch, int epochs) {
    if (epochs < 0 || (epochs > 0 && (epoch < 1 || epoch > epochs))) {
      throw new IllegalArgumentException("epoch " + epoch + " of " + epochs);
    }
    long total = 0;
    for (Path f : files) {
      total += linesOf.computeIfAbsent(f, BowNet::countLines);
    }
    long linesPerEpoch = Math.max(1, total);
    java.util.concurrent.atomic.AtomicLong read = new java.util.concurrent.atomic.AtomicLong();
    java.util.function.DoubleSupplier rate = !cfg.decay() || epochs == 0 ? () -> 0
        : () -> cfg.tableRate() * Math.max(1e-4, 1 - (epoch - 1
            + Math.min(1.0, (double) read.get() / linesPerEpoch)) / epochs);
    return executor.run(files, threads, (Path file) -> () -> trainingSteps(file, epoch, read),
        List.of("loss"), rate);
  }

  /**
   * The steps of one epoch over {@code file}: its feed batches as they are, or cut into
   * sub-bags ({@link Config#trainBag}); {@code read} counts the lines read.
   */
  private java.util.Iterator<Map<String, INDArray>> trainingSteps(Path file, int epoch,
      java.util.concurrent.atomic.AtomicLong read) {
    java.util.Iterator<Map<String, INDArray>> it = feed.read(file).iterator();
    java.util.Random r = new java.util.Random(cfg.seed() * 1_000_003L + epoch * 7919L
        + file.getFileName().toString().hashCode());
    return new java.util.Iterator<>() {
      private java.util.Iterator<Map<String, INDArray>> steps =
          java.util.Collections.emptyIterator();

      @Override
      public boolean hasNext() {
        while (!steps.hasNext() && it.hasNext()) { // a batch of empty lines gives no step
          if (cfg.trainBag() == 0) {
            steps = List.of(withOneHot(take(), file)).iterator();
            continue;
          }
          List<Features.SubBag> bags = new java.util.ArrayList<>();
          for (long lines = 0; lines < SHUFFLE_LINES && it.hasNext(); ) {
            Map<String, INDArray> batch = take();
            lines += batch.get("label_mask").size(0);
            bags.addAll(Features.subBags(Features.bag(batch, bigrams), labels.of(batch, file),
                cfg.trainBag(), r));
          }
          steps = Features.steps(bags, labels, cfg.batch(), r).iterator();
        }
        return steps.hasNext();
      }

      /** The file's next feed batch, its lines counted in {@code read}. */
      private Map<String, INDArray> take() {
        Map<String, INDArray> batch = it.next();
        read.addAndGet(batch.get("label_mask").size(0));
        return batch;
      }

      @Override
      public Map<String, INDArray> next() {
        if (!hasNext()) {
          throw new java.util.NoSuchElementException();
        }
        return steps.next();
      }
    };
  }

  private static long countLines(Path file) {
    try (java.util.stream.Stream<String> lines = java.nio.file.Files.lines(file)) {
      return lines.filter(l -> !l.isBlank()).count();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot read " + file, e);
    }
  }

  /** What a worker of a job reports after each epoch (its own files' loss; the job's model). */
  public interface EpochReport {
    void epoch(int epoch, AsyncExecutor.RunResult own, Accuracy heldOut, double seconds)
        throws IOException;
  }

  /**
   * Trains as worker {@code job.index()} of {@code job.workers()} sharing the word table on the
   * shards of {@code client} (docs/design/0013-many-trainers.md): worker I trains on the training
   * files {@code I, I + W, ...}; the dense layers are averaged over the workers after every
   * epoch through the table service ({@link DenseAverager}, table {@code NAME_dense}), from one
   * starting point the leader publishes. After each epoch's average every worker evaluates on
   * {@code test}, then reports; the leader's report may save (nobody trains until it has).
   */
  public void trainAsWorker(List<Path> train, List<Path> test, int epochs, JobCoordinator job,
      TableClient client, EpochReport report) throws IOException {
    int w = job.workers();
    if (train.size() < w) {
      throw new FeedException(train.size() + " training files for " + w + " workers: each"
          + " worker trains whole files; split the data into at least " + w + " files");
    }
    List<Path> mine = new java.util.ArrayList<>();
    for (int i = job.index(); i < train.size(); i += w) {
      mine.add(train.get(i));
    }
    DenseAverager avg = new DenseAverager(client, name + "_dense", executor.trainer(0), w);
    int first = 1;
    if (job.joining()) {
      // joined a running elastic job: admitted after an epoch's report, from the next epoch on,
      // with the averaged dense layers of that epoch (its own Adam state starts fresh)
      first = Integer.parseInt(job.awaitAdmission().get("epoch")) + 1;
      avg.pull();
    } else {
      if (job.leader()) {
        avg.publish(0);
      }
      job.barrier("begin", "");
      avg.pull();
    }
    for (int e = first; e <= epochs; e++) {
      long t0 = System.nanoTime();
      AsyncExecutor.RunResult r = job.elastic() ? trainEpochElastic(train, e, epochs, job)
          : trainEpoch(mine, e, epochs);
      // the average is over the workers that trained this epoch's last files; one that leaves
      // between its push and the barrier is in it, one that leaves before pushing counts as a
      // worker that did not move the dense layers
      avg.push(e, job.participants().size());
      job.barrier("epoch-" + e, "");
      avg.pull();
      double secs = (System.nanoTime() - t0) / 1e9;
      report.epoch(e, r, evaluate(test), secs);
      int epoch = e;
      job.barrier("reported-" + e, "", e == epochs ? null
          : () -> Map.of("epoch", String.valueOf(epoch)));
    }
  }

  /**
   * An elastic job's epoch: file k goes to participant k mod P; the files of a worker that left
   * before the barrier are dealt again over the others (what it trained before it left stays in
   * the word table, Hogwild), until every file was trained by a worker that reached a barrier.
   */
  private AsyncExecutor.RunResult trainEpochElastic(List<Path> train, int epoch, int epochs,
      JobCoordinator job) {
    double[] lossSum = {0};
    long[] steps = {0};
    double[] seconds = {0};
    int again = job.dealOut("trained-" + epoch, train.size(), mine -> {
      if (!mine.isEmpty()) {
        AsyncExecutor.RunResult r = trainEpoch(mine.stream().map(train::get).toList(), epoch,
            epochs);
        lossSum[0] += r.averages().getOrDefault("loss", 0.0) * r.steps();
        steps[0] += r.steps();
        seconds[0] += r.seconds();
      }
    });
    if (again > 0) {
      System.err.printf("bownet: workers left the job during epoch %d; %d file(s) were trained"
          + " again by the %d worker(s) still in it%n", epoch, again, job.participants().size());
    }
    return new AsyncExecutor.RunResult(Map.of("loss",
        steps[0] == 0 ? Double.NaN : lossSum[0] / steps[0]), steps[0], seconds[0]);
  }

  /** Accuracy of the current model on {@code files} (unseen words read as zero rows). */
  public Accuracy evaluate(List<Path> files) {
    long correct = 0;
    long total = 0;
    for (Path f : files) {
      for (Map<String, INDArray> batch : feed.read(f)) {
        int[] truth = labels.of(batch, f);
        INDArray predicted = inference.output(Features.bag(batch, bigrams), "logits")
            .get("logits").argMax(1);
        for (int e = 0; e < predicted.length(); e++) {
          correct += predicted.getLong(e) == truth[e] ? 1 : 0;
        }
        total += predicted.length();
      }
    }
    return new Accuracy(correct, total);
  }

  public List<String> labels() {
    return labels.list();
  }

  /**
   * Saves the model as it is now for serving: the inference graph with its dense values and
   * table binding ({@link ServableGraph}), the labels and feed description, and a checkpoint of
   * the word table under {@code dir/table} ({@link BowNetServable} loads them). Call between
   * epochs. With a table on shards, {@code dir} must be inside the shards' data directory.
   */
  public void saveServable(Path dir, long step) throws IOException {
    ServableGraph.save(inference, dir, List.of("logits"), Map.of("model", "bow_net",
        "labels", String.join("\n", labels.list()), "feed", desc.text(),
        "bigrams", String.valueOf(bigrams)));
    words.save(dir.resolve(BowNetServable.TABLE_DIR), step);
  }
}
