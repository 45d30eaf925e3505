package dev.dynembed.table.client.internal;

import com.google.protobuf.util.JsonFormat;
import dev.dynembed.table.client.Internal;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.CheckpointFormat;
import dev.dynembed.table.v1.CheckpointManifest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The manifest of a table's checkpoint, {@code <dir>/<table>.manifest.json} (protobuf's JSON
 * mapping of {@link CheckpointManifest}; docs/design/0004-checkpoint-format.md): written after
 * every shard has written its file, read and checked before a restore.
 */
@Internal
public final class Manifests {
  private Manifests() {}

  static Path path(Path dir, String table) {
    return CheckpointFormat.manifestPath(dir, table);
  }

  /** Writes the manifest beside a temporary name and renames it into place. */
  static void write(Path dir, CheckpointManifest m) {
    Path target = path(dir, m.getTable());
    Path tmp = dir.resolve(target.getFileName() + ".tmp");
    try {
      Files.writeString(tmp, JsonFormat.printer().print(m) + "\n", StandardCharsets.UTF_8);
      Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw TableException.of(ErrorCode.INTERNAL, "writing manifest " + target + " failed: " + e,
          m.getTable(), -1, "save", e);
    }
  }

  /** The manifest of a table's checkpoint in {@code dir}, checked for consistency. */
  public static CheckpointManifest read(Path dir, String table) {
    return CheckpointFormat.readManifest(dir, table);
  }
}
