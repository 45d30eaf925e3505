package dev.dynembed.word2vec;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Hyper-parameters of a skip-gram negative-sampling run. The defaults live here, once: the
 * {@code DEFAULT_*} constants, {@link #defaultAlpha}, {@link #defaultPool} and {@link
 * #defaults()}; the CLI's options take theirs from them.
 *
 * @param dim vector size
 * @param window max distance of a context word (each center draws its window from 1..window)
 * @param negative negatives per (center, context) pair, drawn from unigram^0.75
 * @param sample subsampling threshold of frequent words (0 = off)
 * @param minCount a word gets vectors once seen this many times (the table's admission rule)
 * @param epochs passes over the corpus
 * @param alpha starting learning rate, decayed linearly to alpha * 1e-4
 * @param optimizer the tables' optimizer: ADAGRAD (default; stable with summed batches, where
 *     a frequent word gets hundreds of updates at once) or SGD (word2vec's own; with {@code
 *     implicitSteps}, at any batch size)
 * @param batchPairs (center, context) pairs per training step
 * @param seed initialisation, windows, subsampling and negatives
 * @param name prefix of the two tables ({@code <name>_in}, {@code <name>_out})
 * @param negativePool negatives drawn from the table per step; each pair picks its {@code
 *     negative} among them uniformly (every negative is still a unigram^0.75 draw). 0 draws
 *     {@code negative} for every pair (the C tool's way). The CLI's default, {@link
 *     #defaultPool}, is a quarter of the batch: 20x fewer draws than pairs x negatives and a
 *     third of the distinct negative rows of a batch-sized pool to read and update per step, at
 *     equal quality (docs/benchmarks.md)
 * @param implicitSteps each row's summed gradient of a step is damped by its curvature, {@code 1
 *     / (1 + 2 alpha C)} (implicit SGD; the ops' {@code ImplicitSteps}): what lets plain SGD train
 *     with summed batches of thousands of pairs. On by default with SGD, off with Adagrad
 * @param countPass count every word of the corpus before training (the C tool's vocabulary
 *     pass): admission and subsampling then use the final counts from the first pair on,
 *     instead of the counts so far. Off by default: one pass fewer, the same quality on Brown
 *     (docs/benchmarks.md)
 * @param tableMaxBytes a memory cap of each of the two tables (their {@code max_bytes}, over all
 *     shards); 0 = none. Without {@code diskTier} the cap evicts the least frequent words
 * @param diskTier the words the cap pushes out of memory move to the shards' disk tier
 *     (RocksDB) and come back when next seen (docs/design/0014-storage-tiers.md)
 * @param redisTier the tables keep their rows in the shards' Redis tier too (shards started
 *     with {@code --redis-tier}; docs/design/0018-redis-tier.md): written behind, and with a
 *     cap the words it pushes out live there only
 * @param pmiPositives extra positive pairs per center word, drawn by positive PMI from the
 *     co-occurrence counts the output table's shards keep of the first epoch's window pairs
 *     (docs/design/0026-cooccurrence-sampling.md); 0 = off (the default). From the second epoch
 * @param sharedNegatives pWord2Vec's orientation (Ji et al. 2016): each context word's input row
 *     predicts the center word's output row, and the context words of one window share their
 *     {@code negative} negatives, so a window's output rows (the center and its negatives) are
 *     read once for all its contexts (docs/design/0006-word2vec.md). Off by default
 */
public record Word2VecConfig(int dim, int window, int negative, double sample, int minCount,
    int epochs, float alpha, Optimizer optimizer, int batchPairs, long seed, String name,
    int negativePool, boolean implicitSteps, boolean countPass, long tableMaxBytes,
    boolean diskTier, boolean redisTier, int pmiPositives, boolean sharedNegatives) {

  /** Without PMI positives or shared negatives. */
  public Word2VecConfig(int dim, int window, int negative, double sample, int minCount,
      int epochs, float alpha, Optimizer optimizer, int batchPairs, long seed, String name,
      int negativePool, boolean implicitSteps, boolean countPass, long tableMaxBytes,
      boolean diskTier, boolean redisTier) {
    this(dim, window, negative, sample, minCount, epochs, alpha, optimizer, batchPairs, seed,
        name, negativePool, implicitSteps, countPass, tableMaxBytes, diskTier, redisTier, 0,
        false);
  }

  /** Without the Redis tier. */
  public Word2VecConfig(int dim, int window, int negative, double sample, int minCount,
      int epochs, float alpha, Optimizer optimizer, int batchPairs, long seed, String name,
      int negativePool, boolean implicitSteps, boolean countPass, long tableMaxBytes,
      boolean diskTier) {
    this(dim, window, negative, sample, minCount, epochs, alpha, optimizer, batchPairs, seed,
        name, negativePool, implicitSteps, countPass, tableMaxBytes, diskTier, false);
  }

  /** With no memory cap on the tables. */
  public Word2VecConfig(int dim, int window, int negative, double sample, int minCount,
      int epochs, float alpha, Optimizer optimizer, int batchPairs, long seed, String name,
      int negativePool, boolean implicitSteps, boolean countPass) {
    this(dim, window, negative, sample, minCount, epochs, alpha, optimizer, batchPairs, seed,
        name, negativePool, implicitSteps, countPass, 0, false);
  }

  /** With each optimizer's default for implicit steps and no counting pass. */
  public Word2VecConfig(int dim, int window, int negative, double sample, int minCount,
      int epochs, float alpha, Optimizer optimizer, int batchPairs, long seed, String name,
      int negativePool) {
    this(dim, window, negative, sample, minCount, epochs, alpha, optimizer, batchPairs, seed,
        name, negativePool, defaultImplicitSteps(optimizer), false);
  }

  public static final int DEFAULT_DIM = 100;
  public static final int DEFAULT_WINDOW = 5;
  public static final int DEFAULT_NEGATIVE = 5;
  public static final double DEFAULT_SAMPLE = 1e-3;
  public static final int DEFAULT_MIN_COUNT = 5;
  public static final int DEFAULT_EPOCHS = 5;
  /** The tables' optimizer; its name is the CLI's and the checkpoint's spelling. */
  public enum Optimizer {
    SGD, ADAGRAD;

    /** "sgd" or "adagrad". */
    public String spelling() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }

    /** The optimizer spelled {@code s}; a clear error for anything else. */
    public static Optimizer parse(String s) {
      for (Optimizer o : values()) {
        if (o.spelling().equals(s)) {
          return o;
        }
      }
      throw new CorpusException("optimizer (--optimizer) must be sgd or adagrad but was '" + s
          + "'");
    }
  }

  public static final Optimizer DEFAULT_OPTIMIZER = Optimizer.ADAGRAD;
  /** {@link #DEFAULT_OPTIMIZER}'s spelling, as a constant (for annotations). */
  public static final String DEFAULT_OPTIMIZER_SPELLING = "adagrad";
  /**
   * 4,096 since issue 17 (was 8,192): on Brown, medians of 3, WordSim-353 all / sim / rel 0.343 /
   * 0.488 / 0.262 against 0.294 / 0.452 / 0.151 at the same speed in process (time ratio 1.05,
   * last epoch 1.00), 1.07x the time on 2 shards; smaller batches sum fewer terms per row into one
   * step (docs/benchmarks.md).
   */
  public static final int DEFAULT_BATCH_PAIRS = 4096;
  public static final long DEFAULT_SEED = 1;
  public static final String DEFAULT_NAME = "w2v";

  /** Every parameter at its default (word2vec's usual settings, Adagrad on summed batches). */
  public static Word2VecConfig defaults() {
    return builder().build();
  }

  /** A builder at every default; named setters instead of 16 positional arguments. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding this configuration's values. */
  public Builder toBuilder() {
    return new Builder().dim(dim).window(window).negative(negative).sample(sample)
        .minCount(minCount).epochs(epochs).alpha(alpha).optimizer(optimizer)
        .batchPairs(batchPairs).seed(seed).name(name).negativePool(negativePool)
        .implicitSteps(implicitSteps).countPass(countPass).tableMaxBytes(tableMaxBytes)
        .diskTier(diskTier).redisTier(redisTier).pmiPositives(pmiPositives)
        .sharedNegatives(sharedNegatives);
  }

  /**
   * Builds a {@link Word2VecConfig}. Every value starts at its {@code DEFAULT_*}; three follow
   * others unless set: alpha ({@link #defaultAlpha} of the optimizer), the negative pool ({@link
   * #defaultPool} of the batch) and implicit steps ({@link #defaultImplicitSteps} of the
   * optimizer). {@link #build} checks the whole with the record's clear errors.
   */
  public static final class Builder {
    private int dim = DEFAULT_DIM;
    private int window = DEFAULT_WINDOW;
    private int negative = DEFAULT_NEGATIVE;
    private double sample = DEFAULT_SAMPLE;
    private int minCount = DEFAULT_MIN_COUNT;
    private int epochs = DEFAULT_EPOCHS;
    private Float alpha; // null: the optimizer's default
    private Optimizer optimizer = DEFAULT_OPTIMIZER;
    private int batchPairs = DEFAULT_BATCH_PAIRS;
    private long seed = DEFAULT_SEED;
    private String name = DEFAULT_NAME;
    private Integer negativePool; // null: a quarter of the batch
    private Boolean implicitSteps; // null: the optimizer's default
    private boolean countPass;
    private long tableMaxBytes;
    private boolean diskTier;
    private boolean redisTier;
    private int pmiPositives;
    private boolean sharedNegatives;

    private Builder() {}

    public Builder dim(int v) {
      dim = v;
      return this;
    }

    public Builder window(int v) {
      window = v;
      return this;
    }

    public Builder negative(int v) {
      negative = v;
      return this;
    }

    public Builder sample(double v) {
      sample = v;
      return this;
    }

    public Builder minCount(int v) {
      minCount = v;
      return this;
    }

    public Builder epochs(int v) {
      epochs = v;
      return this;
    }

    /** @param v the starting rate, or null for the optimizer's default */
    public Builder alpha(Float v) {
      alpha = v;
      return this;
    }

    public Builder optimizer(Optimizer v) {
      optimizer = v;
      return this;
    }

    public Builder batchPairs(int v) {
      batchPairs = v;
      return this;
    }

    public Builder seed(long v) {
      seed = v;
      return this;
    }

    public Builder name(String v) {
      name = v;
      return this;
    }

    /** @param v negatives drawn per step, or null for a quarter of the batch */
    public Builder negativePool(Integer v) {
      negativePool = v;
      return this;
    }

    /** @param v implicit steps on or off, or null for the optimizer's default */
    public Builder implicitSteps(Boolean v) {
      implicitSteps = v;
      return this;
    }

    public Builder countPass(boolean v) {
      countPass = v;
      return this;
    }

    public Builder tableMaxBytes(long v) {
      tableMaxBytes = v;
      return this;
    }

    public Builder diskTier(boolean v) {
      diskTier = v;
      return this;
    }

    public Builder redisTier(boolean v) {
      redisTier = v;
      return this;
    }

    public Builder pmiPositives(int v) {
      pmiPositives = v;
      return this;
    }

    public Builder sharedNegatives(boolean v) {
      sharedNegatives = v;
      return this;
    }

    public Word2VecConfig build() {
      return new Word2VecConfig(dim, window, negative, sample, minCount, epochs,
          alpha != null ? alpha : defaultAlpha(optimizer), optimizer, batchPairs, seed, name,
          negativePool != null ? negativePool : defaultPool(batchPairs),
          implicitSteps != null ? implicitSteps : defaultImplicitSteps(optimizer), countPass,
          tableMaxBytes, diskTier, redisTier, pmiPositives, sharedNegatives);
    }
  }

  /** The default negative pool of a batch: a quarter of its pairs (1,024 for 4,096). */
  public static int defaultPool(int batchPairs) {
    return Math.max(1, batchPairs / 4);
  }

  /** Implicit steps by default with SGD (which diverges on summed batches without them). */
  public static boolean defaultImplicitSteps(Optimizer optimizer) {
    return optimizer == Optimizer.SGD;
  }

  /** The default rate of each optimizer. */
  public static float defaultAlpha(Optimizer optimizer) {
    return optimizer == Optimizer.SGD ? 0.025f : 0.3f;
  }

  public Word2VecConfig {
    check(dim >= 1 && dim <= 4096, "dim (--dim) must be in 1..4096 but was " + dim);
    check(window >= 1 && window <= 100,
        "window (--window) must be in 1..100 but was " + window);
    check(negative >= 1 && negative <= 100,
        "negative (--negative) must be in 1..100 but was " + negative);
    check(sample >= 0 && sample < 1, "sample (--sample) must be in [0, 1) but was " + sample);
    check(minCount >= 1, "minCount (--min-count) must be >= 1 but was " + minCount);
    check(epochs >= 1, "epochs (--epochs) must be >= 1 but was " + epochs);
    check(alpha > 0 && alpha < 10, "alpha (--alpha) must be in (0, 10) but was " + alpha);
    check(optimizer != null, "optimizer (--optimizer) must be sgd or adagrad but was null");
    check(batchPairs >= 1 && batchPairs <= 1 << 18,
        "batchPairs (--batch) must be in 1..262144 but was " + batchPairs);
    check(negativePool >= 0 && negativePool <= 1 << 24,
        "negativePool (--negative-pool) must be in 0..16777216 but was " + negativePool);
    check(name != null && name.matches("[A-Za-z0-9_.-]{1,100}"),
        "name (--name) must match [A-Za-z0-9_.-]{1,100} but was '" + name + "'");
    check(tableMaxBytes >= 0, "tableMaxBytes (--table-max-mb) must be >= 0 but was "
        + tableMaxBytes);
    check(!diskTier || tableMaxBytes > 0, "the disk tier (--disk-tier) holds what a memory cap"
        + " pushes out: it needs --table-max-mb");
    check(!(diskTier && redisTier), "choose --disk-tier or --redis-tier, not both (one tier"
        + " below memory per table)");
    check(pmiPositives >= 0 && pmiPositives <= 16,
        "pmiPositives (--pmi-positives) must be in 0..16 but was " + pmiPositives);
  }

  private static boolean bool(String v) {
    if (!v.equals("true") && !v.equals("false")) {
      throw new IllegalArgumentException("not a boolean: '" + v + "'");
    }
    return v.equals("true");
  }

  private static void check(boolean ok, String message) {
    if (!ok) {
      throw new CorpusException(message);
    }
  }

  public String inTable() {
    return name + "_in";
  }

  public String outTable() {
    return name + "_out";
  }

  /** As checkpoint manifest entries. */
  public Map<String, String> toMap() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("dim", String.valueOf(dim));
    m.put("window", String.valueOf(window));
    m.put("negative", String.valueOf(negative));
    m.put("sample", String.valueOf(sample));
    m.put("min_count", String.valueOf(minCount));
    m.put("epochs", String.valueOf(epochs));
    m.put("alpha", String.valueOf(alpha));
    m.put("optimizer", optimizer.spelling());
    m.put("batch", String.valueOf(batchPairs));
    m.put("seed", String.valueOf(seed));
    m.put("name", name);
    m.put("negative_pool", String.valueOf(negativePool));
    m.put("implicit_steps", String.valueOf(implicitSteps));
    m.put("count_pass", String.valueOf(countPass));
    m.put("table_max_bytes", String.valueOf(tableMaxBytes));
    m.put("disk_tier", String.valueOf(diskTier));
    m.put("redis_tier", String.valueOf(redisTier));
    m.put("pmi_positives", String.valueOf(pmiPositives));
    m.put("shared_negatives", String.valueOf(sharedNegatives));
    return m;
  }

  public static Word2VecConfig fromMap(Map<String, String> m) {
    try {
      return new Word2VecConfig(Integer.parseInt(m.get("dim")), Integer.parseInt(m.get("window")),
          Integer.parseInt(m.get("negative")), Double.parseDouble(m.get("sample")),
          Integer.parseInt(m.get("min_count")), Integer.parseInt(m.get("epochs")),
          Float.parseFloat(m.get("alpha")), Optimizer.parse(m.get("optimizer")), Integer.parseInt(m.get("batch")),
          Long.parseLong(m.get("seed")), m.get("name"),
          Integer.parseInt(m.getOrDefault("negative_pool", "0")), // models before the pool: 0
          bool(m.getOrDefault("implicit_steps", "false")), // models before: summed steps
          bool(m.getOrDefault("count_pass", "false")),
          Long.parseLong(m.getOrDefault("table_max_bytes", "0")), // models before: no cap
          bool(m.getOrDefault("disk_tier", "false")),
          bool(m.getOrDefault("redis_tier", "false")), // models before: no Redis tier
          Integer.parseInt(m.getOrDefault("pmi_positives", "0")), // models before: none
          bool(m.getOrDefault("shared_negatives", "false"))); // models before: per pair
    } catch (RuntimeException e) {
      throw new CorpusException("the model's manifest has no valid word2vec settings: " + m, e);
    }
  }
}
