package dev.dynembed.table.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * A benchmark's stream of keys in calls of {@code batch}: a corpus's words in order, or Zipf
 * draws ({@code "key:" + rank}, seed 7); with what it is, in words, and each key's count.
 */
record KeyStream(List<String[]> batches, String source) {
  static KeyStream of(Path corpus, int numKeys, int occurrences, double zipf, int batch)
      throws IOException {
    List<String[]> batches = new ArrayList<>();
    if (corpus != null) {
      String[] words = Files.readString(corpus, StandardCharsets.UTF_8).trim().split("\\s+");
      for (int i = 0; i < words.length; i += batch) {
        batches.add(Arrays.copyOfRange(words, i, Math.min(words.length, i + batch)));
      }
      return new KeyStream(batches, String.format(Locale.ROOT, "the %,d words of %s",
          words.length, corpus.getFileName()));
    }
    Zipf z = new Zipf(numKeys, zipf);
    SplittableRandom rnd = new SplittableRandom(7);
    for (int done = 0; done < occurrences; done += batch) {
      String[] b = new String[Math.min(batch, occurrences - done)];
      for (int i = 0; i < b.length; i++) {
        b[i] = "key:" + z.next(rnd);
      }
      batches.add(b);
    }
    return new KeyStream(batches, String.format(Locale.ROOT, "%,d Zipf(s=%.2f) draws over %,d"
        + " keys", occurrences, zipf, numKeys));
  }

  /** Each key's occurrences in the stream. */
  Map<String, Integer> counts() {
    Map<String, Integer> truth = new HashMap<>();
    for (String[] b : batches) {
      for (String k : b) {
        truth.merge(k, 1, Integer::sum);
      }
    }
    return truth;
  }
}
