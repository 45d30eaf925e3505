package dev.dynembed.table.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.tools.cli.TableServiceOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The JVM options of the shards {@code --shards N} starts: the JIT thresholds of {@link
 * LocalShardProcesses#JIT_OPTIONS} on every shard, {@code --shard-java-opts} after them (so a
 * user's value wins), and the CPU of the compiler threads read back from /proc.
 */
class ShardJvmOptionsTest {
  @TempDir Path dir;

  private static TableServiceOptions parse(String... args) {
    TableServiceOptions o = new TableServiceOptions("256m");
    new CommandLine(CommandLine.Model.CommandSpec.create().addMixin("service",
        CommandLine.Model.CommandSpec.forAnnotatedObject(o))).parseArgs(args);
    return o;
  }

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
  void everyShardGetsTheJitThresholds_andTheUsersOptionsAfterThem() throws Exception {
    String mine = "-XX:Tier4InvocationThreshold=7000";
    TableServiceOptions o = parse("--shards", "2", "--shard-java-opts", mine + " -Dshard.test=1");
    try (LocalShardProcesses procs = o.start(dir, "")) {
      List<Long> pids = procs.pids();
      assertEquals(2, pids.size());
      for (long pid : pids) {
        // ProcessHandle.Info leaves out command lines longer than a page (the class path)
        List<String> args = List.of(Files.readString(Path.of("/proc", pid + "", "cmdline"))
            .split("\0"));
        for (String jit : LocalShardProcesses.JIT_OPTIONS) {
          assertTrue(args.contains(jit), jit + " missing from " + args);
        }
        // HotSpot takes the last of a repeated -XX option: the user's comes after the default
        int def = args.indexOf(LocalShardProcesses.JIT_OPTIONS.get(0));
        assertTrue(def >= 0 && args.indexOf(mine) > def, "order in " + args);
        assertTrue(args.indexOf("-Dshard.test=1") < args.indexOf("-cp"), "order in " + args);
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
