package dev.dynembed.word2vec;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Quality of word vectors, computed the same way for every tool's vectors: analogy accuracy on a
 * questions-words style file (as word2vec's compute-accuracy: vocabulary restricted to the most
 * frequent words, a, b, c excluded from the answers) and Spearman correlation on word-similarity
 * files, each with its out-of-vocabulary count.
 */
public final class Evaluation {
  private Evaluation() {}

  public record Similarity(String file, int pairs, int oov, double spearman) {}

  public record Analogies(String file, int questions, int oov, int correct,
      Map<String, int[]> sections) {
    public double accuracy() {
      int answered = questions - oov;
      return answered == 0 ? Double.NaN : (double) correct / answered;
    }
  }

  private static List<String> lines(Path file) {
    try {
      return Files.readAllLines(file, StandardCharsets.UTF_8);
    } catch (java.nio.charset.MalformedInputException e) {
      throw new CorpusException(file + " is not UTF-8 text");
    } catch (IOException e) {
      throw new CorpusException("cannot read " + file + ": " + e.getMessage(), e);
    }
  }

  /** Spearman's rho between the file's scores and cosine similarity, over pairs in vocabulary. */
  public static Similarity similarity(VectorSet v, Path file, boolean lowercase) {
    float[] u = v.normalized();
    List<Double> human = new ArrayList<>();
    List<Double> model = new ArrayList<>();
    int pairs = 0;
    int oov = 0;
    for (String line : lines(file)) {
      String[] f = line.trim().split("[\\t ]+");
      if (f.length < 3 || line.startsWith("#")) {
        continue;
      }
      double score;
      try {
        score = Double.parseDouble(f[2]);
      } catch (NumberFormatException e) {
        continue; // a header line
      }
      pairs++;
      int a = v.indexOf(lowercase ? f[0].toLowerCase(Locale.ROOT) : f[0]);
      int b = v.indexOf(lowercase ? f[1].toLowerCase(Locale.ROOT) : f[1]);
      if (a < 0 || b < 0) {
        oov++;
        continue;
      }
      double dot = 0;
      for (int j = 0; j < v.dim(); j++) {
        dot += (double) u[a * v.dim() + j] * u[b * v.dim() + j];
      }
      human.add(score);
      model.add(dot);
    }
    if (pairs == 0) {
      throw new CorpusException(file + " holds no 'word1 word2 score' lines");
    }
    return new Similarity(file.getFileName().toString(), pairs, oov,
        human.size() < 2 ? Double.NaN : spearman(human, model));
  }

  static double spearman(List<Double> x, List<Double> y) {
    double[] rx = ranks(x);
    double[] ry = ranks(y);
    double mx = Arrays.stream(rx).average().orElse(0);
    double my = Arrays.stream(ry).average().orElse(0);
    double sxy = 0;
    double sxx = 0;
    double syy = 0;
    for (int i = 0; i < rx.length; i++) {
      sxy += (rx[i] - mx) * (ry[i] - my);
      sxx += (rx[i] - mx) * (rx[i] - mx);
      syy += (ry[i] - my) * (ry[i] - my);
    }
    return sxy / Math.sqrt(sxx * syy);
  }

  /** Ranks 1..n, ties get their average rank. */
  static double[] ranks(List<Double> v) {
    Integer[] idx = new Integer[v.size()];
    for (int i = 0; i < idx.length; i++) {
      idx[i] = i;
    }
    Arrays.sort(idx, (a, b) -> Double.compare(v.get(a), v.get(b)));
    double[] r = new double[idx.length];
    for (int i = 0; i < idx.length; ) {
      int j = i;
      while (j + 1 < idx.length && v.get(idx[j + 1]).equals(v.get(idx[i]))) {
        j++;
      }
      for (int k = i; k <= j; k++) {
        r[idx[k]] = (i + j) / 2.0 + 1;
      }
      i = j + 1;
    }
    return r;
  }

  /**
   * Analogy accuracy: for "a b c d", is d the word nearest to b - a + c among the {@code
   * restrict} most frequent words (a, b, c excluded)? Questions with a word outside them are
   * counted as out of vocabulary.
   */
  public static Analogies analogies(VectorSet v, Path file, int restrict, boolean lowercase) {
    int n = Math.min(restrict, v.size());
    int d = v.dim();
    float[] u = v.normalized();
    Map<String, int[]> sections = new LinkedHashMap<>();
    String section = "(none)";
    int questions = 0;
    int oov = 0;
    int correct = 0;
    float[] q = new float[d];
    for (String line : lines(file)) {
      String t = line.trim();
      if (t.isEmpty()) {
        continue;
      }
      if (t.startsWith(":")) {
        section = t.substring(1).trim();
        continue;
      }
      String[] w = (lowercase ? t.toLowerCase(Locale.ROOT) : t).split("\\s+");
      if (w.length != 4) {
        throw new CorpusException(file + ": analogy lines must hold 4 words, not '" + t + "'");
      }
      questions++;
      int[] s = sections.computeIfAbsent(section, k -> new int[3]); // questions, oov, correct
      s[0]++;
      int[] id = new int[4];
      boolean missing = false;
      for (int i = 0; i < 4; i++) {
        id[i] = v.indexOf(w[i]);
        missing |= id[i] < 0 || id[i] >= n;
      }
      if (missing) {
        oov++;
        s[1]++;
        continue;
      }
      for (int j = 0; j < d; j++) {
        q[j] = u[id[1] * d + j] - u[id[0] * d + j] + u[id[2] * d + j];
      }
      int best = -1;
      double bestScore = Double.NEGATIVE_INFINITY;
      for (int r = 0; r < n; r++) {
        if (r == id[0] || r == id[1] || r == id[2]) {
          continue;
        }
        double dot = 0;
        int base = r * d;
        for (int j = 0; j < d; j++) {
          dot += q[j] * u[base + j];
        }
        if (dot > bestScore) {
          bestScore = dot;
          best = r;
        }
      }
      if (best == id[3]) {
        correct++;
        s[2]++;
      }
    }
    if (questions == 0) {
      throw new CorpusException(file + " holds no analogy questions ('a b c d' lines)");
    }
    return new Analogies(file.getFileName().toString(), questions, oov, correct, sections);
  }
}
