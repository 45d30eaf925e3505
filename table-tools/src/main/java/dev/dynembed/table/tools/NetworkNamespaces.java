package dev.dynembed.table.tools;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Network namespaces joined to this one by veth pairs, and faults on their links (issue 50's
 * harness; root, or passwordless sudo): namespace i holds {@link #address} {@code 10.79.i.2}, so
 * traffic goes only between addresses created here. Shards run inside with {@link #launcher}
 * ({@code ip netns exec NS}); a fault cuts, starves or shapes one link, and {@link #heal} undoes
 * it. Closing removes links and namespaces. Two layouts:
 * <ul>
 *   <li>{@link #NetworkNamespaces(int) isolated}: each link a /30 of its own ({@code 10.79.i.1}
 *       on this side): the namespaces reach this one only, and a link set down fails sends at
 *       once (no route);
 *   <li>{@link #bridged}: the links' ends on one bridge of this namespace, {@link #HOST} {@code
 *       10.79.255.1}, all in {@code 10.79.0.0/16}: the namespaces reach each other (a replicated
 *       group's primary and followers) and a service of this namespace listening on {@link
 *       #HOST} (etcd). {@link #cut} partitions two namespaces from each other, {@link
 *       #cutFromHost} one from a port of this namespace (etcd) or from all of it but that port
 *       (its clients): packets dropped silently both ways, the rest of the network whole.
 * </ul>
 *
 * <p>The faults are what the kernel has without {@code sch_netem} and tc's actions (not in every
 * kernel, this VM's among them): a link set down, a link starved by a token bucket of a few
 * bits a second (packets dropped silently, both ways: a partition as a switch failure makes it),
 * a bucket that drops what exceeds a small queue (loss under load), one that queues for seconds
 * (a delay spike); and for the cuts between two addresses, an HTB class whose leaf queue holds
 * nothing, which u32 filters send the cut traffic to.
 */
public final class NetworkNamespaces implements AutoCloseable {
  /** What a fault does to a link. */
  public enum Fault {
    /**
     * The link is down: in the isolated layout sends fail at once (no route), connections see
     * errors; bridged, the namespace is cut off and others' sends fail once ARP gives up.
     */
    DOWN,
    /** Every packet dropped silently, both ways: calls hang until their deadlines. */
    BLACKHOLE,
    /** Packets beyond a 3 ms queue at 20 Mbit/s dropped, both ways: loss under load. */
    LOSSY,
    /** A 200 kbit/s link with a queue of seconds, both ways: a delay spike. */
    SLOW
  }

  /** This namespace's address on the bridge of {@link #bridged} namespaces. */
  public static final String HOST = "10.79.255.1";

  private final String tag;
  private final int n;
  private final boolean sudo;
  private final boolean bridged;
  /** Per namespace: the u32 matches of what its link drops, leaving it and entering it. */
  private final List<List<String>> dropsOut = new ArrayList<>();
  private final List<List<String>> dropsIn = new ArrayList<>();

  /**
   * Creates {@code n} isolated namespaces (at most 250), each joined to this one by a veth pair
   * of its own.
   */
  public NetworkNamespaces(int n) throws IOException {
    this(n, false);
  }

  /**
   * Creates {@code n} namespaces (at most 250) on one bridge with this one ({@link #HOST}): they
   * reach each other and this namespace's {@code HOST} address.
   */
  public static NetworkNamespaces bridged(int n) throws IOException {
    return new NetworkNamespaces(n, true);
  }

  private NetworkNamespaces(int n, boolean bridged) throws IOException {
    if (n < 1 || n > 250) {
      throw new IllegalArgumentException("1..250 namespaces, not " + n);
    }
    this.n = n;
    this.bridged = bridged;
    this.tag = "dyn" + (ProcessHandle.current().pid() % 100_000);
    this.sudo = !"root".equals(System.getProperty("user.name"));
    removeStale();
    try {
      if (bridged) {
        run("ip", "link", "add", bridge(), "type", "bridge");
        run("ip", "addr", "add", HOST + "/16", "dev", bridge());
        run("ip", "link", "set", bridge(), "up");
      }
      for (int i = 0; i < n; i++) {
        dropsOut.add(new ArrayList<>());
        dropsIn.add(new ArrayList<>());
        run("ip", "netns", "add", name(i));
        run("ip", "link", "add", hostLink(i), "type", "veth", "peer", "name", nsLink(i));
        run("ip", "link", "set", nsLink(i), "netns", name(i));
        if (bridged) {
          run("ip", "link", "set", hostLink(i), "master", bridge());
        } else {
          run("ip", "addr", "add", "10.79." + i + ".1/30", "dev", hostLink(i));
        }
        run("ip", "link", "set", hostLink(i), "up");
        inside(i, "ip", "addr", "add", address(i) + (bridged ? "/16" : "/30"), "dev", nsLink(i));
        inside(i, "ip", "link", "set", nsLink(i), "up");
        inside(i, "ip", "link", "set", "lo", "up");
      }
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    }
  }

  private String bridge() {
    return tag + "br";
  }

  /**
   * Removes the links and namespaces a harness left when its process died before closing it (a
   * test killed at its timeout): their tag names a process that no longer runs. A stale bridge
   * would keep {@link #HOST} and route this harness's addresses to namespaces nobody serves.
   */
  private void removeStale() throws IOException {
    Pattern name = Pattern.compile("dyn(\\d+)(br|h\\d+|n\\d+)\\b");
    java.util.Set<String> stale = new java.util.TreeSet<>();
    String links = output("ip", "-o", "link", "show");
    String namespaces = output("ip", "netns", "list");
    for (String text : List.of(links, namespaces)) {
      Matcher m = name.matcher(text);
      while (m.find()) {
        long owner = Long.parseLong(m.group(1));
        boolean alive = ProcessHandle.allProcesses().anyMatch(p -> p.pid() % 100_000 == owner);
        if (!alive) {
          stale.add(m.group());
        }
      }
    }
    for (String s : stale) {
      if (s.matches("dyn\\d+n\\d+")) {
        quietly("ip", "netns", "del", s);
      } else {
        quietly("ip", "link", "del", s);
      }
    }
  }

  /** A command's output (empty when it fails). */
  private String output(String... cmd) throws IOException {
    Ran r = ran(cmd);
    return r.ok() ? r.out() : "";
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
    return launcher("{shard}");
  }

  /**
   * A command prefix that runs a process inside the namespace {@code placeholder} names: {@code
   * {shard}}, or {@code {process}} for replicated shards (a namespace per process of a group).
   */
  public List<String> launcher(String placeholder) {
    List<String> l = new ArrayList<>(sudo ? List.of("sudo", "-n") : List.of());
    l.addAll(List.of("ip", "netns", "exec", tag + "n" + placeholder));
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

  /**
   * Undoes any fault on namespace i's link, the {@link #cut}s that involve namespace i among
   * them (a cut of i from j is undone on both sides).
   */
  public void heal(int i) throws IOException {
    run("ip", "link", "set", hostLink(i), "up");
    quietly("tc", "qdisc", "del", "dev", hostLink(i), "root");
    quietly("ip", "netns", "exec", name(i), "tc", "qdisc", "del", "dev", nsLink(i), "root");
    String me = " " + address(i) + "/32";
    for (int j = 0; j < n; j++) {
      if (j != i && dropsOut.get(j).removeIf(m -> m.contains(me))) {
        installDrops(j);
      }
    }
    dropsOut.get(i).clear();
    dropsIn.get(i).clear();
  }

  /** Undoes every fault on every link. */
  public void healAll() throws IOException {
    for (int i = 0; i < n; i++) {
      heal(i);
    }
  }

  /**
   * Partitions namespaces i and j from each other (bridged): every packet between their
   * addresses dropped silently, both ways; their links to everything else stay whole.
   */
  public void cut(int i, int j) throws IOException {
    requireBridged();
    if (i == j) {
      throw new IllegalArgumentException("a namespace cannot be cut from itself (" + i + ")");
    }
    dropsOut.get(i).add("match ip dst " + address(j) + "/32");
    dropsOut.get(j).add("match ip dst " + address(i) + "/32");
    installDrops(i);
    installDrops(j);
  }

  /**
   * Partitions namespace i from this namespace's {@link #HOST} (bridged), silently both ways:
   * with {@code only}, from {@code port} there alone (e.g. etcd's client port: cut from etcd,
   * still reached by clients); without, from every port but {@code port} (cut from its clients,
   * still reaching etcd).
   */
  public void cutFromHost(int i, int port, boolean only) throws IOException {
    requireBridged();
    String out = "match ip dst " + HOST + "/32" + (only ? " match ip dport " + port + " 0xffff"
        : " NOT_PORT " + port);
    String in = "match ip src " + HOST + "/32" + (only ? " match ip sport " + port + " 0xffff"
        : " NOT_PORT " + port);
    dropsOut.get(i).add(out);
    dropsIn.get(i).add(in);
    installDrops(i);
  }

  private void requireBridged() {
    if (!bridged) {
      throw new IllegalStateException("cuts between addresses need the bridged layout"
          + " (NetworkNamespaces.bridged): isolated namespaces reach no one but this one");
    }
  }

  /**
   * Rebuilds the drops of namespace i's link: an HTB root whose default class passes everything
   * and whose class 1:2 queues nothing (its pfifo holds 0 packets), and u32 filters that send the
   * cut packets there; what leaves the namespace on its end, what enters it on this end. A
   * "NOT_PORT p" match passes port p first (filter priority 1) and drops the rest of the address.
   */
  private void installDrops(int i) throws IOException {
    quietly("ip", "netns", "exec", name(i), "tc", "qdisc", "del", "dev", nsLink(i), "root");
    quietly("tc", "qdisc", "del", "dev", hostLink(i), "root");
    if (!dropsOut.get(i).isEmpty()) {
      List<String> prefix = new ArrayList<>(List.of("ip", "netns", "exec", name(i)));
      dropClasses(prefix, nsLink(i), dropsOut.get(i), "dport");
    }
    if (!dropsIn.get(i).isEmpty()) {
      dropClasses(new ArrayList<>(), hostLink(i), dropsIn.get(i), "sport");
    }
  }

  private void dropClasses(List<String> prefix, String dev, List<String> matches, String portField)
      throws IOException {
    run(cmd(prefix, "tc qdisc add dev " + dev + " root handle 1: htb default 1"));
    run(cmd(prefix, "tc class add dev " + dev + " parent 1: classid 1:1 htb rate 10gbit"));
    run(cmd(prefix, "tc class add dev " + dev + " parent 1: classid 1:2 htb rate 8bit ceil 8bit"));
    run(cmd(prefix, "tc qdisc add dev " + dev + " parent 1:2 handle 20: pfifo limit 0"));
    for (String m : matches) {
      int not = m.indexOf(" NOT_PORT ");
      String filter = "tc filter add dev " + dev + " parent 1: protocol ip prio ";
      if (not >= 0) {
        String addr = m.substring(0, not);
        String port = m.substring(not + " NOT_PORT ".length());
        run(cmd(prefix, filter + "1 u32 " + addr + " match ip " + portField + " " + port
            + " 0xffff flowid 1:1"));
        run(cmd(prefix, filter + "2 u32 " + addr + " flowid 1:2"));
      } else {
        run(cmd(prefix, filter + "2 u32 " + m + " flowid 1:2"));
      }
    }
  }

  private static String[] cmd(List<String> prefix, String line) {
    List<String> c = new ArrayList<>(prefix);
    c.addAll(Arrays.asList(line.split(" ")));
    return c.toArray(String[]::new);
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
    Ran r = ran(cmd);
    return r.ok() ? null : r.out().trim();
  }

  /** What a command said, and whether it succeeded within 30 s. */
  private record Ran(boolean ok, String out) {}

  private Ran ran(String... cmd) throws IOException {
    List<String> c = new ArrayList<>(sudo ? List.of("sudo", "-n") : List.of());
    c.addAll(Arrays.asList(cmd));
    Process p = new ProcessBuilder(c).redirectErrorStream(true).start();
    try {
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(30, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return new Ran(false, "timed out");
      }
      return new Ran(p.exitValue() == 0, out);
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
    if (bridged) {
      quietly("ip", "link", "del", bridge());
    }
  }
}
