package dev.dynembed.table.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code bin/table-server}'s own decisions: where its data goes, and what it refuses to serve. */
class TableServerMainTest {
  @TempDir Path dir;

  @Test
  void defaultDataDirectory_isTheXdgDataHome_neverTheWorkingDirectory() {
    assertEquals(Path.of("/srv/xdg/dynembed"),
        TableServerMain.defaultDataDir(Map.of("XDG_DATA_HOME", "/srv/xdg"), "/home/u"));
    assertEquals(Path.of("/home/u/.local/share/dynembed"),
        TableServerMain.defaultDataDir(Map.of(), "/home/u"));
    // the XDG spec ignores a relative XDG_DATA_HOME: it would be the working directory again
    assertEquals(Path.of("/home/u/.local/share/dynembed"),
        TableServerMain.defaultDataDir(Map.of("XDG_DATA_HOME", "data"), "/home/u"));
  }

  private static String run(String... args) {
    PrintStream old = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      int code = new CommandLine(new TableServerMain()).execute(args);
      return code + ": " + err.toString(StandardCharsets.UTF_8);
    } finally {
      System.setErr(old);
    }
  }

  @Test
  void plaintextOnANonLoopbackHost_isRefusedWithoutInsecure_beforeAnythingIsWritten() {
    Path data = dir.resolve("data");
    String out = run("--host", "0.0.0.0", "--port", "0", "--data-dir", data.toString());
    assertTrue(out.startsWith("2: "), out);
    assertTrue(out.contains("--insecure"), out);
    assertTrue(out.contains("plaintext"), out);
    assertTrue(!Files.exists(data.resolve("state")), "no state written: " + out);
  }
}
