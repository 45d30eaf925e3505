package dev.dynembed.word2vec;

import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.tools.LocalShardProcesses;
import dev.dynembed.table.client.SimulatedLatency;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.RowEncoding;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code bin/word2vec}: train, nearest, analogy, eval, export. */
@Command(name = "word2vec", mixinStandardHelpOptions = true,
    description = "word2vec (skip-gram, negative sampling) on the dictionary-free embedding table",
    subcommands = {Word2VecCli.Train.class, Word2VecCli.Nearest.class, Word2VecCli.Analogy.class,
        Word2VecCli.Eval.class, Word2VecCli.Export.class})
public final class Word2VecCli {
  public static void main(String[] args) {
    // java.util.logging (gRPC, the table client) as one line each, starting on a line of its own
    // so that a message never lands inside the progress bar
    if (System.getProperty("java.util.logging.SimpleFormatter.format") == null) {
      System.setProperty("java.util.logging.SimpleFormatter.format", "%n%4$s: %5$s%6$s%n");
    }
    System.exit(run(args, System.out, System.err));
  }

  /** Runs a command line; errors of input are one line on {@code err}, never a stack trace. */
  /**
   * Remote shards write their part of every checkpoint under the model directory, which must lie
   * inside their --data-dir (docs/design/0009-security.md). Checked before training with a
   * one-row probe table, so that a misplaced --model fails now, not at the end of the run.
   */
  static void checkShardsCanCheckpoint(TableClient c, Path modelDir) {
    String name = "w2v-preflight-" + Long.toHexString(System.nanoTime());
    Path probe = modelDir.resolve("." + name);
    try {
      c.createTable(dev.dynembed.table.common.TableConfigs.builder(name, 1).build())
          .save(probe, 0);
    } catch (TableException e) {
      throw new CorpusException("the shards cannot write this model's checkpoints under "
          + modelDir + " (" + e.getMessage() + "): start them with a --data-dir that contains"
          + " the model directory (the same machine, or a shared file system at the same path)");
    } finally {
      try {
        c.dropTable(name);
      } catch (RuntimeException ignored) {
        // the probe may not exist (create failed); nothing else to undo
      }
      Dirs.deleteQuietly(probe); // a leftover probe directory is harmless
    }
  }

  public static int run(String[] args, PrintStream out, PrintStream err) {
    CommandLine cl = new CommandLine(new Word2VecCli());
    cl.setOut(new java.io.PrintWriter(out, true));
    cl.setErr(new java.io.PrintWriter(err, true));
    cl.setExecutionExceptionHandler((e, line, parsed) -> {
      Throwable t = e;
      while ((t instanceof UncheckedIOException || t.getClass() == RuntimeException.class)
          && t.getCause() != null && t.getMessage() == null) {
        t = t.getCause();
      }
      if (t instanceof CorpusException || t instanceof TableException
          || t instanceof UncheckedIOException || t instanceof dev.dynembed.job.JobException) {
        err.println("word2vec: error: " + t.getMessage());
      } else {
        err.println("word2vec: error: " + t);
        if (System.getenv("DYNEMBED_DEBUG") != null) {
          t.printStackTrace(err);
        } else {
          err.println("(set DYNEMBED_DEBUG=1 for the stack trace)");
        }
      }
      return 2;
    });
    return cl.execute(args);
  }

  @Command(name = "train", mixinStandardHelpOptions = true,
      description = "Train on raw text files (streamed; no vocabulary pass unless --count-pass)")
  static final class Train implements Callable<Integer> {
    @Option(names = "--input", required = true, split = ",", description = "text files (UTF-8, whitespace-separated words)")
    List<Path> input;
    @Option(names = "--model", required = true, description = "model directory (checkpoint, loss curve)")
    Path model;
    @Option(names = "--dim", defaultValue = "" + Word2VecConfig.DEFAULT_DIM, description = "vector"
        + " length of each word (default ${DEFAULT-VALUE})") int dim;
    @Option(names = "--window", defaultValue = "" + Word2VecConfig.DEFAULT_WINDOW, description =
        "context words on each side, the window shrunk at random per word as the C tool does"
        + " (default ${DEFAULT-VALUE})") int window;
    @Option(names = "--negative", defaultValue = "" + Word2VecConfig.DEFAULT_NEGATIVE, description =
        "negative samples per (word, context) pair (default ${DEFAULT-VALUE})") int negative;
    @Option(names = "--sample", defaultValue = "" + Word2VecConfig.DEFAULT_SAMPLE, description =
        "subsampling threshold of frequent words, from the live counts (0 = none; default"
        + " ${DEFAULT-VALUE})") double sample;
    @Option(names = "--min-count", defaultValue = "" + Word2VecConfig.DEFAULT_MIN_COUNT,
        description = "a word gets vectors once seen this many times (the tables' min_count;"
        + " default ${DEFAULT-VALUE})") int minCount;
    @Option(names = "--epochs", defaultValue = "" + Word2VecConfig.DEFAULT_EPOCHS, description =
        "passes over the input (default ${DEFAULT-VALUE})") int epochs;
    @Option(names = "--optimizer", defaultValue = Word2VecConfig.DEFAULT_OPTIMIZER_SPELLING, description = "adagrad (default) or sgd") String optimizer;
    @Option(names = "--alpha", description = "starting learning rate (default: 0.3 adagrad, 0.025 sgd)") Float alpha;
    @Option(names = "--batch", defaultValue = "" + Word2VecConfig.DEFAULT_BATCH_PAIRS, description = "pairs per step (default ${DEFAULT-VALUE})") int batch;
    @Option(names = "--negative-pool", description = "negatives drawn per step, shared by the"
        + " batch's pairs (each picks --negative among them); 0 = independent draws per pair"
        + " (default: a quarter of the batch)") Integer negativePool;
    @Option(names = "--implicit-steps", defaultValue = "auto", description = "damp each row's"
        + " summed gradient of a step by its curvature, 1 / (1 + 2 alpha C) (implicit SGD): on,"
        + " off, or auto (on with sgd, whose summed batches diverge without it; off with adagrad;"
        + " default ${DEFAULT-VALUE})")
    String implicitSteps;
    @Option(names = "--count-pass", description = "count the whole corpus before training (the C"
        + " tool's vocabulary pass): admission and subsampling use the final counts from the"
        + " start")
    boolean countPass;
    @Option(names = "--table-max-mb", defaultValue = "0", description = "memory cap of each"
        + " of the two tables, MiB over all shards (their max_bytes; 0 = none): past it the least"
        + " frequent words leave memory, dropped, or with --disk-tier moved to disk")
    long tableMaxMb;
    @Option(names = "--disk-tier", description = "words the memory cap pushes out move to the"
        + " shards' disk tier (RocksDB) and come back when next seen: tables larger than memory")
    boolean diskTier;
    @Option(names = "--pmi-positives", defaultValue = "0", description = "extra positive pairs"
        + " per center word from the second epoch on, drawn by positive PMI from the counts of the"
        + " first epoch's window pairs that the shards keep (0 = off; default ${DEFAULT-VALUE})")
    int pmiPositives;
    @Option(names = "--shared-negatives", description = "pWord2Vec's orientation: the context"
        + " words' input rows predict the center's output row, and the contexts of one window"
        + " share their negatives (off by default: one draw per pair)")
    boolean sharedNegatives;
    @Option(names = "--seed", defaultValue = "" + Word2VecConfig.DEFAULT_SEED, description =
        "seed of the row initializer, the windows, subsampling and negatives (default"
        + " ${DEFAULT-VALUE})") long seed;
    @Option(names = "--threads", defaultValue = "2", description = "Hogwild training threads"
        + " (default ${DEFAULT-VALUE})") int threads;
    @Option(names = "--prefetch", defaultValue = "2", description = "batches each thread reads ahead (0 = none; a 1-thread run is then exactly reproducible)")
    int prefetch;
    @Option(names = "--pipeline", defaultValue = "auto", description = "overlap each step's table"
        + " reads and gradient writes with the neighbouring steps' compute: on, off, or auto (on"
        + " with --endpoints, whose shards run elsewhere; off in process and with --shards, whose"
        + " shards share this machine's cores and gain nothing from the overlap; default"
        + " ${DEFAULT-VALUE})")
    String pipeline;
    @Option(names = "--wire-rows", defaultValue = "float32", description = "how rows travel from"
        + " shards: float32, bfloat16 or float16 (16-bit halves the bytes; default"
        + " ${DEFAULT-VALUE})")
    String wireRows;
    @Option(names = "--simulated-rtt-ms", defaultValue = "0", description = "benchmarks: add this"
        + " many milliseconds of network round trip to every shard call (default 0)")
    double simulatedRttMs;
    @Option(names = "--name", defaultValue = Word2VecConfig.DEFAULT_NAME, description = "table name prefix (default ${DEFAULT-VALUE})") String name;
    @picocli.CommandLine.Mixin
    dev.dynembed.table.tools.cli.TableServiceOptions service =
        new dev.dynembed.table.tools.cli.TableServiceOptions("2g");
    @picocli.CommandLine.Mixin
    dev.dynembed.table.tools.cli.ConnectionOptions connection =
        new dev.dynembed.table.tools.cli.ConnectionOptions();

    @picocli.CommandLine.Mixin
    dev.dynembed.job.JobOptions jobOpts = new dev.dynembed.job.JobOptions();
    @Option(names = "--checkpoint-every", defaultValue = "0", description = "seconds between checkpoints (0 = only at the end)")
    long checkpointEvery;
    @Option(names = "--checkpoint-every-rounds", defaultValue = "0", description = "also"
        + " checkpoint after every N rounds (a round: one byte range per thread and worker; 0 ="
        + " no)")
    int checkpointEveryRounds;
    @Option(names = "--stop-after-rounds", defaultValue = "0", description = "checkpoint and"
        + " stop after N rounds, as an interrupted run would (--resume continues; 0 = run to the"
        + " end)")
    int stopAfterRounds;
    @Option(names = "--resume", description = "continue the model's interrupted training") boolean resume;
    @Option(names = "--overwrite", description = "replace an existing model") boolean overwrite;
    @Option(names = "--init-from", paramLabel = "MODEL", description = "continual training:"
        + " start from this model's tables (rows, optimizer state, word counts) and train on"
        + " these files, new words getting rows; same --optimizer and --name, the same --dim or a"
        + " larger one (the model's rows are widened to it). MODEL may be --model itself"
        + " (continued in place)")
    Path initFrom;
    @Option(names = "--init-schedule", defaultValue = "restart", description = "with"
        + " --init-from: restart (the learning rate starts again from --alpha) or continue (it"
        + " goes on from where one run over the model's corpus and these files would be)")
    String initSchedule;
    @Option(names = "--show", split = ",", description = "words whose nearest neighbours to print at the end")
    List<String> show = List.of();

    @Override
    public Integer call() throws Exception {
      Word2VecConfig cfg = config();
      try {
        service.check();
      } catch (IllegalArgumentException e) {
        throw new CorpusException(e.getMessage());
      }
      String table = service.endpoints();
      int shards = service.shards();
      if (!List.of("auto", "on", "off").contains(pipeline)) {
        throw new CorpusException("--pipeline must be on, off or auto but was '" + pipeline + "'");
      }
      // auto: on when the shards have cores of their own. Pipelining costs CPU (optimizer state
      // travels with the rows; the trainer replays its own update), ~9% more per word on the
      // trainer and ~7% on the shards; it pays where the trainer would otherwise wait
      // (docs/benchmarks.md, issue 11).
      // (Redis is read in the trainer's threads: nothing to overlap)
      boolean pipelined = pipeline.equals("on")
          || (pipeline.equals("auto") && table != null && !service.redis());
      ClientOptions.Builder clientOptions = clientOptions();
      TextSplits.plan(input, 1); // check the files before starting anything
      jobOpts.check();
      if (jobOpts.enabled() && initFrom != null) {
        throw new CorpusException("--init-from is for a single trainer; a job's workers would"
            + " each need the model's schedule (start the job from a model by restoring it into"
            + " the shards with table-cli restore, then train)");
      }
      if (jobOpts.enabled() && table == null) {
        throw new CorpusException("--coordinator needs --endpoints: a job's workers share running"
            + " shards (an in-process table or --shards would be this worker's alone)");
      }
      Files.createDirectories(model);
      Path modelDir = model.toAbsolutePath().normalize();
      LocalShardProcesses procs = shards > 0 ? service.start(modelDir, "") : null;
      boolean leads;
      try {
        TableClient client = open(procs, table, clientOptions.build(), modelDir);
        String where = shards > 0 ? "local " + procs.describe()
            + (procs.spec().startsWith("etcd:") ? " (replicated, " + procs.spec() + ")" : "")
            : table != null ? (service.redis() ? table : "shards " + table)
            : "the in-process table";
        System.err.printf("word2vec: training on %s with %s, %d threads%s%s%n", input, where,
            threads, pipelined ? ", pipelined steps" : "",
            countPass && !resume ? "; counting the corpus first (--count-pass)" : "");
        dev.dynembed.job.JobCoordinator job = joinJob(cfg, table, client, modelDir);
        leads = job == null || job.leader();
        try (client) {
          Word2Vec w2v = new Word2Vec(cfg, client, threads, job == null ? 0 : job.index())
              .setPrefetch(prefetch)
              .setPipelining(pipelined);
          Word2Vec.Result r = train(w2v, job, modelDir);
          LossCurve.write(modelDir, r.lossCurve(), String.format(Locale.ROOT,
              "word2vec skip-gram, dim %d, window %d, negative %d, %d epochs", dim, window,
              negative, epochs));
          report(System.out, cfg, r, client, pipelined,
              shards > 0 || table != null ? w2v.traffic() : null, procs);
          System.out.printf("model            %s (loss curve: loss-curve.png)%n", modelDir);
        }
      } finally {
        if (procs != null) {
          procs.close();
        }
      }
      if (!show.isEmpty() && leads) {
        try (Queries q = new Queries(modelDir)) {
          for (String w : show) {
            printHits(w, () -> q.nearest(w, 8));
          }
        }
      }
      return 0;
    }

    /** The training configuration from the options; a wrong one is refused by name. */
    private Word2VecConfig config() {
      Word2VecConfig.Optimizer opt = Word2VecConfig.Optimizer.parse(optimizer);
      if (!List.of("auto", "on", "off").contains(implicitSteps)) {
        throw new CorpusException("--implicit-steps must be on, off or auto but was '"
            + implicitSteps + "'");
      }
      return Word2VecConfig.builder().dim(dim).window(window).negative(negative)
          .sample(sample).minCount(minCount).epochs(epochs).alpha(alpha).optimizer(opt)
          .batchPairs(batch).seed(seed).name(name).negativePool(negativePool)
          .implicitSteps(implicitSteps.equals("auto") ? null : implicitSteps.equals("on"))
          .countPass(countPass).tableMaxBytes(tableMaxMb << 20).diskTier(diskTier)
          .redisTier(service.redisTier() != null).pmiPositives(pmiPositives)
          .sharedNegatives(sharedNegatives).build();
    }

    /** The client's options: the connection's, the rows' wire encoding, a simulated RTT. */
    private ClientOptions.Builder clientOptions() {
      RowEncoding rowEncoding = switch (wireRows) {
        case "float32" -> RowEncoding.FLOAT32;
        case "bfloat16" -> RowEncoding.BFLOAT16;
        case "float16" -> RowEncoding.FLOAT16;
        default -> throw new CorpusException("--wire-rows must be float32, bfloat16 or float16"
            + " but was '" + wireRows + "'");
      };
      if (!(simulatedRttMs >= 0 && simulatedRttMs <= 10_000)) {
        throw new CorpusException("--simulated-rtt-ms must be in [0, 10000] but was "
            + simulatedRttMs);
      }
      ClientOptions.Builder b = connection.apply(ClientOptions.builder().rowEncoding(rowEncoding));
      if (simulatedRttMs > 0) {
        // the delay is a gRPC interceptor: the data calls must go through gRPC to see it
        b.interceptors(List.of(new SimulatedLatency(
            java.time.Duration.ofNanos((long) (simulatedRttMs * 1e6)))))
            .dataPlane(ClientOptions.DataPlane.GRPC);
      }
      return b;
    }

    /**
     * The tables: on the shard processes started here, on running shards (which must be able
     * to write the model's checkpoint), or in process.
     */
    private TableClient open(LocalShardProcesses procs, String table, ClientOptions options,
        Path modelDir) {
      if (procs != null) {
        return service.open(procs, options);
      }
      if (table == null) {
        return TableClients.inProcess(modelDir);
      }
      TableClient client = TableClients.open(table, options);
      try {
        if (!jobOpts.enabled()) {
          checkShardsCanCheckpoint(client, modelDir);
        }
      } catch (RuntimeException e) {
        client.close();
        throw e;
      }
      return client;
    }

    /** This process's place in a multi-worker job (null: alone); closes the client on failure. */
    private dev.dynembed.job.JobCoordinator joinJob(Word2VecConfig cfg, String table,
        TableClient client, Path modelDir) {
      if (!jobOpts.enabled()) {
        return null;
      }
      Map<String, String> settings = new java.util.TreeMap<>(cfg.toMap());
      settings.put("corpus", Word2Vec.fingerprint(input));
      settings.put("threads", String.valueOf(threads));
      settings.put("table", table);
      settings.put("resume", String.valueOf(resume));
      settings.put("checkpoint_every", String.valueOf(checkpointEvery));
      settings.put("checkpoint_every_rounds", String.valueOf(checkpointEveryRounds));
      settings.put("stop_after_rounds", String.valueOf(stopAfterRounds));
      System.err.printf("word2vec: joining job %s (%d workers) at %s...%n",
          jobOpts.name(name), jobOpts.workers(), jobOpts.coordinator());
      dev.dynembed.job.JobCoordinator job = null;
      try {
        job = jobOpts.join(name, settings);
        if (job.leader() || job.elastic()) {
          // in an elastic job any worker may come to lead (and save) when others leave
          checkShardsCanCheckpoint(client, modelDir);
        }
      } catch (RuntimeException e) {
        if (job != null) {
          job.fail(e);
          job.close();
        }
        client.close();
        throw e;
      }
      System.err.printf("word2vec: worker %d %s %d%s%s%n", job.index(),
          job.joining() ? "joining the running job started by" : "of", job.workers(),
          job.leader() ? " (leader: checkpoints the tables)" : "",
          job.elastic() ? "; elastic: a worker that leaves has its share re-planned" : "");
      return job;
    }

    private Word2Vec.Result train(Word2Vec w2v, dev.dynembed.job.JobCoordinator job,
        Path modelDir) {
      Progress progress = new Progress(System.err, System.console() != null);
      try {
        if (!List.of("restart", "continue").contains(initSchedule)) {
          throw new CorpusException("--init-schedule must be restart or continue but was '"
              + initSchedule + "'");
        }
        Word2Vec.TrainOptions options = new Word2Vec.TrainOptions(modelDir, checkpointEvery,
            resume, overwrite, checkpointEveryRounds, stopAfterRounds);
        if (initFrom != null) {
          options = options.initFrom(initFrom, initSchedule.equals("continue"));
        } else if (!initSchedule.equals("restart")) {
          throw new CorpusException("--init-schedule needs --init-from");
        }
        Word2Vec.Result r = w2v.train(input, options, progress::update, job);
        if (job != null) {
          job.finish();
        }
        return r;
      } finally {
        if (job != null) {
          job.close();
        }
      }
    }

    /** What the run did: words, time, the tables' memory, rows crossed, memory and CPU. */
    private void report(PrintStream o, Word2VecConfig cfg, Word2Vec.Result r, TableClient client,
        boolean pipelined, dev.dynembed.table.client.RowTraffic traffic,
        LocalShardProcesses procs) {
      o.printf(Locale.ROOT, "%nwords trained    %,d (of %,d tokens read; %,d epochs)%n",
          r.words(), r.tokens(), epochs);
      o.printf(Locale.ROOT, "pairs            %,d%n", r.pairs());
      o.printf(Locale.ROOT, "vocabulary       %,d words (min-count %d)%n", r.vocabulary(),
          minCount);
      o.printf(Locale.ROOT, "time             %.1f s%n", r.seconds());
      if (cfg.tableMaxBytes() > 0) { // what the cap kept in memory, and what went to disk
        for (String t : List.of(cfg.inTable(), cfg.outTable())) {
          var c = client.openTable(t).describe().getCounters();
          o.printf(Locale.ROOT, "table %-10s %,d rows, %,d in memory (%.1f MiB; cap %d MiB),"
              + " %,d on disk; %,d demotions, %,d promotions%n", t, c.getKeys(),
              c.getKeys() - c.getColdKeys(), c.getBytesUsed() / 1048576.0,
              cfg.tableMaxBytes() >> 20, c.getColdKeys(), c.getDemotions(),
              c.getPromotions());
        }
      }
      if (pipelined) {
        o.printf(Locale.ROOT, "reads ahead      %,d of %,d table-op reads (pipelined)%n",
            r.aheadReads(), r.aheadReads() + r.ownReads());
      }
      o.printf(Locale.ROOT, "words/s          %,.0f%n", r.words() / r.seconds());
      if (r.words() > 0) { // rows the tables' optimizer updated (a step's distinct rows, summed)
        long in = client.openTable(cfg.inTable()).describe().getCounters().getUpdates();
        long out = client.openTable(cfg.outTable()).describe().getCounters().getUpdates();
        o.printf(Locale.ROOT, "rows updated     %.3f per trained word (%.3f input + %.3f output"
            + " rows)%s%n", (double) (in + out) / r.words(), (double) in / r.words(),
            (double) out / r.words(), traffic == null || traffic.maxStaleness() == 0 ? ""
                : String.format(Locale.ROOT, " on the shards, + %.3f in the row cache",
                    (double) traffic.localUpdates() / r.words()));
      }
      if (traffic != null && r.words() > 0) { // what crossed to and from the shards
        o.printf(Locale.ROOT, "rows crossing    %.3f read + %.3f written per trained word"
            + " (%.0f bytes)%n", (double) traffic.rowsRead() / r.words(),
            (double) traffic.rowsWritten() / r.words(),
            4.0 * (traffic.valuesRead() + traffic.valuesWritten()) / r.words());
        if (traffic.maxStaleness() > 0) {
          o.printf(Locale.ROOT, "row cache        %.1f%% hits, %,d rows cached, %,d flushes,"
              + " served rows %.1f steps old on average (at most %d; S = %d)%n",
              100 * traffic.hitRate(), traffic.cachedRows(), traffic.flushes(),
              traffic.meanAge(), traffic.maxAge(), traffic.maxStaleness());
        }
      }
      if (r.lastEpochSeconds() > 0) {
        o.printf(Locale.ROOT, "last epoch       %.1f s, %,.0f words/s%n",
            r.lastEpochSeconds(), r.lastEpochWords() / r.lastEpochSeconds());
      }
      o.printf(Locale.ROOT, "final loss       %.4f per pair%n", r.finalLoss());
      o.printf(Locale.ROOT, "peak memory      %,d MiB (this process)%s%n", peakRss() >> 20,
          procs == null ? "" : String.format(Locale.ROOT, " + %,d MiB (%s)",
              procs.peakRssBytes() >> 20, procs.describe()));
      // the JIT's share is printed apart: it is a fixed cost of each JVM, not of the words
      long self = ProcessHandle.current().pid();
      o.printf(Locale.ROOT, "cpu              %.1f s (this process, whole run; %.1f s of it"
          + " JIT compiling)%s%n", LocalShardProcesses.cpuSeconds(self),
          LocalShardProcesses.compilerCpuSeconds(self),
          procs == null ? "" : String.format(Locale.ROOT, " + %.1f s (%s; %.1f s JIT)",
              procs.cpuSeconds(), procs.describe(), procs.compilerCpuSeconds()));
      if (cfg.pmiPositives() > 0) {
        var c = client.openTable(cfg.outTable()).describe().getCounters();
        o.printf(Locale.ROOT, "co-occurrence    %,d pairs counted for %,d words (%,d dropped);"
            + " %d PMI positive(s) per center from epoch 2%n", c.getPairsCounted(),
            c.getPairAnchors(), c.getPairsDropped(), cfg.pmiPositives());
      }
      if (r.skippedLongWords() > 0) {
        o.printf(Locale.ROOT, "skipped          %,d words longer than %d bytes%n",
            r.skippedLongWords(), Word2Vec.MAX_WORD_BYTES);
      }
    }
  }

  static void printHits(String label, java.util.function.Supplier<List<Queries.Hit>> hits) {
    try {
      StringBuilder b = new StringBuilder();
      for (Queries.Hit h : hits.get()) {
        b.append(String.format(Locale.ROOT, "  %s %.3f", h.word(), h.score()));
      }
      System.out.println(label + ":" + b);
    } catch (CorpusException e) {
      System.out.println(label + ": " + e.getMessage());
    }
  }

  /** One hit per line: word and cosine. */
  static void printTable(List<Queries.Hit> hits) {
    for (Queries.Hit h : hits) {
      System.out.printf(Locale.ROOT, "  %-20s %.4f%n", h.word(), h.score());
    }
  }

  /** Peak resident set size of this process (Linux), or 0. */
  static long peakRss() {
    return Math.max(0, LocalShardProcesses.statusBytes(ProcessHandle.current().pid(), "VmHWM"));
  }

  @Command(name = "nearest", mixinStandardHelpOptions = true,
      description = "The words nearest to each WORD (cosine, through the topK op)")
  static final class Nearest implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "model directory of a trained"
        + " model (its checkpoint)") Path model;
    @Option(names = "-k", defaultValue = "10", description = "neighbours to print per word"
        + " (default ${DEFAULT-VALUE})") int k;
    @Option(names = "--search-breadth", defaultValue = "0", description = "0: exact (a scan of"
        + " every word); N > 0: an approximate index (HNSW) is built when the model loads and"
        + " each query explores N candidates (default ${DEFAULT-VALUE})") int searchBreadth;
    @Option(names = "--endpoints", description = "ask these shards (or serving replicas:"
        + " table-server --serve-from) for the model's rows instead of loading its checkpoint:"
        + " answers that follow a running training; --model gives the settings")
    String endpoints;
    @Parameters(arity = "1..*", paramLabel = "WORD", description = "words to find the"
        + " neighbours of, each on its own") List<String> words;

    @Override
    public Integer call() {
      List<String> errors = new java.util.ArrayList<>();
      try (Queries q = new Queries(model, searchBreadth, endpoints)) {
        for (String w : words) {
          try {
            List<Queries.Hit> hits = q.nearest(w, k);
            System.out.println(w + ":");
            printTable(hits);
          } catch (CorpusException e) {
            errors.add(e.getMessage());
          }
        }
      }
      if (!errors.isEmpty()) {
        throw new CorpusException(String.join("; ", errors));
      }
      return 0;
    }
  }

  @Command(name = "analogy", mixinStandardHelpOptions = true,
      description = "A is to B as C is to ?  (nearest to B - A + C, through the topK op)")
  static final class Analogy implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "model directory of a trained"
        + " model (its checkpoint)") Path model;
    @Option(names = "-k", defaultValue = "5", description = "answers to print (default"
        + " ${DEFAULT-VALUE})") int k;
    @Option(names = "--search-breadth", defaultValue = "0", description = "0: exact (a scan of"
        + " every word); N > 0: an approximate index (HNSW) is built when the model loads and"
        + " each query explores N candidates (default ${DEFAULT-VALUE})") int searchBreadth;
    @Parameters(index = "0", paramLabel = "A", description = "the first word of the pair (man)")
    String a;
    @Parameters(index = "1", paramLabel = "B", description = "the second word of the pair (king)")
    String b;
    @Parameters(index = "2", paramLabel = "C", description = "the word to complete (woman);"
        + " the answers exclude A, B and C") String c;

    @Override
    public Integer call() {
      try (Queries q = new Queries(model, searchBreadth)) {
        List<Queries.Hit> hits = q.analogy(a, b, c, k);
        System.out.printf("%s : %s :: %s : ?%n", a, b, c);
        printTable(hits);
      }
      return 0;
    }
  }

  @Command(name = "eval", mixinStandardHelpOptions = true,
      description = "Analogy accuracy and word-similarity correlation, with out-of-vocabulary counts")
  static final class Eval implements Callable<Integer> {
    @Option(names = "--model", description = "a model directory") Path model;
    @Option(names = "--vectors", description = "or a word2vec-format file (text or binary), e.g. another tool's")
    Path vectors;
    @Option(names = "--similarity", split = ",", description = "word-similarity files: word1 word2 score")
    List<Path> similarity = List.of();
    @Option(names = "--analogies", description = "questions-words style file (': section' lines, then 'a b c d')")
    Path analogies;
    @Option(names = "--restrict", defaultValue = "30000", description = "analogies: search the N most frequent words (default ${DEFAULT-VALUE})")
    int restrict;
    @Option(names = "--keep-case", description = "do not lowercase the evaluation words") boolean keepCase;

    @Override
    public Integer call() {
      if ((model == null) == (vectors == null)) {
        throw new CorpusException("give exactly one of --model or --vectors");
      }
      if (similarity.isEmpty() && analogies == null) {
        throw new CorpusException("give --similarity files and/or --analogies");
      }
      VectorSet v = model != null ? VectorSet.fromModel(model) : VectorSet.read(vectors);
      System.out.printf(Locale.ROOT, "vectors: %,d words, dim %d%n", v.size(), v.dim());
      for (Path f : similarity) {
        Evaluation.Similarity s = Evaluation.similarity(v, f, !keepCase);
        System.out.printf(Locale.ROOT, "similarity %-24s spearman %.4f  (%d pairs, %d out of"
            + " vocabulary)%n", s.file(), s.spearman(), s.pairs(), s.oov());
      }
      if (analogies != null) {
        Evaluation.Analogies a = Evaluation.analogies(v, analogies, restrict, !keepCase);
        a.sections().forEach((name, s) -> System.out.printf(Locale.ROOT,
            "  %-28s %5d questions %5d oov  accuracy %.2f%%%n", name, s[0], s[1],
            s[0] - s[1] == 0 ? Double.NaN : 100.0 * s[2] / (s[0] - s[1])));
        System.out.printf(Locale.ROOT, "analogies  %-24s accuracy %.2f%%  (%d questions, %d out"
            + " of vocabulary)%n", a.file(), 100 * a.accuracy(), a.questions(), a.oov());
      }
      return 0;
    }
  }

  @Command(name = "export", mixinStandardHelpOptions = true,
      description = "Write the vectors in word2vec's text or binary format (most frequent first)")
  static final class Export implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "model directory of a trained"
        + " model (its checkpoint)") Path model;
    @Option(names = "--output", required = true, description = "file to write the vectors to")
    Path output;
    @Option(names = "--format", defaultValue = "binary", description = "text or binary (default ${DEFAULT-VALUE})")
    String format;

    @Override
    public Integer call() throws IOException {
      if (!format.equals("text") && !format.equals("binary")) {
        throw new CorpusException("--format must be text or binary, not '" + format + "'");
      }
      VectorSet v = VectorSet.fromModel(model);
      v.write(output, format.equals("binary"));
      System.out.printf(Locale.ROOT, "wrote %,d vectors of dim %d to %s (%s)%n", v.size(), v.dim(),
          output, format);
      return 0;
    }
  }
}
