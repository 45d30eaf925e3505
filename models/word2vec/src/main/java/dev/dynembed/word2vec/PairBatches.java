package dev.dynembed.word2vec;

import dev.dynembed.ops.KeyArrays;
import dev.dynembed.ops.StringIndex;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.KeyCounts;
import dev.dynembed.table.common.KeyHashing;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The batches of one byte range in one epoch: sentences are counted by the output table
 * (first epoch) or only looked up (later epochs), words not admitted are dropped, frequent
 * words subsampled, and (center, context) pairs cut into batches of {@code batchPairs}.
 * Draws come from a generator seeded by (seed, epoch, range): a resumed run replays them.
 */
final class PairBatches implements Iterator<Map<String, INDArray>> {
  private final Word2VecConfig cfg;
  private final EmbeddingTable out;
  private final TextSplits.Split split;
  private final boolean counting;
  private final TrainingState st;
  private final TokenReader reader;
  private final List<String> sentence = new ArrayList<>();
  private final List<String[]> chunk = new ArrayList<>();
  private final List<String> kept = new ArrayList<>();
  private final ArrayList<String> centers = new ArrayList<>();
  private final ArrayList<String> contexts = new ArrayList<>();
  private long rnd;
  /** PMI: the first epoch reports its window pairs; later epochs draw positives by PPMI. */
  private final boolean reportPairs;
  private final boolean drawPositives;
  private final int epoch;
  private final ArrayList<String> drawAnchors = new ArrayList<>();
  private long reportedBytes;
  private long total;
  private int chunks;
  private boolean exhausted;

  /** @param out the output table: it counts the words (admission) and holds the totals */
  PairBatches(Word2VecConfig cfg, EmbeddingTable out, TextSplits.Split split, int epoch,
      TrainingState st) {
    this.cfg = cfg;
    this.out = out;
    this.split = split;
    this.counting = epoch == 0 && !cfg.countPass(); // a counting pass counted every word
    this.st = st;
    this.reader = new TokenReader(split, Word2Vec.MAX_WORD_BYTES);
    this.rnd = KeyHashing.splitMix64(
        cfg.seed() * 0x9E3779B97F4A7C15L + epoch * 1_000_003L + split.index());
    this.epoch = epoch;
    this.reportPairs = cfg.pmiPositives() > 0 && epoch == 0;
    this.drawPositives = cfg.pmiPositives() > 0 && epoch > 0;
  }

  private long nextRandom() {
    rnd = rnd * 25214903917L + 11; // word2vec's generator
    return rnd;
  }

  @Override
  public boolean hasNext() {
    while (centers.size() < cfg.batchPairs() && !exhausted) {
      // sentences are counted in chunks: one table call (a fan-out on shards) per ~Word2Vec.COUNT_CHUNK
      // words instead of one per sentence
      chunk.clear();
      int words = 0;
      while (words < Word2Vec.COUNT_CHUNK) {
        if (!reader.nextSentence(sentence)) {
          exhausted = true;
          break;
        }
        chunk.add(sentence.toArray(new String[0]));
        words += sentence.size();
      }
      if (!chunk.isEmpty()) {
        addPairs(words);
      }
      if (exhausted) {
        reader.close();
        st.progressBytes.addAndGet(split.bytes() - reportedBytes); // the range, exactly
        reportedBytes = split.bytes();
        st.skippedLong.addAndGet(reader.skippedLongWords());
      } else {
        long consumed = reader.consumed();
        st.progressBytes.addAndGet(consumed - reportedBytes);
        reportedBytes = consumed;
      }
    }
    return !centers.isEmpty();
  }

  /** Counts the chunk's {@code n} words, subsamples them and adds each sentence's pairs. */
  private void addPairs(int n) {
    String[] words = new String[n];
    int w = 0;
    for (String[] sent : chunk) {
      System.arraycopy(sent, 0, words, w, sent.length);
      w += sent.length;
    }
    KeyCounts kc = out.count(words, counting);
    if (chunks++ % Word2Vec.TOTAL_EVERY == 0 || total < (long) Word2Vec.TOTAL_EVERY * 4 * Word2Vec.COUNT_CHUNK) {
      total = out.describe().getCounters().getTotalFrequency();
    }
    st.tokens.addAndGet(n);
    long admitted = 0;
    double threshold = cfg.sample() * Math.max(total, 1);
    long before = centers.size();
    int at = 0; // the sentence's first word in the chunk
    for (String[] sent : chunk) {
      kept.clear();
      for (int i = 0; i < sent.length; i++) {
        if (!kc.admitted()[at + i]) {
          continue;
        }
        admitted++;
        if (cfg.sample() > 0) {
          double f = Math.max(kc.frequencies()[at + i], 1);
          double keep = (Math.sqrt(f / threshold) + 1) * threshold / f;
          if (keep < (nextRandom() & 0xFFFF) / 65536.0) {
            continue;
          }
        }
        kept.add(sent[i]);
      }
      at += sent.length;
      addWindows();
      if (drawPositives) {
        drawAnchors.addAll(kept);
      }
    }
    if (reportPairs && centers.size() > before) {
      report((int) before);
    }
    if (drawPositives && !drawAnchors.isEmpty()) {
      addPmiPositives();
    }
    st.words.addAndGet(admitted);
    st.pairs.addAndGet(centers.size() - before);
  }

  /** A (center, context) pair, as the report aggregates them. */
  private record Pair(String center, String context) {}

  /**
   * Reports the chunk's window pairs from {@code from} on to the output table's shards, each
   * distinct pair once with its count: each pair goes to its center's shard, which keeps the
   * center's most frequent contexts (design 0026). One write call per chunk.
   */
  private void report(int from) {
    java.util.LinkedHashMap<Pair, int[]> counts = new java.util.LinkedHashMap<>();
    for (int i = from; i < centers.size(); i++) {
      counts.computeIfAbsent(new Pair(centers.get(i), contexts.get(i)), k -> new int[1])[0]++;
    }
    String[] a = new String[counts.size()];
    String[] p = new String[a.length];
    int[] c = new int[a.length];
    int i = 0;
    for (Map.Entry<Pair, int[]> e : counts.entrySet()) {
      a[i] = e.getKey().center();
      p[i] = e.getKey().context();
      c[i++] = e.getValue()[0];
    }
    out.reportPairs(a, p, c, epoch);
  }

  /**
   * Adds {@code pmiPositives} pairs per kept center word of the chunk, each context drawn from
   * the center's partners by positive PMI (none for a word without partners of positive PMI).
   * The draws are a function of the counts and of (seed, epoch, range, chunk): a resumed run
   * draws the same ones once the counts are the same.
   */
  private void addPmiPositives() {
    long seed = KeyHashing.splitMix64(rnd ^ 0x5DEECE66DL * (chunks + 1));
    EmbeddingTable.PartnerDraws d = out.partners(drawAnchors.toArray(new String[0]),
        cfg.pmiPositives(), dev.dynembed.table.v1.PartnerWeight.PPMI_WEIGHT, seed);
    int at = 0;
    for (int i = 0; i < drawAnchors.size(); i++) {
      for (int j = 0; j < d.counts()[i]; j++) {
        centers.add(drawAnchors.get(i));
        contexts.add(d.keys()[at++]);
      }
    }
    st.pmiPairs.addAndGet(at);
    drawAnchors.clear();
  }

  /** The (center, context) pairs of the kept words of one sentence. */
  private void addWindows() {
    int n = kept.size();
    for (int i = 0; i < n; i++) {
      int b = (int) Long.remainderUnsigned(nextRandom(), cfg.window());
      int reach = cfg.window() - b;
      for (int c = Math.max(0, i - reach); c <= Math.min(n - 1, i + reach); c++) {
        if (c != i) {
          centers.add(kept.get(i));
          contexts.add(kept.get(c));
        }
      }
    }
  }

  @Override
  public Map<String, INDArray> next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    int b = Math.min(cfg.batchPairs(), centers.size());
    List<String> c = centers.subList(0, b);
    List<String> x = contexts.subList(0, b);
    if (cfg.sharedNegatives()) {
      // pWord2Vec's orientation: the contexts' input rows predict the center's output row; a
      // window's pairs are consecutive, so they form one run of the same positive, which shares
      // its negatives (Sampling.sharedByRuns)
      List<String> t = c;
      c = x;
      x = t;
    }
    StringIndex distinct = new StringIndex(b / 4);
    int[] centerOf = new int[b];
    for (int i = 0; i < b; i++) {
      centerOf[i] = distinct.add(c.get(i));
    }
    Map<String, INDArray> batch = Map.of(
        "centers", KeyArrays.of(distinct.keys()),
        "center_of", Nd4j.createFromArray(centerOf),
        "context", KeyArrays.of(x, b, 1),
        "mask", Nd4j.ones(DataType.FLOAT, b, 1));
    c.clear();
    x.clear();
    return batch;
  }
}
