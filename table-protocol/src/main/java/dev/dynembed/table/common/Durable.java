package dev.dynembed.table.common;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/** File-system steps that survive a crash or a power loss (fsync of files and directories). */
public final class Durable {
  private Durable() {}

  /** Forces a file's or a directory's contents and metadata to the disk. */
  public static void fsync(Path p) throws IOException {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
      ch.force(true);
    }
  }

  /** Forces a directory's entries (names created, renamed or deleted in it) to the disk. */
  public static void fsyncDirectory(Path dir) throws IOException {
    fsync(dir);
  }

  /**
   * Replaces {@code target} with {@code bytes} so that a crash at any moment leaves either the
   * old or the new contents: written beside as {@code NAME.tmp}, fsynced, renamed over, and the
   * directory fsynced.
   */
  public static void writeAtomically(Path target, byte[] bytes) throws IOException {
    Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
    try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE,
        StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
      java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(bytes);
      while (b.hasRemaining()) {
        ch.write(b);
      }
      ch.force(true);
    }
    Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    fsyncDirectory(target.toAbsolutePath().getParent());
  }
}
