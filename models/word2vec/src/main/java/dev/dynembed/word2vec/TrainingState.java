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
  /**
   * Byte ranges of this epoch (indices into the plan) that a round gave to a worker that left an
   * elastic job before finishing it: the next rounds train them first.
   */
  volatile List<Integer> orphans = List.of();
  final AtomicLong progressBytes = new AtomicLong();
  final AtomicLong tokens = new AtomicLong();
  final AtomicLong words = new AtomicLong();
  final AtomicLong pairs = new AtomicLong();
  final AtomicLong skippedLong = new AtomicLong();
  /** PMI positives added this run (in pairs too; not kept in checkpoints). */
  final AtomicLong pmiPairs = new AtomicLong();
  double elapsed;
  /**
   * Continual training (--init-from): the model started from, the work (bytes x epochs) it and
   * the models it came from were trained on, and the part of the learning-rate schedule taken as
   * done (0: the rate starts at alpha).
   */
  String initFrom;
  /** The dim of the model continued from, when this run grew it (0: not grown). */
  int grownFrom;
  double priorWork;
  double scheduleOffset;
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

  /** Where the job is: epoch, next byte range and the ranges left by workers that left. */
  Map<String, String> position() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("epoch", String.valueOf(epoch));
    m.put("next_split", String.valueOf(nextSplit));
    if (!orphans.isEmpty()) {
      m.put("orphan_splits", orphanSplits());
    }
    return m;
  }

  private String orphanSplits() {
    StringBuilder b = new StringBuilder();
    for (int o : orphans) {
      b.append(b.length() == 0 ? "" : ",").append(o);
    }
    return b.toString();
  }

  /** A position from {@link #position} (a worker admitted to a running job: its own counters 0). */
  void loadPosition(Map<String, String> m) {
    epoch = Integer.parseInt(m.get("epoch"));
    nextSplit = Integer.parseInt(m.get("next_split"));
    orphans = parseOrphans(m);
  }

  private static List<Integer> parseOrphans(Map<String, String> m) {
    String o = m.getOrDefault("orphan_splits", "");
    List<Integer> os = new ArrayList<>();
    for (String x : o.isEmpty() ? new String[0] : o.split(",")) {
      os.add(Integer.parseInt(x));
    }
    return List.copyOf(os);
  }

  Map<String, String> toMap() {
    Map<String, String> m = new LinkedHashMap<>();
    m.putAll(position());
    m.put("progress_bytes", String.valueOf(progressBytes.get()));
    m.put("tokens", String.valueOf(tokens.get()));
    m.put("words", String.valueOf(words.get()));
    m.put("pairs", String.valueOf(pairs.get()));
    m.put("skipped_long_words", String.valueOf(skippedLong.get()));
    m.put("elapsed_seconds", String.valueOf(elapsed));
    if (initFrom != null) {
      m.put("init_from", initFrom);
      m.put("init_prior_work", String.valueOf(priorWork));
      m.put("init_schedule_offset", String.valueOf(scheduleOffset));
      if (grownFrom > 0) {
        m.put("init_grown_from_dim", String.valueOf(grownFrom));
      }
    }
    return m;
  }

  void load(Map<String, String> m) {
    loadPosition(m);
    progressBytes.set(Long.parseLong(m.get("progress_bytes")));
    tokens.set(Long.parseLong(m.get("tokens")));
    words.set(Long.parseLong(m.get("words")));
    pairs.set(Long.parseLong(m.get("pairs")));
    skippedLong.set(Long.parseLong(m.get("skipped_long_words")));
    elapsed = Double.parseDouble(m.get("elapsed_seconds"));
    initFrom = m.get("init_from");
    priorWork = Double.parseDouble(m.getOrDefault("init_prior_work", "0"));
    scheduleOffset = Double.parseDouble(m.getOrDefault("init_schedule_offset", "0"));
    grownFrom = Integer.parseInt(m.getOrDefault("init_grown_from_dim", "0"));
    String c = m.getOrDefault("loss_curve", "");
    for (String p : c.isEmpty() ? new String[0] : c.split(";")) {
      String[] xy = p.split(":");
      curve.add(new double[] {Double.parseDouble(xy[0]), Double.parseDouble(xy[1])});
    }
  }
}
