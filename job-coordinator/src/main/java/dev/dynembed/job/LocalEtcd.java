package dev.dynembed.job;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A one-member etcd on loopback, for tests and single-machine runs: Debian's {@code etcd-server}
 * ({@code etcd} on the PATH, or the binary named by {@code ETCD}) started on free ports with its
 * data in a temporary directory, which {@link #close} removes.
 */
public final class LocalEtcd implements AutoCloseable {
  private final Process process;
  private final Path dir;
  private final int port;
  private final String host;

  /** An etcd on {@code 127.0.0.1}. */
  public LocalEtcd() {
    this("127.0.0.1");
  }

  /**
   * An etcd whose client and peer ports listen on {@code host}: an address of this machine (a
   * network namespaces harness's bridge, so that processes inside the namespaces reach it).
   */
  public LocalEtcd(String host) {
    this.host = host;
    String binary = System.getenv().getOrDefault("ETCD", "etcd");
    if (binary.equals("etcd")) {
      installIfMissing();
    }
    try {
      dir = Files.createTempDirectory("etcd");
      port = freePort();
      int peer = freePort();
      String client = "http://" + host + ":" + port;
      String peerUrl = "http://" + host + ":" + peer;
      process = new ProcessBuilder(List.of(binary, "--name", "local", "--data-dir",
          dir.resolve("data").toString(), "--listen-client-urls", client,
          "--advertise-client-urls", client, "--listen-peer-urls", peerUrl,
          "--initial-advertise-peer-urls", peerUrl, "--initial-cluster", "local=" + peerUrl,
          "--log-level", "error"))
          .redirectErrorStream(true).redirectOutput(dir.resolve("etcd.log").toFile()).start();
    } catch (IOException e) {
      throw new JobException("cannot start etcd ('" + binary + "'): " + e.getMessage()
          + "; install Debian's etcd-server (apt-get install etcd-server) or set ETCD", e);
    }
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (true) {
      try (Socket s = new Socket(host, port)) {
        return;
      } catch (IOException notYet) {
        if (!process.isAlive() || System.nanoTime() > deadline) {
          String log = "";
          try {
            log = Files.readString(dir.resolve("etcd.log"));
          } catch (IOException ignored) {
            // no log
          }
          close();
          throw new JobException("etcd did not start on port " + port + ": " + log);
        }
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          close();
          throw new JobException("interrupted while starting etcd", e);
        }
      }
    }
  }

  /** {@code host:port}, as {@code --coordinator} takes it. */
  public String endpoint() {
    return host + ":" + port;
  }

  /** The client port. */
  public int port() {
    return port;
  }

  @Override
  public void close() {
    process.destroy();
    try {
      process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    process.destroyForcibly();
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    } catch (IOException ignored) {
      // a leftover temporary directory
    }
  }

  /**
   * Runs the repo's {@code bin/install-deps etcd-server} when {@code etcd} is not on the PATH
   * (found from the working directory upwards: tests run in a module's directory).
   */
  private static synchronized void installIfMissing() {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "etcd"))) {
        return;
      }
    }
    Path script = null;
    for (Path d = Path.of("").toAbsolutePath(); d != null && script == null; d = d.getParent()) {
      if (Files.isExecutable(d.resolve("bin/install-deps"))) {
        script = d.resolve("bin/install-deps");
      }
    }
    if (script == null) {
      return; // the start fails with the install hint
    }
    try {
      Process p = new ProcessBuilder(script.toString(), "etcd-server").inheritIO().start();
      if (p.waitFor() != 0) {
        throw new JobException("etcd is not installed and " + script + " failed (exit "
            + p.exitValue() + "); install Debian's etcd-server or set ETCD");
      }
    } catch (IOException e) {
      throw new JobException("cannot run " + script + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new JobException("interrupted while installing etcd", e);
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
