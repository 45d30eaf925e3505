package dev.dynembed.word2vec;

import dev.dynembed.job.JobCoordinator;
import dev.dynembed.layers.AsyncExecutor;
import dev.dynembed.layers.Layers;
import dev.dynembed.layers.Trainer;
import dev.dynembed.ops.Sampling;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.GrowTableRequest;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableCounters;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Sgd;

/**
 * Skip-gram with negative sampling over string tokens, with no vocabulary pass: the input
 * vectors live in table {@code <name>_in} (read by {@code dynamicEmbeddingLookup}), the output
 * vectors in {@code <name>_out} (read by {@code sampledLogits}, which draws word2vec's unigram^0.75
 * negatives from the frequencies that table has counted). The output table is the vocabulary:
 * every word of the stream is counted there in the first epoch, and a word gets its rows once
 * seen {@code min_count} times (the table's admission rule). Frequent words are subsampled with
 * the live counts; windows shrink at random; the learning rate decays linearly with the bytes
 * read; N threads train Hogwild through the {@link AsyncExecutor}.
 *
 * <p>Training goes in rounds of one byte range per thread; between rounds a checkpoint
 * (tables + position) may be written, from which {@link #train} resumes exactly.
 */
public final class Word2Vec {
  /** What a progress display needs, sent about once a second and at the end. */
  public record Status(int epoch, int epochs, double fraction, long tokens, long words,
      long pairs, double seconds, double loss, double alpha, boolean done) {
    public double wordsPerSecond() {
      return seconds > 0 ? words / seconds : 0;
    }

    public double etaSeconds() {
      return fraction > 0 ? seconds * (1 - fraction) / fraction : Double.NaN;
    }
  }

  /** The outcome of {@link #train}. */
  /**
   * @param aheadReads table-reading op runs whose reads were made ahead of their step
   *     (pipelining); {@code ownReads} those that read when they ran
   * @param lastEpochSeconds wall time of the last epoch this call trained (closer to the steady
   *     state than the whole run: the JIT compiles for the first minute or so of a run), {@code
   *     lastEpochWords} its words; both 0 if this call trained no whole epoch from its start
   */
  public record Result(long tokens, long words, long pairs, double seconds, long vocabulary,
      long skippedLongWords, List<double[]> lossCurve, long aheadReads, long ownReads,
      double lastEpochSeconds, long lastEpochWords) {
    /**
     * The loss per pair at the end of the run: the mean over the last tenth of the words trained
     * ({@link #tailLoss}); NaN if the curve has no point.
     */
    public double finalLoss() {
      return tailLoss(lossCurve);
    }

    /**
     * The mean loss of a curve of (words, loss) points over its last tenth of words, each
     * interval weighted by the words it covered. Not the last point alone: the last interval
     * closes wherever the corpus ends, often after a few steps, and its mean moved by up to 5%
     * from run to run on Brown (a CI run's 4.8% above the in-memory loss, 2026-11-29) where the
     * tail's moves by a fraction of that.
     */
    public static double tailLoss(List<double[]> curve) {
      if (curve.isEmpty()) {
        return Double.NaN;
      }
      double end = curve.get(curve.size() - 1)[0];
      double from = end * 0.9;
      double sum = 0;
      double words = 0;
      for (int i = curve.size() - 1; i >= 0 && curve.get(i)[0] > from; i--) {
        double start = Math.max(from, i > 0 ? curve.get(i - 1)[0] : 0);
        double w = Math.max(0, curve.get(i)[0] - start);
        sum += w * curve.get(i)[1];
        words += w;
      }
      return words > 0 ? sum / words : curve.get(curve.size() - 1)[1];
    }
  }

  /** Reads made ahead and made by the ops themselves, over every thread's graph. */
  private long[] readCounts() {
    long[] c = new long[2];
    for (int i = 0; i < threads; i++) {
      long[] t = dev.dynembed.ops.GraphTables.of(executor.trainer(i).graph()).plannedReadCounts();
      c[0] += t[0];
      c[1] += t[1];
    }
    return c;
  }

  /**
   * Options of one {@link #train} call.
   *
   * @param checkpointEveryRounds also checkpoint after every N rounds (0 = no)
   * @param stopAfterRounds stop (after a checkpoint) once N rounds ran in this call, as an
   *     interrupted run would (0 = run to the end)
   */
  public record TrainOptions(Path modelDir, long checkpointEverySeconds, boolean resume,
      boolean overwrite, int checkpointEveryRounds, int stopAfterRounds, Path initFrom,
      boolean continueSchedule) {
    public TrainOptions {
      if (checkpointEverySeconds < 0 || checkpointEveryRounds < 0 || stopAfterRounds < 0) {
        throw new CorpusException("checkpoint intervals (--checkpoint-every,"
            + " --checkpoint-every-rounds) and --stop-after-rounds must be >= 0 but were "
            + checkpointEverySeconds + ", " + checkpointEveryRounds + ", " + stopAfterRounds);
      }
      if (initFrom != null && resume) {
        throw new CorpusException("--init-from starts a new run from a model; --resume continues"
            + " an interrupted run: give one of them");
      }
      if (continueSchedule && initFrom == null) {
        throw new CorpusException("--init-schedule continue needs --init-from");
      }
    }

    public TrainOptions(Path modelDir, long checkpointEverySeconds, boolean resume,
        boolean overwrite, int checkpointEveryRounds, int stopAfterRounds) {
      this(modelDir, checkpointEverySeconds, resume, overwrite, checkpointEveryRounds,
          stopAfterRounds, null, false);
    }

    /**
     * Continual training: this run starts from the model in {@code from} (its tables, rows,
     * slots and counts) instead of empty tables, and trains on its own files.
     *
     * @param continueSchedule the learning rate goes on from where a single run over the model's
     *     corpus and these files would be (the old run's share of the work done); false: it
     *     starts again from alpha, as in a new run
     */
    public TrainOptions initFrom(Path from, boolean continueSchedule) {
      return new TrainOptions(modelDir, checkpointEverySeconds, resume, overwrite,
          checkpointEveryRounds, stopAfterRounds, from, continueSchedule);
    }

    public TrainOptions(Path modelDir, long checkpointEverySeconds, boolean resume,
        boolean overwrite) {
      this(modelDir, checkpointEverySeconds, resume, overwrite, 0, 0);
    }
  }

  static final String CHECKPOINT = "checkpoint";
  static final int MAX_WORD_BYTES = 256;
  /** Words counted per table call while reading (whole sentences; a chunk ends past this). */
  static final int COUNT_CHUNK = 4096;
  /**
   * Chunks between refreshes of the total count (subsampling's threshold is sample * total; a
   * table-wide describe is a fan-out on shards). Every chunk while the total is small.
   */
  static final int TOTAL_EVERY = 8;

  private final Word2VecConfig cfg;
  private final int threads;
  private final EmbeddingTable in;
  private final EmbeddingTable out;
  private final AsyncExecutor executor;
  /** The job-wide index of this process's thread 0. */
  private final int firstThread;

  /** Creates (or opens, if identical) the two tables on {@code client} and one graph per thread. */
  public Word2Vec(Word2VecConfig cfg, TableClient client, int threads) {
    this(cfg, client, threads, 0);
  }

  /**
   * As above, for worker {@code worker} of a job: its threads draw negatives from their own
   * streams (thread t of the job: {@code worker * threads + t}), not the same ones as the other
   * workers' threads at the same step.
   */
  /** The client of the two tables (a model continued at a larger dim grows them). */
  private final TableClient client;

  public Word2Vec(Word2VecConfig cfg, TableClient client, int threads, int worker) {
    if (threads < 1 || threads > 256) {
      throw new CorpusException("threads (--threads) must be in 1..256 but was " + threads);
    }
    this.cfg = cfg;
    this.threads = threads;
    this.firstThread = worker * threads;
    this.client = client;
    this.in = client.createTable(inConfig(cfg));
    this.out = client.createTable(outConfig(cfg));
    this.executor = new AsyncExecutor(i -> graph(i), threads);
  }

  /** Input vectors: word2vec's uniform (-0.5/dim, 0.5/dim); rate set per step. */
  static TableConfig inConfig(Word2VecConfig cfg) {
    float r = 0.5f / cfg.dim();
    return TableConfigs.builder(cfg.inTable(), cfg.dim()).setOptimizer(optimizer(cfg))
        .setInitializer(TableConfigs.uniform(-r, r, cfg.seed()))
        .setMaxBytes(cfg.tableMaxBytes()).setDiskTier(cfg.diskTier())
        .setRedisTier(cfg.redisTier()).build();
  }

  /**
   * Output vectors: zeros; the counting table, with admission at min_count. With PMI positives
   * it also keeps the co-occurrence counts of (center, context) pairs: 64 partners per word, as
   * the Brown experiment (design 0026), up to 2^20 anchors per shard.
   */
  static TableConfig outConfig(Word2VecConfig cfg) {
    TableConfig.Builder b = TableConfigs.builder(cfg.outTable(), cfg.dim())
        .setOptimizer(optimizer(cfg))
        .setInitializer(TableConfigs.zeros()).setMinCount(cfg.minCount())
        .setMaxBytes(cfg.tableMaxBytes()).setDiskTier(cfg.diskTier())
        .setRedisTier(cfg.redisTier());
    if (cfg.pmiPositives() > 0) {
      b.setCooccurrence(dev.dynembed.table.v1.Cooccurrence.newBuilder()
          .setPartnersPerKey(PMI_PARTNERS).setMaxAnchors(1 << 20).setSketchKib(4096));
    }
    return b.build();
  }

  private volatile long pmiPositivesDrawn;

  /** The PMI positives this process added in its last {@code train} (0 without them). */
  public long pmiPositivesDrawn() {
    return pmiPositivesDrawn;
  }

  /** Partners kept per word for PMI positives. */
  static final int PMI_PARTNERS = 64;

  /**
   * The tables' optimizer. Adagrad by default: the loss is summed over a batch of thousands of
   * pairs, so a frequent word gets hundreds of gradient terms in one update; plain SGD at word2vec's
   * rate then overshoots and diverges (measured: Brown, 2 threads, batch 8192, loss 4.1 -> 1000),
   * while Adagrad's per-coordinate normalisation keeps the step bounded.
   */
  static dev.dynembed.table.v1.OptimizerConfig optimizer(Word2VecConfig cfg) {
    return cfg.optimizer() == Word2VecConfig.Optimizer.ADAGRAD ? TableConfigs.adagrad(cfg.alpha(), 0.1f, 1e-8f)
        : TableConfigs.sgd(cfg.alpha());
  }

  private Trainer graph(int thread) {
    SameDiff sd = SameDiff.create();
    // the batch's distinct center words, and for each pair which of them is its center: the
    // gathered lookup reads and updates each center's row once per step (a center has up to
    // 2 * window pairs; its pairs' gradients are summed before they go to the table)
    SDVariable centers = sd.placeHolder("centers", DataType.UTF8, -1);
    SDVariable centerOf = sd.placeHolder("center_of", DataType.INT32, -1);
    SDVariable context = sd.placeHolder("context", DataType.UTF8, -1, 1);
    SDVariable mask = sd.placeHolder("mask", DataType.FLOAT, -1, 1);
    Layers layers = new Layers(sd);
    // keys were counted by the reader: the ops count nothing
    SDVariable h = layers.ops().dynamicEmbeddingLookup("h", centers, centerOf, in, true,
        DataType.FLOAT, false); // [b, dim]
    // each thread of the job its own stream of negatives: with one seed, threads at the same
    // step would draw the same negatives (the draws are a function of seed and the graph's call
    // count); thread 0 of a lone process keeps the configured seed
    long seed = cfg.seed() + 0x9E3779B97F4A7C15L * (firstThread + thread);
    Sampling negatives = Sampling.builder(cfg.negative()).seed(seed)
        .perExample(cfg.negativePool()).countPositives(false) // the reader counts
        .implicitRowSteps(cfg.implicitSteps()).sharedByRuns(cfg.sharedNegatives()).build();
    SDVariable loss = layers.negativeSamplingLoss("loss", h, context, mask, out, negatives,
        true); // summed: word2vec's per-pair rate
    sd.updateVariableNameAndReference(loss.div(mask.sum()), "loss_per_pair");
    return new Trainer(sd, "loss", new Sgd(0.0), List.of(in, out));
  }

  /**
   * Batches each thread prepares ahead on a reader thread (default 2; see {@link
   * AsyncExecutor#setPrefetch}). 0 makes a single-thread run exactly reproducible: with
   * prefetching, the reader's counting races the step's negative sampling.
   */
  public Word2Vec setPrefetch(int batches) {
    executor.setPrefetch(batches);
    return this;
  }

  /**
   * Pipelined steps (see {@link AsyncExecutor#setPipelining}): each thread's next batch is read
   * from the tables while its current batch computes, and its gradients are applied while the
   * next step runs (a step's rows then miss the previous step's updates). Worth it with remote
   * tables, where a step otherwise waits for every round trip; off by default.
   */
  public Word2Vec setPipelining(boolean on) {
    executor.setPipelining(on);
    return this;
  }

  /**
   * What the two tables' client moved to and from the shards, and what its row cache saved
   * (docs/design/0022-row-cache.md); null in process.
   */
  public dev.dynembed.table.client.RowTraffic traffic() {
    var a = dev.dynembed.table.client.TableClients.traffic(in);
    var b = dev.dynembed.table.client.TableClients.traffic(out);
    return a == null || b == null ? null : a.plus(b);
  }

  public EmbeddingTable inputTable() {
    return in;
  }

  public EmbeddingTable outputTable() {
    return out;
  }

  /**
   * Trains on the files for the configured epochs (or what remains of them, with {@code resume}).
   *
   * @param progress told about once a second from a timer thread, and once at the end
   */
  public Result train(List<Path> files, TrainOptions opt, Consumer<Status> progress) {
    return train(files, opt, progress, null);
  }

  /**
   * Trains as worker {@code job.index()} of a job of {@code job.workers()} processes sharing these
   * tables (docs/design/0013-many-trainers.md), or alone with {@code job == null}. Every worker
   * plans the same byte ranges; each round gives each worker {@code threads} of them, and ends at
   * a barrier where the workers exchange their counters. After a round the leader (worker 0) may
   * checkpoint: no worker writes until it has (a second barrier), so the tables are cut at one
   * step. The leader checks and restores the tables and hands the others their position; the
   * result's counters are the job's (every worker's summed).
   *
   * @throws dev.dynembed.job.JobException if another worker left or a barrier timed out; a
   *     failure here stops the job for the others
   */
  public Result train(List<Path> files, TrainOptions opt, Consumer<Status> progress,
      JobCoordinator job) {
    try {
      return trainAs(files, opt, progress, job);
    } catch (RuntimeException e) {
      if (job != null) {
        job.fail(e); // a job already stopped keeps its first reason
      }
      throw e;
    }
  }

  private Result trainAs(List<Path> files, TrainOptions opt, Consumer<Status> progress,
      JobCoordinator job) {
    Run run = new Run(files, opt, job);
    run.start();
    run.plan();
    return run.train(progress);
  }

  /**
   * One call of {@link #train}: this worker's part of a job (or the whole of a run alone), in
   * rounds of byte ranges ({@code threads} per worker in the job), with a barrier after each
   * round in a job and checkpoints between rounds (by the leader).
   */
  private final class Run {
    private final TrainOptions opt;
    private final JobCoordinator job;
    private final int me;
    private final boolean leader;
    private final boolean elastic;
    private final boolean joining;
    private final String corpus;
    private final Path ckpt;
    private final List<Path> files;
    /**
     * Each worker's counters at the last barrier it reached (a worker that left an elastic job
     * keeps its last ones: they count the rounds it finished).
     */
    private final Map<Integer, String> counters = new java.util.TreeMap<>();
    /**
     * The workers the byte ranges are planned for: the job's W, or on resume the W of the run
     * that wrote the checkpoint (an elastic job may resume with another number).
     */
    private int planWorkers;
    private int rounds;
    private TrainingState st;
    private List<TextSplits.Split> splits;
    private long totalBytes;
    private long started;
    private LossMeter loss;
    /** The job's bytes, this worker's bytes and the participants, at the last barrier. */
    private final long[] atBarrier = new long[3];
    /** When and at how many words the epoch under way started here; 1 if from its start. */
    private final long[] epochStart = new long[3];
    /** Seconds and words of the last whole epoch trained here. */
    private final double[] lastEpoch = {0, 0};
    private long lastCheckpoint;

    Run(List<Path> files, TrainOptions opt, JobCoordinator job) {
      this.files = files;
      this.opt = opt;
      this.job = job;
      this.me = job == null ? 0 : job.index();
      this.leader = me == 0;
      this.elastic = job != null && job.elastic();
      this.joining = job != null && job.joining();
      this.planWorkers = job == null ? 1 : job.workers();
      this.corpus = fingerprint(files);
      this.ckpt = opt.modelDir().resolve(CHECKPOINT);
    }

    /** The position to start from: admitted into a running job, resumed, or new. */
    void start() {
      if (joining) {
        admitted();
        return;
      }
      try {
        st = leader ? begin(opt, ckpt, corpus, planWorkers, elastic) : new TrainingState();
      } catch (CorpusException e) {
        if (job != null && opt.resume() && !Trainer.hasCheckpoint(ckpt)) {
          throw new CorpusException(e.getMessage() + "; in a job, worker 0 (the leader) resumes"
              + " from its --model: give the worker whose model holds the checkpoint"
              + " --worker-index 0", e);
        }
        throw e;
      }
      if (job != null) {
        begun();
      }
    }

    /**
     * Joined a running elastic job: the leader admits it at the end of a round and hands it the
     * position and the job's counters; the tables are the running job's.
     */
    private void admitted() {
      System.err.printf("word2vec: worker %d waits to be admitted at the end of a round%n", me);
      Map<String, String> admitted = job.awaitAdmission();
      st = new TrainingState();
      st.loadPosition(admitted);
      st.loadWorker(admitted, me); // a worker that comes back continues its counters
      counters.putAll(workerCounters(admitted));
      rounds = Integer.parseInt(admitted.get("rounds"));
      planWorkers = Integer.parseInt(admitted.get("plan_workers"));
      System.err.printf("word2vec: worker %d admitted: epoch %d, byte range %d, with workers %s%n",
          me, st.epoch + 1, st.nextSplit, job.participants());
    }

    /** The leader's position (and, on resume, every worker's counters) to all. */
    private void begun() {
      Map<Integer, String> begun = job.barrier("begin", leader
          ? JobCoordinator.encode(st.job == null ? Map.of() : st.job) : "");
      if (!begun.containsKey(0)) {
        throw new dev.dynembed.job.JobException("worker 0 (the leader, which restores or starts"
            + " the tables) left the job before it began; start the job again");
      }
      Map<String, String> saved = JobCoordinator.decode(begun.get(0));
      if (saved.isEmpty()) {
        return;
      }
      if (!leader) {
        st.load(saved);
      }
      st.loadWorker(saved, me);
      planWorkers = Integer.parseInt(saved.getOrDefault("workers", String.valueOf(planWorkers)));
      // every worker's counters of the checkpoint (those that left too); indices no worker of
      // this run has are kept under negative keys, where no worker that joins can take them
      for (Map.Entry<Integer, String> c : workerCounters(saved).entrySet()) {
        int i = c.getKey();
        counters.put(i >= 0 && i >= job.workers() ? -1 - i : i, c.getValue());
      }
    }

    /** The byte ranges, and the vocabulary pass of a new run when the configuration asks. */
    void plan() {
      splits = TextSplits.plan(files, planWorkers * threads * 4);
      totalBytes = TextSplits.bytes(splits);
      if (!cfg.countPass() || opt.resume() || joining) {
        return;
      }
      // range k to worker k mod W; in an elastic job, the ranges of a worker that left before
      // the barrier are dealt again over the others (what it counted before it left stays
      // counted: those words' counts are higher than the corpus's, which admission and
      // subsampling tolerate)
      if (job == null) {
        countPass(splits);
      } else {
        job.dealOut("counted", splits.size(), mine -> countPass(mine.stream().map(splits::get)
            .toList()));
      }
    }

    /** How far the run is, 0..1, by which the learning rate falls. */
    private double done() {
      if (!elastic) {
        // each worker's schedule runs over its own share of the bytes
        return st.progressBytes.get() / ((double) cfg.epochs() * totalBytes / planWorkers);
      }
      // in an elastic job, whose shares change when a worker leaves, over the job's bytes:
      // those every worker had trained at the last barrier, plus this worker's since, times
      // the workers now in the job
      return (atBarrier[0] + (double) atBarrier[2] * (st.progressBytes.get() - atBarrier[1]))
          / ((double) cfg.epochs() * totalBytes);
    }

    private double alpha() {
      return cfg.alpha() * Math.max(1e-4, (1 - st.scheduleOffset) * (1 - done()));
    }

    private Status status(boolean finished) {
      return new Status(st.epoch, cfg.epochs(), finished ? 1 : Math.min(1, done()),
          st.tokens.get(), st.words.get(), st.pairs.get(), finished ? st.elapsed
          : (System.nanoTime() - started) / 1e9, loss.last(), alpha(), finished);
    }

    Result train(Consumer<Status> progress) {
      started = System.nanoTime() - (long) (st.elapsed * 1e9);
      loss = new LossMeter(st.curve);
      for (int i = 0; i < threads; i++) {
        executor.trainer(i).addListener(loss);
      }
      java.util.concurrent.ScheduledExecutorService timer =
          java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "word2vec-progress");
            t.setDaemon(true);
            return t;
          });
      timer.scheduleAtFixedRate(() -> {
        loss.sample(st.words.get());
        progress.accept(status(false));
      }, 1, 1, java.util.concurrent.TimeUnit.SECONDS);
      lastCheckpoint = System.nanoTime();
      epochStart[0] = System.nanoTime();
      epochStart[1] = st.words.get();
      epochStart[2] = st.nextSplit == 0 ? 1 : 0;
      atBarrier[2] = planWorkers;
      if (elastic) {
        atBarrier[0] = progressBytes(counters);
        atBarrier[1] = st.progressBytes.get();
        atBarrier[2] = job.participants().size();
      }
      try {
        while (st.epoch < cfg.epochs()) {
          String roundName = round();
          if (st.epoch == cfg.epochs()) {
            break; // the final checkpoint follows
          }
          boolean stop = opt.stopAfterRounds() > 0 && rounds >= opt.stopAfterRounds();
          betweenRounds(roundName, stop);
          if (stop) {
            st.elapsed = (System.nanoTime() - started) / 1e9;
            return result(st, loss.curve(), lastEpoch, counters);
          }
        }
      } finally {
        timer.shutdownNow();
      }
      st.elapsed = (System.nanoTime() - started) / 1e9;
      loss.sample(st.words.get());
      if (out.describe().getCounters().getKeys() == 0) {
        throw new CorpusException("no word of the corpus reached minCount (--min-count) "
            + cfg.minCount() + " (" + st.tokens.get() + " words read): nothing was trained; lower"
            + " the minimum count or give more text");
      }
      if (job == null || job.leader()) {
        save(ckpt, st, corpus, loss.curve(), true, counters, planWorkers);
      }
      if (job != null) {
        job.barrier("saved-end", "");
      }
      progress.accept(status(true));
      return result(st, loss.curve(), lastEpoch, counters);
    }

    /**
     * A round: threads byte ranges per worker in the job, the ranges left by workers that left
     * first (elastic), then the epoch's next ones; the worker of rank j trains the j-th group.
     * In a job, ends at the barrier every worker reaches after its last write. Returns the
     * round's name.
     */
    private String round() {
      int epoch = st.epoch;
      List<Integer> inJob = job == null ? List.of(0) : job.participants();
      int size = inJob.size() * threads;
      List<Integer> round = new ArrayList<>(st.orphans.subList(0,
          Math.min(size, st.orphans.size())));
      int fresh = Math.min(splits.size() - st.nextSplit, size - round.size());
      for (int k = 0; k < fresh; k++) {
        round.add(st.nextSplit + k);
      }
      int rank = inJob.indexOf(me);
      List<TextSplits.Split> mine = new ArrayList<>();
      for (int k = rank * threads; k < Math.min(round.size(), (rank + 1) * threads); k++) {
        mine.add(splits.get(round.get(k)));
      }
      if (!mine.isEmpty()) {
        executor.run(mine, mine.size(), sp -> () -> new PairBatches(cfg, out, sp, epoch, st),
            List.of("loss_per_pair"), this::alpha);
      }
      String roundName = epoch + "-" + st.nextSplit
          + (st.orphans.isEmpty() ? "" : "-o" + st.orphans.size());
      List<Integer> orphans = new ArrayList<>(st.orphans.subList(
          Math.min(size, st.orphans.size()), st.orphans.size()));
      st.nextSplit += fresh;
      rounds++;
      if (job != null) {
        orphans.addAll(roundBarrier(roundName, inJob, round));
      }
      st.orphans = List.copyOf(orphans);
      if (st.nextSplit == splits.size() && st.orphans.isEmpty()) { // the epoch is over
        st.epoch++;
        st.nextSplit = 0;
        if (epochStart[2] == 1) { // it was trained from its start by this call
          lastEpoch[0] = (System.nanoTime() - epochStart[0]) / 1e9;
          lastEpoch[1] = st.words.get() - epochStart[1];
        }
        epochStart[0] = System.nanoTime();
        epochStart[1] = st.words.get();
        epochStart[2] = 1;
      }
      return roundName;
    }

    /**
     * Every worker's writes of the round are done (run returns after its last write). A worker
     * that left during the round: what it wrote stays (Hogwild), its ranges (returned) are
     * trained again by the others, and its counters stay those of its last finished round.
     */
    private List<Integer> roundBarrier(String roundName, List<Integer> inJob,
        List<Integer> round) {
      Map<Integer, String> arrived = job.barrier("round-" + roundName,
          JobCoordinator.encode(st.workerMap()));
      counters.putAll(arrived);
      List<Integer> orphans = new ArrayList<>();
      for (int j = 0; j < inJob.size(); j++) {
        if (!arrived.containsKey(inJob.get(j))) {
          List<Integer> lost = round.subList(Math.min(round.size(), j * threads),
              Math.min(round.size(), (j + 1) * threads));
          orphans.addAll(lost);
          System.err.printf("word2vec: worker %d left job during round %s; its %d byte"
              + " range(s) go to the %d worker(s) still in it%n", inJob.get(j), roundName,
              lost.size(), arrived.size());
        }
      }
      atBarrier[0] = progressBytes(counters);
      atBarrier[1] = st.progressBytes.get();
      atBarrier[2] = arrived.size();
      return orphans;
    }

    /**
     * A checkpoint by the leader when one is due (or the run stops); in a job, a barrier that
     * nobody writes past while the leader saves, where an elastic job admits the workers that
     * joined it, with the position after this round and the job's counters.
     */
    private void betweenRounds(String roundName, boolean stop) {
      if ((job == null || job.leader()) && (stop || (opt.checkpointEverySeconds() > 0
          && System.nanoTime() - lastCheckpoint >= opt.checkpointEverySeconds() * 1_000_000_000L)
          || (opt.checkpointEveryRounds() > 0 && rounds % opt.checkpointEveryRounds() == 0))) {
        st.elapsed = (System.nanoTime() - started) / 1e9;
        save(ckpt, st, corpus, loss.curve(), false, counters, planWorkers);
        lastCheckpoint = System.nanoTime();
      }
      if (job == null) {
        return;
      }
      final int roundsDone = rounds;
      java.util.function.Supplier<Map<String, String>> admission = stop ? null : () -> {
        Map<String, String> m = new LinkedHashMap<>(st.position());
        m.put("rounds", String.valueOf(roundsDone));
        m.put("plan_workers", String.valueOf(planWorkers));
        putWorkerCounters(m, counters);
        return m;
      };
      job.barrier("saved-" + roundName, "", admission);
      atBarrier[2] = job.participants().size();
    }
  }

  /**
   * The C tool's vocabulary pass: every word of the corpus counted by the output table before
   * training ({@code threads} readers, one byte range each at a time), so that admission and
   * subsampling see the final counts from the first pair on.
   */
  private void countPass(List<TextSplits.Split> splits) {
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(
        threads, r -> {
          Thread t = new Thread(r, "word2vec-count");
          t.setDaemon(true);
          return t;
        });
    try {
      List<java.util.concurrent.Future<?>> done = new ArrayList<>();
      for (TextSplits.Split split : splits) {
        done.add(pool.submit(() -> {
          List<String> sentence = new ArrayList<>();
          List<String> chunk = new ArrayList<>(COUNT_CHUNK + 1024);
          try (TokenReader reader = new TokenReader(split, MAX_WORD_BYTES)) {
            while (reader.nextSentence(sentence)) {
              chunk.addAll(sentence);
              if (chunk.size() >= COUNT_CHUNK) {
                out.count(chunk.toArray(new String[0]), true);
                chunk.clear();
              }
            }
            if (!chunk.isEmpty()) {
              out.count(chunk.toArray(new String[0]), true);
            }
          }
        }));
      }
      for (java.util.concurrent.Future<?> f : done) {
        try {
          f.get();
        } catch (java.util.concurrent.ExecutionException e) {
          if (e.getCause() instanceof RuntimeException r) {
            throw r;
          }
          throw new IllegalStateException(e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while counting the corpus", e);
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /** This worker's result; in a job, the counters are the job's (from the last round's barrier). */
  private Result result(TrainingState st, List<double[]> curve, double[] lastEpoch,
      Map<Integer, String> counters) {
    long[] reads = readCounts();
    pmiPositivesDrawn = st.pmiPairs.get();
    long[] sums = {st.tokens.get(), st.words.get(), st.pairs.get()};
    if (!counters.isEmpty()) {
      sums = new long[3];
      for (String c : counters.values()) {
        Map<String, String> m = JobCoordinator.decode(c);
        sums[0] += Long.parseLong(m.get("tokens"));
        sums[1] += Long.parseLong(m.get("words"));
        sums[2] += Long.parseLong(m.get("pairs"));
      }
    }
    return new Result(sums[0], sums[1], sums[2], st.elapsed,
        in.describe().getCounters().getKeys(), st.skippedLong.get(), curve, reads[0], reads[1],
        lastEpoch[0], (long) lastEpoch[1]);
  }

  /**
   * The state a run starts from: the checkpoint's with {@code resume} (refused unless it was
   * written with the same settings, files and number of workers and threads, whose product
   * fixes the byte ranges a position refers to), else a fresh one on empty tables.
   */
  private TrainingState begin(TrainOptions opt, Path ckpt, String corpus, int workers,
      boolean elastic) {
    TrainingState st = new TrainingState();
    if (opt.resume()) {
      if (!Trainer.hasCheckpoint(ckpt)) {
        throw new CorpusException("resume (--resume): " + opt.modelDir()
            + " holds no checkpoint");
      }
      Map<String, String> extra = Trainer.readExtras(ckpt);
      Word2VecConfig saved = Word2VecConfig.fromMap(extra);
      if (!saved.equals(cfg)) {
        throw new CorpusException("resume (--resume): the checkpoint was written with "
            + saved.toMap() + " but this run asks for " + cfg.toMap()
            + "; resume with the same settings");
      }
      if (!corpus.equals(extra.get("corpus"))) {
        throw new CorpusException("resume (--resume): the checkpoint was trained on "
            + extra.get("corpus") + " but the input is now " + corpus
            + "; resume with the same files");
      }
      int savedWorkers = Integer.parseInt(extra.getOrDefault("workers", "1"));
      int savedThreads = Integer.parseInt(extra.getOrDefault("threads", String.valueOf(threads)));
      if ((savedWorkers != workers && !elastic) || savedThreads != threads) {
        throw new CorpusException("resume (--resume): the checkpoint was trained by "
            + savedWorkers + " worker(s) of " + savedThreads + " threads but this run has "
            + workers + " of " + threads + "; resume with --workers " + savedWorkers
            + " --threads " + savedThreads + " (its position counts their byte ranges)");
      }
      executor.trainer(0).restore(ckpt);
      st.load(extra);
      st.job = new LinkedHashMap<>(extra);
      st.job.remove("loss_curve");
    } else if (opt.initFrom() != null) {
      initFrom(opt, ckpt, st, corpus);
    } else {
      if (Files.exists(ckpt) && !opt.overwrite()) {
        throw new CorpusException(opt.modelDir() + " already holds a model; resume (--resume)"
            + " to continue its training or overwrite (--overwrite) to replace it");
      }
      TableCounters outCounters = out.describe().getCounters(); // one fan-out per table
      if (in.describe().getCounters().getKeys() > 0 || outCounters.getKeys() > 0
          || outCounters.getPendingKeys() > 0) {
        throw new CorpusException("tables " + cfg.inTable() + "/" + cfg.outTable() + " already"
            + " hold words (a previous run on these shards?); drop them, choose another name"
            + " (--name), or resume (--resume)");
      }
    }
    return st;
  }

  /**
   * Continual training's start (docs/design/0024-vectors-in.md): the model's tables restored into
   * this run's (rows, optimizer slots, counts, so that subsampling and negatives start from what
   * the model counted), its position and counters not (this run reads its own files from their
   * start). A run at a larger dim grows the model's tables to it (docs/design/0025: old columns
   * kept, new ones as a fresh model of that dim starts them). Refused by name when the model's
   * tables cannot be this run's: a smaller dim, another optimizer or table name.
   */
  private void initFrom(TrainOptions opt, Path ckpt, TrainingState st, String corpus) {
    Path src = opt.initFrom().toAbsolutePath().normalize().resolve(CHECKPOINT);
    if (!Trainer.hasCheckpoint(src)) {
      throw new CorpusException("--init-from: " + opt.initFrom() + " holds no word2vec model (no"
          + " checkpoint under " + src + ")");
    }
    boolean inPlace = src.equals(ckpt.toAbsolutePath().normalize());
    if (Files.exists(ckpt) && !inPlace && !opt.overwrite()) {
      throw new CorpusException(opt.modelDir() + " already holds a model; overwrite"
          + " (--overwrite) it with the continued one, or write it to another --model");
    }
    Map<String, String> extra = Trainer.readExtras(src);
    Word2VecConfig saved = Word2VecConfig.fromMap(extra);
    if (saved.dim() > cfg.dim()) {
      throw new CorpusException("--init-from: " + opt.initFrom() + " was trained at dim "
          + saved.dim() + " but this run asks for dim " + cfg.dim() + "; a model grows (a"
          + " larger --dim widens its rows) but does not shrink: continue at --dim "
          + saved.dim() + " or more");
    }
    if (saved.optimizer() != cfg.optimizer()) {
      throw new CorpusException("--init-from: " + opt.initFrom() + " was trained with the "
          + saved.optimizer().name().toLowerCase(java.util.Locale.ROOT) + " optimizer but this"
          + " run asks for " + cfg.optimizer().name().toLowerCase(java.util.Locale.ROOT)
          + " (its optimizer slots would not fit); continue with --optimizer "
          + saved.optimizer().name().toLowerCase(java.util.Locale.ROOT));
    }
    if (!saved.name().equals(cfg.name())) {
      throw new CorpusException("--init-from: " + opt.initFrom() + " holds tables named '"
          + saved.name() + "' but this run's are '" + cfg.name() + "'; continue with --name "
          + saved.name());
    }
    executor.trainer(0).restore(src);
    if (saved.dim() < cfg.dim()) { // the restored tables are the model's width: grow them
      grow(client, cfg);
      st.grownFrom = saved.dim();
    }
    // the work (bytes x epochs) the model holds: its own run's and that of the models it was
    // itself continued from
    st.priorWork = Double.parseDouble(extra.getOrDefault("init_prior_work", "0"))
        + saved.epochs() * (double) corpusBytes(extra.get("corpus"));
    if (opt.continueSchedule()) {
      // the rate goes on from where one run over all of it would be when the model's corpus
      // was done
      double mine = (double) cfg.epochs() * corpusBytes(corpus);
      st.scheduleOffset = st.priorWork / (st.priorWork + mine);
    }
    st.initFrom = opt.initFrom().toAbsolutePath().normalize().toString();
  }

  /**
   * Grows the model's tables to {@code cfg.dim()} (docs/design/0025): new keys start as a fresh
   * model of that dim starts them (so {@code --resume} opens the grown tables), and the held rows'
   * new columns are zeros in the input table (every word vector, its norm and cosines as they
   * were) and small random values in the output table (so the gradients reach the new columns of
   * both: with both zero, neither would move); every score is unchanged at the grow. Measured on
   * Brown against the new input columns drawn at random (the fresh row's): WordSim-353 after the
   * second half about 0.06 higher on average, level with a run continued at the old dim.
   */
  static void grow(TableClient client, Word2VecConfig cfg) {
    float r = 0.5f / cfg.dim();
    client.growTable(GrowTableRequest.newBuilder().setTable(cfg.inTable()).setDim(cfg.dim())
        .setInitializer(inConfig(cfg).getInitializer()).setNewColumns(TableConfigs.zeros())
        .build());
    client.growTable(GrowTableRequest.newBuilder().setTable(cfg.outTable()).setDim(cfg.dim())
        .setNewColumns(TableConfigs.uniform(-r, r, ~cfg.seed())).build());
  }

  /** The bytes of a corpus by its fingerprint ({@link #fingerprint}: path#size, ...). */
  static long corpusBytes(String fingerprint) {
    long sum = 0;
    if (fingerprint == null || fingerprint.isEmpty()) {
      return 0;
    }
    for (String f : fingerprint.split(",")) {
      int h = f.lastIndexOf('#');
      if (h > 0) {
        sum += Long.parseLong(f.substring(h + 1));
      }
    }
    return sum;
  }

  /** @param counters each worker's counters at this cut, by index (empty for a lone trainer) */
  private void save(Path ckpt, TrainingState st, String corpus, List<double[]> curve, boolean complete,
      Map<Integer, String> counters, int workers) {
    Map<String, String> extra = new LinkedHashMap<>(cfg.toMap());
    extra.putAll(st.toMap());
    extra.put("corpus", corpus);
    extra.put("threads", String.valueOf(threads));
    extra.put("workers", String.valueOf(workers));
    putWorkerCounters(extra, counters);
    extra.put("complete", String.valueOf(complete));
    StringBuilder c = new StringBuilder();
    synchronized (curve) {
      for (double[] p : curve) {
        c.append(c.length() == 0 ? "" : ";").append((long) p[0]).append(':').append(p[1]);
      }
    }
    extra.put("loss_curve", c.toString());
    executor.trainer(0).save(ckpt, extra);
  }

  /** Each worker's counters as {@code worker.I.key} entries: the inverse of {@link #workerCounters}. */
  private static void putWorkerCounters(Map<String, String> into, Map<Integer, String> counters) {
    for (Map.Entry<Integer, String> w : counters.entrySet()) {
      for (Map.Entry<String, String> e : JobCoordinator.decode(w.getValue()).entrySet()) {
        into.put("worker." + w.getKey() + "." + e.getKey(), e.getValue());
      }
    }
  }

  /** The bytes every worker had trained, by their last counters. */
  private static long progressBytes(Map<Integer, String> counters) {
    long bytes = 0;
    for (String c : counters.values()) {
      bytes += Long.parseLong(JobCoordinator.decode(c).get("progress_bytes"));
    }
    return bytes;
  }

  /** Each worker's counters ({@code worker.I.key} entries of a checkpoint or an admission). */
  static Map<Integer, String> workerCounters(Map<String, String> m) {
    Map<Integer, Map<String, String>> by = new java.util.TreeMap<>();
    for (Map.Entry<String, String> e : m.entrySet()) {
      String k = e.getKey();
      if (k.startsWith("worker.") && k.indexOf('.', 7) > 7) {
        int dot = k.indexOf('.', 7);
        by.computeIfAbsent(Integer.parseInt(k.substring(7, dot)), i -> new LinkedHashMap<>())
            .put(k.substring(dot + 1), e.getValue());
      }
    }
    Map<Integer, String> out = new java.util.TreeMap<>();
    by.forEach((i, c) -> out.put(i, JobCoordinator.encode(c)));
    return out;
  }

  /** Files and sizes: a resumed run must read the same corpus. */
  static String fingerprint(List<Path> files) {
    StringBuilder b = new StringBuilder();
    for (Path f : files) {
      try {
        b.append(b.length() == 0 ? "" : ",").append(f.toAbsolutePath().normalize()).append('#')
            .append(Files.size(f));
      } catch (java.io.IOException e) {
        throw new CorpusException("input file " + f + " cannot be read: " + e.getMessage(), e);
      }
    }
    return b.toString();
  }
}
