package dev.dynembed.table.common;

import com.google.protobuf.util.JsonFormat;
import dev.dynembed.table.v1.CheckpointManifest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * The version of the checkpoint format (docs/design/0004-checkpoint-format.md): written by the
 * engine in every shard file and by the client in every manifest, checked by both on restore;
 * and the manifests' reading, which clients and a serving replica started from a checkpoint
 * ({@code table-server --start-from}) share.
 */
public final class CheckpointFormat {
  private CheckpointFormat() {}

  public static final int VERSION = 1;

  /** What a table's manifest's name ends with after the table's name. */
  private static final String MANIFEST_SUFFIX = ".manifest.json";

  /** Where a table's manifest lies in a checkpoint directory. */
  public static Path manifestPath(Path dir, String table) {
    return dir.resolve(table + MANIFEST_SUFFIX);
  }

  /** The manifest of a table's checkpoint in {@code dir}, checked for consistency. */
  public static CheckpointManifest readManifest(Path dir, String table) {
    Path p = manifestPath(dir, table);
    try {
      CheckpointManifest.Builder b = CheckpointManifest.newBuilder();
      JsonFormat.parser().merge(Files.readString(p, StandardCharsets.UTF_8), b);
      CheckpointManifest m = b.build();
      if (m.getFormatVersion() != VERSION) {
        throw TableException.of(ErrorCode.FAILED_PRECONDITION, String.format(
            "manifest %s has format version %d; this build reads %d", p, m.getFormatVersion(),
            VERSION), table, -1, "restore", null);
      }
      if (!m.getTable().equals(table) || m.getFilesCount() != m.getNumShards()
          || m.getFilesCount() == 0) {
        throw TableException.of(ErrorCode.DATA_LOSS, String.format(
            "manifest %s is inconsistent (table '%s', %d files for %d shards)", p, m.getTable(),
            m.getFilesCount(), m.getNumShards()), table, -1, "restore", null);
      }
      return m;
    } catch (NoSuchFileException e) {
      throw TableException.of(ErrorCode.DATA_LOSS, "no checkpoint manifest " + p
          + " (not a checkpoint directory of this table, or its save did not finish)", table, -1,
          "restore", e);
    } catch (IOException e) {
      throw TableException.of(ErrorCode.DATA_LOSS, "manifest " + p + " cannot be read: "
          + e.getMessage(), table, -1, "restore", e);
    }
  }

  /** The tables whose manifests lie in {@code dir}, sorted by name. */
  public static java.util.List<String> tablesIn(Path dir) throws IOException {
    try (java.util.stream.Stream<Path> files = Files.list(dir)) {
      return files.map(f -> f.getFileName().toString())
          .filter(n -> n.endsWith(MANIFEST_SUFFIX) && n.length() > MANIFEST_SUFFIX.length())
          .map(n -> n.substring(0, n.length() - MANIFEST_SUFFIX.length())).sorted().toList();
    }
  }
}
