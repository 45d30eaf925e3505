package dev.dynembed.table.tools;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Network namespaces joined to this one by veth pairs, and faults on their links (issue 50's
 * harness; root, or passwordless sudo): namespace i holds {@link #address} {@code 10.79.i.2}, this
 * side of its link {@code 10.79.i.1}, a /30 of their own, so traffic goes only between addresses
 * created here. Shards run inside with {@link #launcher} ({@code ip netns exec NS}); a fault cuts,
 * starves or shapes one link, and {@link #heal} undoes it. Closing removes links and namespaces.
 *
 * <p>The faults are what the kernel has without {@code sch_netem} (not in every kernel, this
 * VM's among them): a link set down (sends fail at once: no route), a link starved by a token
 * bucket of a few bits a second (packets dropped silently, both ways: a partition as a switch
 * failure makes it), a bucket that drops what exceeds a small queue (loss under load), and one
 * that queues for seconds (a delay spike).
 */
public final class NetworkNamespaces implements AutoCloseable {
  /** What a fault does to a link. */
  public enum Fault {
    /** The link is down: sends fail at once (no route), connections see errors. */
    DOWN,
    /** Every packet dropped silently, both ways: calls hang until their deadlines. */
    BLACKHOLE,
    /** Packets beyond a 3 ms queue at 20 Mbit/s dropped, both ways: loss under load. */
    LOSSY,
    /** A 200 kbit/s link with a queue of seconds, both ways: a delay spike. */
    SLOW
  }

  private final String tag;
  private final int n;
  private final boolean sudo;

  /** Creates {@code n} namespaces (at most 250), each joined to this one by a veth pair. */
  public NetworkNamespaces(int n) throws IOException {
    if (n < 1 || n > 250) {
      throw new IllegalArgumentException("1..250 namespaces, not " + n);
    }
    this.n = n;
    this.tag = "dyn" + (ProcessHandle.current().pid() % 100_000);
    this.sudo = !"root".equals(System.getProperty("user.name"));
    try {
      for (int i = 0; i < n; i++) {
        run("ip", "netns", "add", name(i));
        run("ip", "link", "add", hostLink(i), "type", "veth", "peer", "name", nsLink(i));
        run("ip", "link", "set", nsLink(i), "netns", name(i));
        run("ip", "addr", "add", "10.79." + i + ".1/30", "dev", hostLink(i));
        run("ip", "link", "set", hostLink(i), "up");
        inside(i, "ip", "addr", "add", address(i) + "/30", "dev", nsLink(i));
        inside(i, "ip", "link", "set", nsLink(i), "up");
        inside(i, "ip", "link", "set", "lo", "up");
      }
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    }
  }

  /** The name of namespace i. */
  public String name(int i) {
    return tag + "n" + i;
  }

  /** The address inside namespace i. */
  public String address(int i) {
    return "10.79." + i + ".2";
  }

  private String hostLink(int i) {
    return tag + "h" + i;
  }

  private String nsLink(int i) {
    return tag + "v" + i;
  }

  /** A command prefix that runs process {@code {shard}} inside namespace {@code {shard}}. */
  public List<String> launcher() {
    List<String> l = new ArrayList<>(sudo ? List.of("sudo", "-n") : List.of());
    l.addAll(List.of("ip", "netns", "exec", tag + "n{shard}"));
    return l;
  }

  /** Puts {@code fault} on namespace i's link (after healing what was there). */
  public void inject(int i, Fault fault) throws IOException {
    heal(i);
    switch (fault) {
      case DOWN -> run("ip", "link", "set", hostLink(i), "down");
      case BLACKHOLE -> shape(i, "8bit", "1540", "1");
      case LOSSY -> shape(i, "20mbit", "16kb", "latency 3ms");
      case SLOW -> shape(i, "200kbit", "16kb", "latency 4s");
      default -> throw new IllegalArgumentException(String.valueOf(fault));
    }
  }

  /** A token bucket on both ends of link i; {@code limit} is a byte count or "latency T". */
  private void shape(int i, String rate, String burst, String limit) throws IOException {
    List<String> q = new ArrayList<>(List.of("root", "tbf", "rate", rate, "burst", burst));
    q.addAll(limit.startsWith("latency") ? Arrays.asList(limit.split(" "))
        : List.of("limit", limit));
    List<String> host = new ArrayList<>(List.of("tc", "qdisc", "add", "dev", hostLink(i)));
    host.addAll(q);
    run(host.toArray(String[]::new));
    List<String> ns = new ArrayList<>(List.of("tc", "qdisc", "add", "dev", nsLink(i)));
    ns.addAll(q);
    inside(i, ns.toArray(String[]::new));
  }

  /** Undoes any fault on namespace i's link. */
  public void heal(int i) throws IOException {
    run("ip", "link", "set", hostLink(i), "up");
    quietly("tc", "qdisc", "del", "dev", hostLink(i), "root");
    quietly("ip", "netns", "exec", name(i), "tc", "qdisc", "del", "dev", nsLink(i), "root");
  }

  private void inside(int i, String... cmd) throws IOException {
    List<String> c = new ArrayList<>(List.of("ip", "netns", "exec", name(i)));
    c.addAll(Arrays.asList(cmd));
    run(c.toArray(String[]::new));
  }

  private void run(String... cmd) throws IOException {
    String out = exec(cmd);
    if (out != null) {
      throw new IOException(String.join(" ", cmd) + " failed (the fault harness needs root or"
          + " passwordless sudo, and iproute2): " + out);
    }
  }

  private void quietly(String... cmd) {
    try {
      exec(cmd);
    } catch (IOException ignored) {
      // nothing to remove
    }
  }

  /** Runs a command; null when it succeeded, else its output. */
  private String exec(String... cmd) throws IOException {
    List<String> c = new ArrayList<>(sudo ? List.of("sudo", "-n") : List.of());
    c.addAll(Arrays.asList(cmd));
    Process p = new ProcessBuilder(c).redirectErrorStream(true).start();
    try {
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(30, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return "timed out";
      }
      return p.exitValue() == 0 ? null : out.trim();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted: " + String.join(" ", cmd), e);
    }
  }

  /** Removes the links and the namespaces (the processes inside should be gone first). */
  @Override
  public void close() {
    for (int i = 0; i < n; i++) {
      quietly("ip", "link", "del", hostLink(i));
      quietly("ip", "netns", "del", name(i));
    }
  }
}
