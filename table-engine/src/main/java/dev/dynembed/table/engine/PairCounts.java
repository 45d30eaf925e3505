package dev.dynembed.table.engine;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Bounded co-occurrence counts of key pairs and a sampler by them (issue 53 item 3,
 * docs/design/0026-cooccurrence-sampling.md): the shard that owns an anchor key keeps, for it, a
 * Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005) of at most {@code partners} partner
 * keys with their counts; each partner's count over all of this shard's anchors goes to a
 * count-min sketch ({@link AdmissionSketch}, conservative update). So memory is bounded by
 * {@code anchors x partners} entries plus the sketch, whatever the vocabulary.
 *
 * <p>Guarantees of a summary (per anchor, over the pairs reported for it, total {@code T_a}):
 * a partner's kept count never falls below its true count and exceeds it by at most its recorded
 * error; every partner whose true count exceeds {@code T_a / partners} is kept. While an anchor
 * has seen at most {@code partners} distinct partners its counts are exact.
 *
 * <p>PMI without another shard's frequencies: anchors are spread over the shards by their hash,
 * so the partner counts one shard sees are a fair share of the partners' global counts; PMI is
 * computed from this shard's own figures, {@code log(c(a,b) T / (c(a) m(b)))} with {@code T} the
 * pairs this shard counted, {@code c(a)} the anchor's total and {@code m(b)} the partner's count
 * over this shard's anchors (the sketch's estimate, never below the true one). The sampler draws
 * a partner of an anchor with probability proportional to its count ({@link Weight#COUNT}) or to
 * its positive PMI ({@link Weight#PPMI}), and reports each draw's probability (for sampled-loss
 * corrections).
 *
 * <p>Thread-safe: an anchor's summary is updated under its own lock; totals are atomic.
 * Deterministic for a given order of reports (a log replay in order reproduces every count).
 */
public final class PairCounts {
  /** What a draw's probability is proportional to. */
  public enum Weight {
    COUNT,
    PPMI
  }

  private final int partners;
  private final int maxAnchors;
  private final ConcurrentHashMap<Long, Summary> anchors = new ConcurrentHashMap<>();
  private final AdmissionSketch marginals;
  private final AtomicLong total = new AtomicLong();
  private final LongAdder dropped = new LongAdder();

  /**
   * @param partners the partners kept per anchor (1..1024)
   * @param maxAnchors the anchors kept (pairs of further anchors are counted as dropped)
   * @param sketchKib the partners' count-min sketch, in KiB
   */
  public PairCounts(int partners, int maxAnchors, long sketchKib) {
    if (partners < 1 || partners > 1024) {
      throw new IllegalArgumentException("partners per anchor must be in [1, 1024] but was "
          + partners);
    }
    if (maxAnchors < 1) {
      throw new IllegalArgumentException("max anchors must be positive but was " + maxAnchors);
    }
    this.partners = partners;
    this.maxAnchors = maxAnchors;
    this.marginals = new AdmissionSketch(sketchKib);
  }

  /** One anchor's Space-Saving summary: parallel arrays, at most {@code partners} entries. */
  private static final class Summary {
    long[] hash;
    byte[][] key;
    long[] count;
    long[] error;
    int size;
    long total; // pairs reported for this anchor
    // the draws' table, valid while no pair was counted anywhere since (PPMI reads the shard's
    // total and the partners' marginals): partners in hash order, cumulative weights
    Weight drawsWeight;
    long drawsAtTotal = -1;
    String[] drawKeys;
    double[] cum;

    Summary(int capacity) {
      int c = Math.min(capacity, 4);
      hash = new long[c];
      key = new byte[c][];
      count = new long[c];
      error = new long[c];
    }

    int find(long h, byte[] k) {
      for (int i = 0; i < size; i++) {
        if (hash[i] == h && Arrays.equals(key[i], k)) {
          return i;
        }
      }
      return -1;
    }

    void add(long h, byte[] k, long c, int capacity) {
      total += c;
      int i = find(h, k);
      if (i >= 0) {
        count[i] += c;
        return;
      }
      if (size < capacity) {
        if (size == hash.length) {
          int n = Math.min(capacity, size * 2);
          hash = Arrays.copyOf(hash, n);
          key = Arrays.copyOf(key, n);
          count = Arrays.copyOf(count, n);
          error = Arrays.copyOf(error, n);
        }
        hash[size] = h;
        key[size] = k;
        count[size] = c;
        error[size] = 0;
        size++;
        return;
      }
      int min = 0; // Space-Saving: the new partner takes the least count's place
      for (int j = 1; j < size; j++) {
        if (count[j] < count[min]) {
          min = j;
        }
      }
      hash[min] = h;
      key[min] = k;
      error[min] = count[min];
      count[min] += c;
    }
  }

  /**
   * Counts {@code count} co-occurrences of the pair (anchor, partner).
   *
   * @return false when the pair was dropped: a new anchor past {@code maxAnchors}
   */
  public boolean add(long anchorHash, long partnerHash, byte[] partnerKey, long count) {
    if (count < 1) {
      throw new IllegalArgumentException("a pair's count must be >= 1 but was " + count);
    }
    Summary s = anchors.get(anchorHash);
    if (s == null) {
      if (anchors.size() >= maxAnchors) {
        dropped.add(count);
        return false;
      }
      s = anchors.computeIfAbsent(anchorHash, h -> new Summary(partners));
    }
    synchronized (s) {
      s.add(partnerHash, partnerKey, count, partners);
    }
    marginals.add(partnerHash, count);
    total.addAndGet(count);
    return true;
  }

  /** As above, the partner by its UTF-8 text and hash. */
  public boolean add(long anchorHash, long partnerHash, String partner, long count) {
    return add(anchorHash, partnerHash, partner.getBytes(StandardCharsets.UTF_8), count);
  }

  /** A partner of an anchor as kept: its count, the count's error bound, its sketched marginal. */
  public record Partner(String key, long hash, long count, long error, long marginal) {}

  /** The partners kept for an anchor, in no particular order (empty when none). */
  public Partner[] partners(long anchorHash) {
    Summary s = anchors.get(anchorHash);
    if (s == null) {
      return new Partner[0];
    }
    synchronized (s) {
      Partner[] p = new Partner[s.size];
      for (int i = 0; i < s.size; i++) {
        p[i] = new Partner(new String(s.key[i], StandardCharsets.UTF_8), s.hash[i], s.count[i],
            s.error[i], marginals.estimate(s.hash[i]));
      }
      return p;
    }
  }

  /** The pairs reported for an anchor (kept or not). */
  public long anchorTotal(long anchorHash) {
    Summary s = anchors.get(anchorHash);
    if (s == null) {
      return 0;
    }
    synchronized (s) {
      return s.total;
    }
  }

  /** The pairs counted on this shard. */
  public long total() {
    return total.get();
  }

  /** Pairs not counted: their anchor came past {@code maxAnchors}. */
  public long dropped() {
    return dropped.sum();
  }

  /** The anchors kept. */
  public int anchors() {
    return anchors.size();
  }

  /** Memory held: the anchors' entries (with their partner keys' bytes) and the sketch. */
  public long bytes() {
    long b = marginals.bytes();
    for (Summary s : anchors.values()) {
      synchronized (s) {
        b += 64 + 40L * s.hash.length + (s.cum == null ? 0 : 32 + 12L * s.cum.length);
        for (int i = 0; i < s.size; i++) {
          b += 16 + s.key[i].length;
        }
      }
    }
    return b;
  }

  /** The weight of a kept partner under {@code w}: its count, or its PMI if positive, else 0. */
  static double weight(Weight w, long count, long anchorTotal, long marginal, long total) {
    if (w == Weight.COUNT) {
      return count;
    }
    double pmi = Math.log((double) count * total / ((double) anchorTotal * marginal));
    return pmi > 0 ? pmi : 0;
  }

  /** Draws of an anchor's partners: their keys and each draw's probability. */
  public record Draws(String[] keys, double[] probability) {}

  /**
   * {@code n} partners of the anchor drawn with replacement, each with probability proportional
   * to its weight under {@code w} among the kept partners; none when the anchor has no partner of
   * positive weight. A pure function of the counts and {@code seed}.
   */
  public Draws sample(long anchorHash, int n, Weight w, long seed) {
    if (n < 0) {
      throw new IllegalArgumentException("draws must be >= 0 but was " + n);
    }
    Summary s = anchors.get(anchorHash);
    if (s == null) {
      return new Draws(new String[0], new double[0]);
    }
    String[] drawKeys;
    double[] cum;
    synchronized (s) {
      long t = total();
      if (s.drawsWeight != w || s.drawsAtTotal != t) { // counted since: build the table again
        Partner[] p = partners(anchorHash);
        Arrays.sort(p, (x, y) -> Long.compare(x.hash(), y.hash()) != 0
            ? Long.compare(x.hash(), y.hash()) : x.key().compareTo(y.key())); // order-free
        s.drawKeys = new String[p.length];
        s.cum = new double[p.length];
        double sum = 0;
        for (int i = 0; i < p.length; i++) {
          sum += weight(w, p[i].count(), s.total, p[i].marginal(), t);
          s.cum[i] = sum;
          s.drawKeys[i] = p[i].key();
        }
        s.drawsWeight = w;
        s.drawsAtTotal = t;
      }
      drawKeys = s.drawKeys;
      cum = s.cum;
    }
    double sum = cum.length == 0 ? 0 : cum[cum.length - 1];
    if (!(sum > 0)) {
      return new Draws(new String[0], new double[0]);
    }
    SplittableRandom rnd = new SplittableRandom(seed);
    String[] keys = new String[n];
    double[] prob = new double[n];
    for (int j = 0; j < n; j++) {
      double u = rnd.nextDouble() * sum;
      int i = Arrays.binarySearch(cum, u);
      i = i >= 0 ? i + 1 : -i - 1;
      while (i < cum.length - 1 && cum[i] <= u) {
        i++;
      }
      keys[j] = drawKeys[i];
      prob[j] = (cum[i] - (i == 0 ? 0 : cum[i - 1])) / sum;
    }
    return new Draws(keys, prob);
  }
}
