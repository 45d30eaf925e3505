package dev.dynembed.word2vec;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A corpus of text files cut into byte ranges of about equal size: the units the training
 * threads take (so one huge file, text8 say, is shared by every thread) and the positions a
 * checkpoint records. A word belongs to the range its first byte is in.
 */
public final class TextSplits {
  /** Bytes [start, end) of a file. */
  public record Split(int index, Path file, long start, long end) {
    public long bytes() {
      return end - start;
    }
  }

  private TextSplits() {}

  /**
   * Checks every file (exists, regular, readable) and cuts the corpus into ranges of about {@code
   * totalBytes / pieces} bytes (at least 64 KiB).
   *
   * @throws CorpusException naming the file that is missing or unreadable, or if all are empty
   */
  public static List<Split> plan(List<Path> files, int pieces) {
    if (files.isEmpty()) {
      throw new CorpusException("no input files given");
    }
    long total = 0;
    List<Long> sizes = new ArrayList<>();
    for (Path f : files) {
      if (!Files.exists(f)) {
        throw new CorpusException("input file " + f + " does not exist");
      }
      if (!Files.isRegularFile(f)) {
        throw new CorpusException("input " + f + " is not a regular file");
      }
      if (!Files.isReadable(f)) {
        throw new CorpusException("input file " + f + " is not readable (permissions)");
      }
      try {
        sizes.add(Files.size(f));
      } catch (IOException e) {
        throw new CorpusException("input file " + f + " cannot be read: " + e.getMessage(), e);
      }
      total += sizes.get(sizes.size() - 1);
    }
    if (total == 0) {
      throw new CorpusException("the corpus is empty: " + files + " hold no bytes");
    }
    long target = Math.max(64 << 10, total / Math.max(1, pieces));
    List<Split> out = new ArrayList<>();
    for (int i = 0; i < files.size(); i++) {
      long size = sizes.get(i);
      long n = Math.max(1, Math.round((double) size / target));
      for (long k = 0; k < n && size > 0; k++) {
        out.add(new Split(out.size(), files.get(i), size * k / n, size * (k + 1) / n));
      }
    }
    return out;
  }

  /** Total bytes of the splits. */
  public static long bytes(List<Split> splits) {
    return splits.stream().mapToLong(Split::bytes).sum();
  }
}
