package dev.dynembed.table.redis;

import dev.dynembed.table.common.Dirs;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Redis on loopback for tests, demos and benchmarks: Debian's {@code redis-server} (installed by
 * the repo's {@code bin/install-deps} when missing) started on free ports with no persistence, as
 * one node or as a Redis Cluster of {@code n} masters ({@code redis-cli --cluster create}). {@link
 * #close} stops the processes and removes their directory.
 */
public final class LocalRedis implements AutoCloseable {
  private final List<Process> processes = new ArrayList<>();
  private final List<Integer> ports = new ArrayList<>();
  private final Path dir;
  private final boolean cluster;

  private LocalRedis(int nodes, boolean cluster) {
    this.cluster = cluster;
    installIfMissing();
    try {
      dir = Files.createTempDirectory("redis");
      for (int i = 0; i < nodes; i++) {
        int port = cluster ? freeClusterPort() : freePort();
        Path d = Files.createDirectories(dir.resolve("node" + i));
        List<String> cmd = new ArrayList<>(List.of("redis-server", "--port",
            Integer.toString(port), "--bind", "127.0.0.1", "--dir", d.toString(), "--save", "",
            "--appendonly", "no", "--protected-mode", "no"));
        if (cluster) {
          cmd.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
              "--cluster-node-timeout", "5000"));
        }
        processes.add(new ProcessBuilder(cmd).redirectErrorStream(true)
            .redirectOutput(d.resolve("redis.log").toFile()).start());
        ports.add(port);
      }
      for (int i = 0; i < nodes; i++) {
        awaitPort(i);
      }
      if (cluster) {
        List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
        for (int p : ports) {
          create.add("127.0.0.1:" + p);
        }
        create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
        Process p = new ProcessBuilder(create).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
          throw new IllegalStateException("redis-cli --cluster create failed: " + out);
        }
        awaitClusterOk();
      }
    } catch (IOException e) {
      close();
      throw new IllegalStateException("cannot start redis-server: " + e.getMessage()
          + "; install Debian's redis-server (bin/install-deps redis-server)", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      close();
      throw new IllegalStateException("interrupted while starting Redis", e);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** One Redis node. */
  public static LocalRedis single() {
    return new LocalRedis(1, false);
  }

  /** A Redis Cluster of {@code masters} masters (at least 3), no replicas. */
  public static LocalRedis cluster(int masters) {
    if (masters < 3) {
      throw new IllegalArgumentException("a Redis Cluster needs at least 3 masters");
    }
    return new LocalRedis(masters, true);
  }

  /** The URI {@link RedisTables#connect} takes. */
  public String uri() {
    if (!cluster) {
      return "redis://127.0.0.1:" + ports.get(0);
    }
    StringBuilder b = new StringBuilder("redis-cluster://");
    for (int i = 0; i < ports.size(); i++) {
      b.append(i == 0 ? "" : ",").append("127.0.0.1:").append(ports.get(i));
    }
    return b.toString();
  }

  /** Ports of the nodes. */
  public List<Integer> ports() {
    return List.copyOf(ports);
  }

  private void awaitPort(int i) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (true) {
      try (Socket s = new Socket("127.0.0.1", ports.get(i))) {
        return;
      } catch (IOException notYet) {
        if (!processes.get(i).isAlive() || System.nanoTime() > deadline) {
          throw new IllegalStateException("redis-server did not start on port " + ports.get(i)
              + ": " + log(i));
        }
        Thread.sleep(20);
      }
    }
  }

  private void awaitClusterOk() throws IOException, InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    for (int i = 0; i < ports.size(); i++) {
      while (true) {
        Process p = new ProcessBuilder("redis-cli", "-p", Integer.toString(ports.get(i)),
            "cluster", "info").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor();
        if (out.contains("cluster_state:ok")) {
          break;
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the Redis Cluster did not become ok: " + out);
        }
        Thread.sleep(100);
      }
    }
  }

  private String log(int i) {
    try {
      return Files.readString(dir.resolve("node" + i).resolve("redis.log"));
    } catch (IOException e) {
      return "(no log)";
    }
  }

  @Override
  public void close() {
    for (Process p : processes) {
      p.destroy();
    }
    for (Process p : processes) {
      try {
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        p.destroyForcibly();
      }
    }
    if (dir == null) {
      return;
    }
    Dirs.deleteQuietly(dir);
  }

  /**
   * Runs the repo's {@code bin/install-deps redis-server} when {@code redis-server} is not on the
   * PATH (found from the working directory upwards: tests run in a module's directory).
   */
  private static synchronized void installIfMissing() {
    for (String d : System.getenv().getOrDefault("PATH", "").split(":")) {
      if (!d.isEmpty() && Files.isExecutable(Path.of(d, "redis-server"))) {
        return;
      }
    }
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      Path script = d.resolve("bin/install-deps");
      if (Files.isExecutable(script)) {
        try {
          Process p = new ProcessBuilder(script.toString(), "redis-server").inheritIO().start();
          if (p.waitFor() != 0) {
            throw new IllegalStateException("redis-server is not installed and " + script
                + " failed (exit " + p.exitValue() + "); install Debian's redis-server");
          }
        } catch (IOException e) {
          throw new IllegalStateException("cannot run " + script + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while installing redis-server", e);
        }
        return;
      }
    }
  }

  /** A free port below 55536 whose cluster bus port (port + 10000) is free too. */
  private static int freeClusterPort() throws IOException {
    java.util.Random rnd = new java.util.Random();
    for (int attempt = 0; attempt < 200; attempt++) {
      int port = 20000 + rnd.nextInt(20000);
      try (ServerSocket a = new ServerSocket(port); ServerSocket b = new ServerSocket(port + 10000)) {
        return port;
      } catch (IOException taken) {
        // try another
      }
    }
    throw new IOException("no free port pair (p, p + 10000) for a Redis Cluster node");
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
