package dev.dynembed.table.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Starts shard server processes for the benchmark and stops them. */
final class Systems {
  private Systems() {}

  static final class Shards implements AutoCloseable {
    final List<Process> processes = new ArrayList<>();
    final List<String> endpoints = new ArrayList<>();

    Shards(int n, int basePort, Path dataDir, String heap, String javaOpts) throws IOException {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      String cp = System.getProperty("java.class.path");
      for (int i = 0; i < n; i++) {
        int port = basePort + i;
        List<String> cmd = new ArrayList<>(List.of(java, "-Xmx" + heap, "-XX:+UseParallelGC"));
        for (String o : javaOpts.trim().split("\\s+")) {
          if (!o.isEmpty()) {
            cmd.add(o.replace("{shard}", String.valueOf(i)));
          }
        }
        cmd.addAll(List.of("-cp", cp, "dev.dynembed.table.server.TableServerMain",
            "--port", String.valueOf(port), "--shard-index", String.valueOf(i),
            "--num-shards", String.valueOf(n), "--data-dir", dataDir.toString()));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        Process p = pb.start();
        processes.add(p);
        BufferedReader r = new BufferedReader(
            new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        String line;
        while ((line = r.readLine()) != null && !line.contains("listening")) {
          seen.append(line).append('\n');
        }
        if (line == null) {
          close();
          throw new IOException("shard " + i + " did not start:\n" + seen);
        }
        Thread drain = new Thread(() -> {
          try {
            while (r.readLine() != null) {
              // discard
            }
          } catch (IOException ignored) {
            // process ended
          }
        });
        drain.setDaemon(true);
        drain.start();
        endpoints.add("127.0.0.1:" + port);
      }
    }

    /** Resident set size of the server processes, from /proc (Linux). */
    long rssBytes() {
      long total = 0;
      for (Process p : processes) {
        try {
          for (String line : java.nio.file.Files.readAllLines(
              Path.of("/proc", String.valueOf(p.pid()), "status"))) {
            if (line.startsWith("VmRSS:")) {
              total += Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
          }
        } catch (IOException e) {
          return -1;
        }
      }
      return total;
    }

    @Override
    public void close() {
      for (Process p : processes) {
        p.destroy();
      }
      for (Process p : processes) {
        try {
          if (!p.waitFor(5, TimeUnit.SECONDS)) {
            p.destroyForcibly();
          }
        } catch (InterruptedException e) {
          p.destroyForcibly();
          Thread.currentThread().interrupt();
        }
      }
    }
  }
}
