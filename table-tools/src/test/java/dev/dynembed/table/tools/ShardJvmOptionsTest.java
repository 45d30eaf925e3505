package dev.dynembed.table.tools;

import static dev.dynembed.table.tools.ServiceOptionsParsing.parse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.tools.cli.TableServiceOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The JVM options of the shards {@code --shards N} starts: {@code --shard-java-opts} after the
 * defaults (so a user's value wins), {@code {shard}} in them replaced by each shard's index, and
 * the CPU of their compiler threads read back from /proc.
 */
@Tag("processes")
class ShardJvmOptionsTest {
  @TempDir Path dir;

  @Test
  void badShardJavaOptsAreRefusedByName() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> parse("--shard-java-opts", "-XX:+UseSerialGC").check());
    assertTrue(e.getMessage().contains("--shard-java-opts is for the shards --shards N starts"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> parse("--shards", "2", "--shard-java-opts", "-Xss1m Main").check());
    assertTrue(e.getMessage().contains("each starting with '-'")
        && e.getMessage().contains("-Xss1m Main"), e.getMessage());
    parse("--shards", "2", "--shard-java-opts", " -XX:+UseSerialGC  -Dx=y ").check();
  }

  @Test
  void everyShardGetsTheUsersOptionsAfterTheDefaults_andItsCompilerCpuIsRead() throws Exception {
    String mine = "-XX:Tier4InvocationThreshold=7000";
    TableServiceOptions o = parse("--shards", "2", "--shard-java-opts",
        mine + " -Dshard.test={shard}");
    try (LocalShardProcesses procs = o.start(dir, "")) {
      List<Long> pids = procs.pids();
      assertEquals(2, pids.size());
      for (int i = 0; i < 2; i++) {
        long pid = pids.get(i);
        // ProcessHandle.Info leaves out command lines longer than a page (the class path)
        List<String> args = List.of(Files.readString(Path.of("/proc", pid + "", "cmdline"))
            .split("\0"));
        // a JVM takes the last of a repeated option: the user's come after the defaults, and
        // before the class path and main class
        int defaults = args.indexOf("-XX:+UseParallelGC");
        // {shard} became the index: the processes start in shard order
        String prop = "-Dshard.test=" + i;
        assertTrue(defaults >= 0 && args.indexOf(mine) > defaults
            && args.indexOf(prop) > defaults, "order in " + args);
        assertTrue(args.indexOf(prop) < args.indexOf("-cp"), "order in " + args);
      }
      // the shards compiled their start-up code: their compiler threads have run, and are part
      // of their CPU
      double jit = procs.compilerCpuSeconds();
      double cpu = procs.cpuSeconds();
      assertTrue(jit > 0 && jit <= cpu, "compiler CPU " + jit + " s of " + cpu + " s");
    }
  }

  @Test
  void compilerCpuIsReadFromProc() {
    long self = ProcessHandle.current().pid();
    double jit = LocalShardProcesses.compilerCpuSeconds(self);
    // this JVM compiled JUnit and the test before getting here
    assertTrue(jit > 0 && jit <= LocalShardProcesses.cpuSeconds(self), "compiler CPU " + jit);
    assertEquals(-1, LocalShardProcesses.compilerCpuSeconds(Long.MAX_VALUE), 0);
  }
}
