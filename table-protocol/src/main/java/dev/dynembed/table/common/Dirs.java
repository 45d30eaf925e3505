package dev.dynembed.table.common;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** Directory helpers every module that keeps files shares. */
public final class Dirs {
  private Dirs() {}

  /**
   * Deletes a directory tree (or a file), deepest entries first; nothing if it does not exist.
   * Does not follow symbolic links (a link is deleted, not what it points to).
   */
  public static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    try (Stream<Path> s = Files.walk(p)) {
      for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(q);
      }
    }
  }

  /** As {@link #deleteTree}, for a leftover (a temporary directory): a failure is ignored. */
  public static void deleteQuietly(Path p) {
    try {
      deleteTree(p);
    } catch (IOException | java.io.UncheckedIOException ignored) {
      // a leftover temporary directory is harmless
    }
  }
}
