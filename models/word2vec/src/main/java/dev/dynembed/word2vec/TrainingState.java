package dev.dynembed.word2vec;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/** Position and counters of a run (restored on resume). */
final class TrainingState {
  volatile int epoch;
  volatile int nextSplit;
  final AtomicLong progressBytes = new AtomicLong();
  final AtomicLong tokens = new AtomicLong();
  final AtomicLong words = new AtomicLong();
  final AtomicLong pairs = new AtomicLong();
  final AtomicLong skippedLong = new AtomicLong();
  double elapsed;
  final List<double[]> curve = new ArrayList<>();
  /** The checkpoint's extras a resumed job hands to every worker (null: a fresh start). */
  Map<String, String> job;

  /** One worker's counters, as it reports them at a round's barrier. */
  Map<String, String> workerMap() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("progress_bytes", String.valueOf(progressBytes.get()));
    m.put("tokens", String.valueOf(tokens.get()));
    m.put("words", String.valueOf(words.get()));
    m.put("pairs", String.valueOf(pairs.get()));
    m.put("skipped_long_words", String.valueOf(skippedLong.get()));
    return m;
  }

  /** Worker {@code index}'s counters from a job's checkpoint (none in a lone trainer's). */
  void loadWorker(Map<String, String> m, int index) {
    String p = "worker." + index + ".";
    if (m.containsKey(p + "words")) {
      progressBytes.set(Long.parseLong(m.get(p + "progress_bytes")));
      tokens.set(Long.parseLong(m.get(p + "tokens")));
      words.set(Long.parseLong(m.get(p + "words")));
      pairs.set(Long.parseLong(m.get(p + "pairs")));
      skippedLong.set(Long.parseLong(m.get(p + "skipped_long_words")));
    }
  }

  Map<String, String> toMap() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("epoch", String.valueOf(epoch));
    m.put("next_split", String.valueOf(nextSplit));
    m.put("progress_bytes", String.valueOf(progressBytes.get()));
    m.put("tokens", String.valueOf(tokens.get()));
    m.put("words", String.valueOf(words.get()));
    m.put("pairs", String.valueOf(pairs.get()));
    m.put("skipped_long_words", String.valueOf(skippedLong.get()));
    m.put("elapsed_seconds", String.valueOf(elapsed));
    return m;
  }

  void load(Map<String, String> m) {
    epoch = Integer.parseInt(m.get("epoch"));
    nextSplit = Integer.parseInt(m.get("next_split"));
    progressBytes.set(Long.parseLong(m.get("progress_bytes")));
    tokens.set(Long.parseLong(m.get("tokens")));
    words.set(Long.parseLong(m.get("words")));
    pairs.set(Long.parseLong(m.get("pairs")));
    skippedLong.set(Long.parseLong(m.get("skipped_long_words")));
    elapsed = Double.parseDouble(m.get("elapsed_seconds"));
    String c = m.getOrDefault("loss_curve", "");
    for (String p : c.isEmpty() ? new String[0] : c.split(";")) {
      String[] xy = p.split(":");
      curve.add(new double[] {Double.parseDouble(xy[0]), Double.parseDouble(xy[1])});
    }
  }
}
