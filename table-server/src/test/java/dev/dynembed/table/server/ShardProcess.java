package dev.dynembed.table.server;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One shard as its own process ({@link TableServerMain} on this test's class path), as an outside
 * client meets it: its own heap, {@code -XX:+ExitOnOutOfMemoryError} as bin/table-server runs
 * it, so that a call that takes the shard's memory shows as the process gone.
 */
final class ShardProcess implements AutoCloseable {
  private static final Pattern GRPC = Pattern.compile("listening on [^:]+:(\\d+)");
  private static final Pattern DATA = Pattern.compile("data plane on [^:]+:(\\d+)");

  final Process process;
  final int port;
  final int dataPort;
  final Path log;

  /**
   * @param heap {@code -Xmx}, e.g. "256m"
   * @param args after {@code --port 0 --data-dir DIR}
   */
  ShardProcess(Path dir, String heap, String... args) throws IOException, InterruptedException {
    Files.createDirectories(dir);
    log = dir.resolve("shard.log");
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xms" + heap, "-Xmx" + heap, "-XX:+ExitOnOutOfMemoryError",
        "-cp", System.getProperty("java.class.path"), TableServerMain.class.getName(),
        "--port", "0", "--data-dir", dir.toString()));
    cmd.addAll(List.of(args));
    process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    int grpc = -1;
    int data = -1;
    StringBuilder seen = new StringBuilder();
    BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
        StandardCharsets.UTF_8));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while ((grpc < 0 || data < 0) && System.nanoTime() < deadline) {
      String line = r.readLine();
      if (line == null) {
        break;
      }
      seen.append(line).append('\n');
      Matcher m = GRPC.matcher(line);
      if (m.find()) {
        grpc = Integer.parseInt(m.group(1));
      }
      m = DATA.matcher(line);
      if (m.find()) {
        data = Integer.parseInt(m.group(1));
      }
    }
    if (grpc < 0 || data < 0) {
      process.destroyForcibly();
      throw new IOException("shard did not start: " + seen);
    }
    port = grpc;
    dataPort = data;
    // the rest of its output goes to a file (read on failure), so its pipe never fills
    Thread drain = new Thread(() -> {
      try (var w = Files.newBufferedWriter(log)) {
        w.write(seen.toString());
        String line;
        while ((line = r.readLine()) != null) {
          w.write(line);
          w.newLine();
          w.flush();
        }
      } catch (IOException e) {
        // the process is gone
      }
    }, "shard-output");
    drain.setDaemon(true);
    drain.start();
  }

  boolean alive() {
    return process.isAlive();
  }

  /** Resident memory of the process in MiB (VmRSS), or -1 once it is gone. */
  long rssMiB() {
    try {
      for (String l : Files.readAllLines(Path.of("/proc", String.valueOf(process.pid()),
          "status"))) {
        if (l.startsWith("VmRSS:")) {
          return Long.parseLong(l.replaceAll("[^0-9]", "")) >> 10;
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }

  String output() {
    try {
      return Files.readString(log);
    } catch (IOException e) {
      return "(no output: " + e + ")";
    }
  }

  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }
}
