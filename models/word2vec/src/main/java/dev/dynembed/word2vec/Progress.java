package dev.dynembed.word2vec;

import java.io.PrintStream;
import java.util.Locale;

/**
 * The progress display of {@code train}: on a terminal one line redrawn every second (bar,
 * words/s, loss, learning rate, ETA); otherwise (logs, CI) one line every 10 seconds.
 */
final class Progress {
  private final PrintStream out;
  private final boolean terminal;
  private long lastLine;

  Progress(PrintStream out, boolean terminal) {
    this.out = out;
    this.terminal = terminal;
  }

  void update(Word2Vec.Status s) {
    long now = System.nanoTime();
    if (!terminal && !s.done() && now - lastLine < 10_000_000_000L) {
      return;
    }
    lastLine = now;
    int width = 24;
    int filled = (int) Math.round(s.fraction() * width);
    String bar = "#".repeat(filled) + ".".repeat(width - filled);
    String line = String.format(Locale.ROOT,
        "epoch %d/%d [%s] %5.1f%% | %,9.0f words/s | loss %s | alpha %.5f | %s %s",
        Math.min(s.epoch() + 1, s.epochs()), s.epochs(), bar, 100 * s.fraction(),
        s.wordsPerSecond(), Double.isFinite(s.loss()) ? String.format(Locale.ROOT, "%.4f",
            s.loss()) : "  --  ", s.alpha(), s.done() ? "took" : "ETA",
        duration(s.done() ? s.seconds() : s.etaSeconds()));
    if (terminal) {
      out.print("\r" + line + (s.done() ? "\n" : ""));
    } else {
      out.println(line);
    }
    out.flush();
  }

  static String duration(double seconds) {
    if (!Double.isFinite(seconds)) {
      return "--";
    }
    long s = Math.round(seconds);
    return s >= 3600 ? String.format("%dh%02dm", s / 3600, s / 60 % 60)
        : s >= 60 ? String.format("%dm%02ds", s / 60, s % 60) : s + "s";
  }
}
