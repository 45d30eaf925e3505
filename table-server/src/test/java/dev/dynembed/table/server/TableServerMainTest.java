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

  private static String runInOneProcess(String... args) {
    PrintStream old = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      return ShardsInOneProcess.run(args) + ": " + err.toString(StandardCharsets.UTF_8);
    } finally {
      System.setErr(old);
    }
  }

  @Test
  void shardsInOneProcess_refuseWhatNeedsAProcessPerShard_andBadLists() {
    String data = dir.resolve("d").toString();
    String[][] cases = {
        {"--shard-indexes 0,1 is required", "--num-shards", "2", "--data-dir", data},
        {"--port is not for several shards", "--shard-indexes", "0,1", "--port", "7000"},
        {"--metrics-port is not for several shards", "--shard-indexes", "0,1",
            "--metrics-port=9100"},
        {"--ports names 1 ports for 2 shards", "--shard-indexes", "0,1", "--ports", "0"},
        {"names a shard twice", "--shard-indexes", "1,1", "--num-shards", "2"},
        {"takes integers separated by commas; got 'a,b'", "--shard-indexes", "a,b"},
    };
    for (String[] c : cases) {
      String out = runInOneProcess(java.util.Arrays.copyOfRange(c, 1, c.length));
      assertTrue(out.startsWith("2: "), out);
      assertTrue(out.contains(c[0].replace(" 0,1 ", " I,J,... ")), c[0] + " not in: " + out);
    }
    // a shard that cannot start ends the process with its code (none starts here: a started
    // one would keep serving in this JVM, where no System.exit ends it)
    String out = runInOneProcess("--shard-indexes", "5,6", "--num-shards", "2", "--data-dir",
        data);
    assertTrue(out.startsWith("2: ") && out.contains("--shard-index must be in [0, 2)"), out);
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

  /** Issue 30: replication options that cannot work are refused by name, before any state. */
  @Test
  void replicationMisconfigurations_areRefusedByName() throws Exception {
    Path data = dir.resolve("rep");
    String cluster = "etcd://127.0.0.1:2379/c";
    String[][] cases = {
        {"--replication needs --cluster", "--replication", "sync"},
        {"--replication must be sync or async", "--cluster", cluster, "--replication", "both"},
        {"it needs --wal on", "--cluster", cluster, "--replication", "sync", "--wal", "off"},
        {"--replication and --redis-tier do not go together", "--cluster", cluster,
            "--replication", "async", "--redis-tier", "redis://127.0.0.1:1"},
        {"--min-sync-replicas is for --replication sync", "--min-sync-replicas", "1"},
        {"--min-sync-replicas must be >= 0", "--cluster", cluster, "--replication", "sync",
            "--min-sync-replicas", "-1"},
        {"--peer-token-file", "--cluster", cluster, "--replication", "sync", "--tokens",
            write("tokens", "admin T\n").toString()},
        {"--advertise is what --cluster registers", "--advertise", "h"},
        {"names no cluster", "--cluster", "etcd://127.0.0.1:2379"},
        {"--start-from is for a serving replica (--serve-from)", "--start-from", "ckpt"},
    };
    for (String[] c : cases) {
      String[] args = new String[c.length - 1 + 4];
      System.arraycopy(c, 1, args, 0, c.length - 1);
      System.arraycopy(new String[] {"--port", "0", "--data-dir", data.toString()}, 0, args,
          c.length - 1, 4);
      String out = run(args);
      assertTrue(out.startsWith("2: ") && out.contains(c[0]), String.join(" ", args) + " -> "
          + out);
    }
    assertTrue(!Files.exists(data.resolve("state")), "no state written");
  }

  private Path write(String name, String text) throws java.io.IOException {
    Path p = dir.resolve(name);
    Files.writeString(p, text);
    return p;
  }
}
