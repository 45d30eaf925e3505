package dev.dynembed.ops;

import dev.dynembed.table.v1.SamplerKind;

/**
 * How {@code sampledLogits} draws its candidates from the output table. Build with {@link
 * #builder(int)}; the defaults, in one place:
 *
 * <table>
 *   <caption>defaults</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@link Builder#sampler}</td><td>UNIGRAM, alpha 0.75</td><td>the table's sampler
 *       (UNIFORM, LOG_UNIFORM by frequency rank, UNIGRAM frequency^alpha)</td></tr>
 *   <tr><td>{@link Builder#keepAccidentalHits}</td><td>hits removed</td><td>a sampled key equal
 *       to one of the example's positives gets no logit</td></tr>
 *   <tr><td>{@link Builder#logQCorrection}</td><td>off</td><td>subtract log(S q(key)) from every
 *       logit (sampled softmax); negative sampling leaves it off</td></tr>
 *   <tr><td>{@link Builder#seed}</td><td>0</td><td>draws are a function of (seed, step,
 *       stream)</td></tr>
 *   <tr><td>{@link Builder#perExample}</td><td>off: S draws shared by the batch</td><td>each
 *       example its own S candidates (word2vec's negatives), from b·S independent draws or,
 *       with a pool P &gt; 0, picked among min(P, b·S) draws per step</td></tr>
 *   <tr><td>{@link Builder#sharedByRuns}</td><td>off</td><td>with {@code perExample}: a
 *       run of consecutive examples with the same first positive shares one set of candidates
 *       (pWord2Vec's negatives shared by a window's context words)</td></tr>
 *   <tr><td>{@link Builder#countPositives}</td><td>on</td><td>each positive occurrence counts
 *       toward its frequency (what the unigram sampler draws from); off for a caller that
 *       counts keys itself</td></tr>
 *   <tr><td>{@link Builder#implicitRowSteps}</td><td>off: summed</td><td>each candidate row's
 *       summed gradient is damped by its curvature, 1 / (1 + lr C), the implicit SGD step of
 *       {@link ImplicitSteps} (for plain SGD tables with many terms per row and step); the
 *       activation rows' curvature goes to the {@code dynamicEmbeddingLookup} that produced
 *       them</td></tr>
 * </table>
 *
 * <p>With a pool, each candidate is still distributed as the sampler's q (a uniform pick of an
 * i.i.d. draw is itself a draw), but examples share keys: fewer distinct rows to read and update
 * per step (docs/design/0006-word2vec.md measures the effect on word2vec).
 *
 * @param numSampled S candidates per example, &gt;= 0
 * @param alpha the unigram exponent, in (0, 10]; 0 means the default 0.75
 * @param pool with {@code perExample}: 0 for b·S independent draws, P &gt; 0 for picks among
 *     min(P, b·S) draws
 */
public record Sampling(int numSampled, SamplerKind sampler, float alpha,
    boolean removeAccidentalHits, boolean subtractLogQ, long seed, boolean perExample,
    boolean countPositives, int pool, boolean implicitRowSteps, boolean sharedByRuns) {
  public static final float DEFAULT_ALPHA = 0.75f;

  public Sampling {
    if (numSampled < 0) {
      throw new IllegalArgumentException("sampledLogits: numSampled must be >= 0 but was "
          + numSampled);
    }
    if (sampler == null || sampler == SamplerKind.SAMPLER_KIND_UNSPECIFIED
        || sampler == SamplerKind.UNRECOGNIZED) {
      throw new IllegalArgumentException("sampledLogits: sampler must be UNIFORM_SAMPLER,"
          + " LOG_UNIFORM_SAMPLER or UNIGRAM_SAMPLER but was " + sampler);
    }
    if (alpha == 0f) {
      alpha = DEFAULT_ALPHA; // 0 means the default, as on the wire
    }
    if (!(alpha > 0f && alpha <= 10f)) {
      throw new IllegalArgumentException("sampledLogits: alpha must be in (0, 10] but was "
          + alpha);
    }
    if (pool < 0) {
      throw new IllegalArgumentException("sampledLogits: pool must be >= 0 but was " + pool);
    }
    if (sharedByRuns && !perExample) {
      throw new IllegalArgumentException("sampledLogits: candidates shared by runs of examples"
          + " need per-example draws");
    }
    if (pool > 0 && !perExample) {
      throw new IllegalArgumentException("sampledLogits: a pool (" + pool + ") needs per-example"
          + " draws");
    }
  }

  /** The defaults above, with {@code numSampled} candidates per example. */
  public static Builder builder(int numSampled) {
    return new Builder(numSampled);
  }

  /** Draws per step for a batch of {@code b} examples. */
  int draws(int b) {
    if (!perExample) {
      return numSampled;
    }
    long all = (long) b * numSampled;
    return (int) (pool > 0 ? Math.min(pool, all) : all);
  }

  /** Builds a {@link Sampling}; see the class documentation for the defaults. */
  public static final class Builder {
    private final int numSampled;
    private SamplerKind sampler = SamplerKind.UNIGRAM_SAMPLER;
    private float alpha = DEFAULT_ALPHA;
    private boolean removeAccidentalHits = true;
    private boolean subtractLogQ;
    private long seed;
    private boolean perExample;
    private boolean countPositives = true;
    private int pool;
    private boolean implicitRowSteps;
    private boolean sharedByRuns;

    private Builder(int numSampled) {
      this.numSampled = numSampled;
    }

    /** The table's sampler; {@code alpha} is the unigram exponent (ignored by the others). */
    public Builder sampler(SamplerKind kind, float alpha) {
      this.sampler = kind;
      this.alpha = alpha;
      return this;
    }

    /** Keep sampled keys that equal one of the example's positives as negatives. */
    public Builder keepAccidentalHits() {
      this.removeAccidentalHits = false;
      return this;
    }

    /** Subtract log(S q(key)) from every logit (sampled softmax). */
    public Builder logQCorrection(boolean on) {
      this.subtractLogQ = on;
      return this;
    }

    public Builder seed(long seed) {
      this.seed = seed;
      return this;
    }

    /**
     * Each example gets its own candidates: {@code pool} 0 for independent draws, P &gt; 0 for
     * picks among min(P, b·S) draws per step.
     */
    public Builder perExample(int pool) {
      this.perExample = true;
      this.pool = pool;
      return this;
    }

    /** Whether each positive occurrence counts toward its frequency (default on). */
    public Builder countPositives(boolean on) {
      this.countPositives = on;
      return this;
    }

    /**
     * Implicit SGD steps for the candidate rows (and, through the lookup that produced the
     * activations, for the activation rows): see {@link ImplicitSteps}. Off by default.
     */
    public Builder implicitRowSteps(boolean on) {
      this.implicitRowSteps = on;
      return this;
    }

    /**
     * With {@link #perExample}: consecutive examples whose first positive is the same key form a
     * run, and every example of a run gets the run's candidates (the same picks). Each candidate
     * is still a draw from the sampler; what changes is that a run's examples share them, so
     * their rows are read once and stay in the processor's cache for the whole run. word2vec's
     * {@code --shared-negatives} feeds a window's (context, center) pairs as one run.
     */
    public Builder sharedByRuns(boolean on) {
      this.sharedByRuns = on;
      return this;
    }

    public Sampling build() {
      return new Sampling(numSampled, sampler, alpha, removeAccidentalHits, subtractLogQ, seed,
          perExample, countPositives, pool, implicitRowSteps, sharedByRuns);
    }
  }
}
