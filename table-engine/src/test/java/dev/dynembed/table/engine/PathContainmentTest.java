package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.CheckpointFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A shard's checkpoints stay inside its data directory: a client cannot make it write or read
 * elsewhere (relative escapes, absolute paths, symbolic links), and its errors name the client's
 * own strings, never a server path or a checksum.
 */
class PathContainmentTest {
  @TempDir Path root;

  private ShardEngine engine() throws Exception {
    Path data = Files.createDirectories(root.resolve("data"));
    ShardEngine e = new ShardEngine(0, 1, data);
    e.create(TableConfigs.builder("emb", 4).build());
    Fixtures.rows(e.get("emb"), "a", "b", "c");
    return e;
  }

  @Test
  void savesAndRestoresInside_work() throws Exception {
    ShardEngine e = engine();
    CheckpointFile f = e.save("emb", "ckpt/step-1", 1);
    assertTrue(Files.exists(root.resolve("data/ckpt/step-1").resolve(f.getName())));
    assertEquals(3, e.restore("emb", "ckpt/step-1", List.of(f)));
    // absolute, but inside the data directory: fine too
    e.save("emb", root.resolve("data/abs").toString(), 1);
  }

  @Test
  void escapes_areRefused_andNothingIsWrittenOutside() throws Exception {
    ShardEngine e = engine();
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "is outside this shard's data directory",
        () -> e.save("emb", "../outside", 1));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "is outside this shard's data directory",
        () -> e.save("emb", root.resolve("elsewhere").toString(), 1));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "is outside this shard's data directory",
        () -> e.restore("emb", "a/../../outside", List.of(CheckpointFile.newBuilder()
            .setName("x.ckpt").build())));
    assertFalse(Files.exists(root.resolve("outside")));
    assertFalse(Files.exists(root.resolve("elsewhere")));
  }

  @Test
  void symbolicLinksOut_areRefused() throws Exception {
    ShardEngine e = engine();
    Path outside = Files.createDirectories(root.resolve("secret"));
    Files.createSymbolicLink(root.resolve("data/link"), outside);
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "through a symbolic link",
        () -> e.save("emb", "link/ckpt", 1));
    assertFalse(Files.exists(outside.resolve("ckpt")));
    // a checkpoint file that is a link to a file elsewhere is not read either
    CheckpointFile f = e.save("emb", "real", 1);
    Files.move(root.resolve("data/real").resolve(f.getName()), outside.resolve(f.getName()));
    Files.createSymbolicLink(root.resolve("data/real").resolve(f.getName()),
        outside.resolve(f.getName()));
    Fixtures.assertError(ErrorCode.INVALID_ARGUMENT, "through a symbolic link",
        () -> e.restore("emb", "real", List.of(f)));
  }

  @Test
  void errors_nameNoServerPathAndNoChecksum() throws Exception {
    ShardEngine e = engine();
    CheckpointFile f = e.save("emb", "ckpt", 1);
    Path file = root.resolve("data/ckpt").resolve(f.getName());
    byte[] b = Files.readAllBytes(file);
    b[b.length / 2] ^= 1;
    Files.write(file, b);
    String msg = Fixtures.assertError(ErrorCode.DATA_LOSS, "does not match its manifest's"
        + " checksum", () -> e.restore("emb", "ckpt", List.of(f))).getMessage();
    assertFalse(msg.contains(root.toString()), msg);
    assertFalse(msg.contains(String.format("%08x", f.getCrc32C())), msg);
    Files.delete(file);
    msg = Fixtures.assertError(ErrorCode.DATA_LOSS, "is missing",
        () -> e.restore("emb", "ckpt", List.of(f))).getMessage();
    assertFalse(msg.contains(root.toString()), msg);
  }

  @Test
  void aTableInTheCallersOwnProcess_isNotConfined() throws Exception {
    ShardEngine e = new ShardEngine(0, 1, Files.createDirectories(root.resolve("data")), false);
    e.create(TableConfigs.builder("emb", 4).build());
    e.save("emb", root.resolve("anywhere").toString(), 1);
    assertTrue(Files.isDirectory(root.resolve("anywhere")));
  }
}
