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
    PPMI;

    /**
     * The protocol's weight by its wire number (unspecified: PPMI); an unknown one is refused,
     * naming it.
     */
    public static Weight of(int wire, String table) {
      if (wire == dev.dynembed.table.v1.PartnerWeight.COUNT_WEIGHT_VALUE) {
        return COUNT;
      }
      if (wire == dev.dynembed.table.v1.PartnerWeight.PPMI_WEIGHT_VALUE
          || wire == dev.dynembed.table.v1.PartnerWeight.PARTNER_WEIGHT_UNSPECIFIED_VALUE) {
        return PPMI;
      }
      throw dev.dynembed.table.common.TableException.invalid(
          "table '%s': partner weight %d is not PPMI or COUNT", table, wire);
    }
  }

  private final int partners;
  private final int maxAnchors;
  private final ConcurrentHashMap<Long, Summary> anchors = new ConcurrentHashMap<>();
  private final AdmissionSketch marginals;
  private final AtomicLong total = new AtomicLong();
  private final LongAdder dropped = new LongAdder();
  /** The summaries' bytes, kept as they change (the memory budget reads it per call). */
  private final AtomicLong summaryBytes = new AtomicLong();
  private static final int SUMMARY_BYTES = 64;
  private static final int ENTRY_BYTES = 40;
  private static final int KEY_BYTES = 16;
  /**
   * The most one reported pair can add beside its partner key's bytes: a new anchor's summary
   * and an entry (the memory budget's check of a report).
   */
  public static final int MAX_BYTES_PER_PAIR = SUMMARY_BYTES + ENTRY_BYTES;

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

  private PairCounts(int partners, int maxAnchors, AdmissionSketch marginals) {
    this.partners = partners;
    this.maxAnchors = maxAnchors;
    this.marginals = marginals;
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

    /** @return the change of the summary's bytes */
    long add(long h, byte[] k, long c, int capacity) {
      total += c;
      int i = find(h, k);
      if (i >= 0) {
        count[i] += c;
        return 0;
      }
      long delta = 0;
      if (size < capacity) {
        if (size == hash.length) {
          int n = Math.min(capacity, Math.max(4, size * 2));
          delta += (long) ENTRY_BYTES * (n - size);
          resize(n);
        }
        hash[size] = h;
        key[size] = k;
        count[size] = c;
        error[size] = 0;
        size++;
        return delta + KEY_BYTES + k.length;
      }
      int min = 0; // Space-Saving: the new partner takes the least count's place
      for (int j = 1; j < size; j++) {
        if (count[j] < count[min]) {
          min = j;
        }
      }
      delta += k.length - key[min].length;
      hash[min] = h;
      key[min] = k;
      error[min] = count[min];
      count[min] += c;
      return delta;
    }

    void resize(int n) {
      hash = Arrays.copyOf(hash, n);
      key = Arrays.copyOf(key, n);
      count = Arrays.copyOf(count, n);
      error = Arrays.copyOf(error, n);
    }

    long bytes() {
      long b = SUMMARY_BYTES + (long) ENTRY_BYTES * hash.length;
      for (int i = 0; i < size; i++) {
        b += KEY_BYTES + key[i].length;
      }
      return b;
    }

    Summary copy() {
      Summary c = new Summary(0);
      c.hash = hash.clone();
      c.key = key.clone(); // the partner keys' bytes are never changed in place
      c.count = count.clone();
      c.error = error.clone();
      c.size = size;
      c.total = total;
      return c;
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
      s = anchors.computeIfAbsent(anchorHash, h -> {
        Summary n = new Summary(partners);
        summaryBytes.addAndGet(SUMMARY_BYTES + (long) ENTRY_BYTES * n.hash.length);
        return n;
      });
    }
    synchronized (s) {
      summaryBytes.addAndGet(s.add(partnerHash, partnerKey, count, partners));
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

  /**
   * Memory held, in O(1): the anchors' entries (with their partner keys' bytes) and the sketch;
   * the draws' tables (built on demand, 12 bytes a partner) are not counted.
   */
  public long bytes() {
    return marginals.bytes() + summaryBytes.get();
  }

  /**
   * A deep copy (a checkpoint's cut): the caller keeps reports out meanwhile (the table's
   * exclusive lock).
   */
  public PairCounts copy() {
    PairCounts c = new PairCounts(partners, maxAnchors,
        AdmissionSketch.of(marginals.width(), marginals.counters()));
    anchors.forEach((h, s) -> {
      synchronized (s) {
        c.anchors.put(h, s.copy());
      }
    });
    c.total.set(total.get());
    c.dropped.add(dropped.sum());
    c.summaryBytes.set(summaryBytes.get());
    return c;
  }

  /**
   * Removes the summaries of the anchors {@code gone} selects (a slot move gave them away); the
   * totals and the partners' sketch keep what those anchors counted: PMI reads them as shares.
   */
  public void dropAnchors(java.util.function.LongPredicate gone) {
    anchors.entrySet().removeIf(e -> {
      if (!gone.test(e.getKey())) {
        return false;
      }
      synchronized (e.getValue()) {
        summaryBytes.addAndGet(-e.getValue().bytes());
      }
      return true;
    });
  }

  /**
   * Takes the anchors of {@code from} (a slot move's import: anchors this shard did not own),
   * replacing a summary of the same anchor; their kept counts are added to this shard's totals
   * and partner sketch, so that PMI goes on reading this shard's own figures.
   */
  public void merge(PairCounts from) {
    // in anchor-hash order: the partners' sketch (conservative update) depends on the order
    java.util.TreeMap<Long, Summary> sorted = new java.util.TreeMap<>(from.anchors);
    sorted.forEach((h, s) -> {
      Summary c;
      synchronized (s) {
        c = s.copy();
      }
      install(h, c, true);
    });
  }

  /**
   * Puts an anchor's summary in place of any it had; with {@code addCounts}, its kept counts are
   * added to the partners' sketch and its total to this shard's (a summary from another shard).
   */
  private void install(long anchor, Summary s, boolean addCounts) {
    Summary old = anchors.put(anchor, s);
    if (old != null) {
      summaryBytes.addAndGet(-old.bytes());
    }
    summaryBytes.addAndGet(s.bytes());
    if (addCounts) {
      for (int i = 0; i < s.size; i++) {
        marginals.add(s.hash[i], s.count[i]);
      }
      total.addAndGet(s.total);
    }
  }

  // ---------------------------------------------------------------- checkpoint section

  /**
   * Writes the counts (the anchors {@code keep} selects) as a checkpoint section: the totals, the
   * partners' sketch and each anchor's summary in its own order (Space-Saving's next replacement
   * depends on it), checked by a CRC-32C.
   */
  public void write(java.io.DataOutputStream out, java.util.function.LongPredicate keep)
      throws java.io.IOException {
    java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream(1 << 16);
    java.io.DataOutputStream d = new java.io.DataOutputStream(buf);
    d.writeLong(total.get());
    d.writeLong(dropped.sum());
    int[] counters = marginals.counters();
    d.writeInt(marginals.width());
    for (int c : counters) {
      d.writeInt(c);
    }
    java.util.List<java.util.Map.Entry<Long, Summary>> kept = new java.util.ArrayList<>();
    for (java.util.Map.Entry<Long, Summary> e : new java.util.TreeMap<>(anchors).entrySet()) {
      if (keep.test(e.getKey())) {
        kept.add(e);
      }
    }
    d.writeInt(kept.size());
    for (java.util.Map.Entry<Long, Summary> e : kept) {
      Summary s = e.getValue();
      synchronized (s) {
        d.writeLong(e.getKey());
        d.writeLong(s.total);
        d.writeShort(s.size);
        for (int i = 0; i < s.size; i++) {
          d.writeLong(s.hash[i]);
          d.writeLong(s.count[i]);
          d.writeLong(s.error[i]);
          d.writeShort(s.key[i].length);
          d.write(s.key[i]);
        }
      }
    }
    d.flush();
    byte[] b = buf.toByteArray();
    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
    crc.update(b);
    out.writeInt(b.length);
    out.write(b);
    out.writeInt((int) crc.getValue());
  }

  /**
   * Reads a section {@link #write} wrote into this (empty or not) instance: with {@code exact},
   * the file's totals and sketch are this shard's own (a file of the same shard and layout);
   * otherwise each kept anchor's counts are added to them (the file is another layout's).
   *
   * @param owns whether this shard owns an anchor (others are skipped)
   * @param where names the file in errors
   */
  public void read(java.io.DataInputStream in, java.util.function.LongPredicate owns,
      boolean exact, String where) throws java.io.IOException {
    int len = in.readInt();
    if (len < 0) {
      throw dev.dynembed.table.common.TableException.dataLoss(
          "%s: co-occurrence section of %d bytes", where, len);
    }
    byte[] b = in.readNBytes(len);
    if (b.length != len) {
      throw new java.io.EOFException();
    }
    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
    crc.update(b);
    if (in.readInt() != (int) crc.getValue()) {
      throw dev.dynembed.table.common.TableException.dataLoss(
          "%s: co-occurrence section checksum mismatch (corrupt)", where);
    }
    java.io.DataInputStream d = new java.io.DataInputStream(new java.io.ByteArrayInputStream(b));
    long fileTotal = d.readLong();
    long fileDropped = d.readLong();
    int width = d.readInt();
    if (width != marginals.width()) {
      throw dev.dynembed.table.common.TableException.dataLoss("%s: co-occurrence sketch of"
          + " width %d, the config makes %d", where, width, marginals.width());
    }
    int[] counters = new int[AdmissionSketch.DEPTH * width];
    for (int i = 0; i < counters.length; i++) {
      counters[i] = d.readInt();
    }
    int n = d.readInt();
    for (int a = 0; a < n; a++) {
      long anchor = d.readLong();
      Summary s = new Summary(0);
      s.total = d.readLong();
      int size = d.readShort();
      if (size < 0 || size > partners) {
        throw dev.dynembed.table.common.TableException.dataLoss("%s: an anchor with %d partners,"
            + " the config keeps %d", where, size, partners);
      }
      s.resize(Math.max(size, Math.min(partners, 4)));
      for (int i = 0; i < size; i++) {
        s.hash[i] = d.readLong();
        s.count[i] = d.readLong();
        s.error[i] = d.readLong();
        byte[] k = new byte[d.readUnsignedShort()];
        d.readFully(k);
        s.key[i] = k;
      }
      s.size = size;
      if (owns.test(anchor)) {
        install(anchor, s, !exact);
      }
    }
    if (exact) {
      marginals.merge(AdmissionSketch.of(width, counters));
      total.addAndGet(fileTotal);
      dropped.add(fileDropped);
    }
  }

  /** The weight of a kept partner under {@code w}: its count, or its PMI if positive, else 0. */
  static double weight(Weight w, long count, long anchorTotal, long marginal, long total) {
    if (w == Weight.COUNT) {
      return count;
    }
    if (count <= 0) {
      return 0;
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
          // PPMI from the count the summary guarantees (count - error): a partner that just
          // took a replaced entry's place carries that entry's count as its error, and read as
          // its own it would give a rare partner a large PMI
          sum += weight(w, w == Weight.PPMI ? p[i].count() - p[i].error() : p[i].count(),
              s.total, p[i].marginal(), t);
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
