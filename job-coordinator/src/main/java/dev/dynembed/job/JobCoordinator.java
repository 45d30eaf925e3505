package dev.dynembed.job;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KV;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.lease.LeaseKeepAliveResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.support.CloseableClient;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One worker's membership of a multi-worker job, kept in etcd (docs/design/0013-many-trainers.md).
 *
 * <p>{@link #join} registers the worker under a lease that this process keeps alive, gives it the
 * lowest free index in {@code 0..W-1}, checks that its settings equal the job's (the first
 * worker's), and returns once all W workers have joined. From then on a monitor thread watches the
 * members: a worker whose lease expires (killed, crashed, cut off for longer than the lease's TTL)
 * stops the job, and every other worker learns why from {@link #failure()} or from the next
 * {@link #barrier}, which throws. Barriers exchange one payload per worker and fail after a
 * deadline, naming the workers that did not arrive.
 *
 * <p>Keys live under {@code /dynembed/jobs/JOB/G/}, where G is the job's generation: a run that
 * stopped (a worker left, a barrier timed out) or finished is closed, and the next worker to join
 * starts generation G+1 on a clean prefix. A running generation takes no new workers.
 */
public final class JobCoordinator implements AutoCloseable {
  private static final java.util.logging.Logger log =
      java.util.logging.Logger.getLogger(JobCoordinator.class.getName());

  /**
   * @param leaseTtl how long a silent worker stays a member (its process renews the lease every
   *     third of it)
   * @param joinTimeout how long {@link #join} waits for all W workers
   * @param barrierTimeout how long a barrier waits for its last worker
   */
  public record Options(Duration leaseTtl, Duration joinTimeout, Duration barrierTimeout,
      boolean elastic) {
    public Options {
      if (leaseTtl.getSeconds() < 1) {
        throw new IllegalArgumentException("the lease TTL must be at least 1 s but was "
            + leaseTtl);
      }
    }

    /** A job that stops when a worker leaves (not elastic). */
    public Options(Duration leaseTtl, Duration joinTimeout, Duration barrierTimeout) {
      this(leaseTtl, joinTimeout, barrierTimeout, false);
    }
  }

  private static final String ROOT = "/dynembed/jobs/";
  private static final long MONITOR_MS = 500;

  private final Client client;
  private final KV kv;
  private final String job;
  private final String prefix;
  private final int workers;
  private final int index;
  private final long lease;
  private final CloseableClient keepAlive;
  private final Options options;
  private volatile Map<Integer, Long> memberRevisions = Map.of();
  /**
   * The workers expected at the next barrier: all W in a job that is not elastic; in an elastic
   * one, those that arrived at the previous barrier (the same set for every worker: see {@link
   * #elasticBarrier}).
   */
  private volatile java.util.SortedSet<Integer> participants;
  /** Elastic: the workers that left since the job started, by index, with why. */
  private final Map<Integer, String> departed = new TreeMap<>();
  /** Elastic: this worker's own lease ran out and the others went on without it. */
  private volatile boolean dropped;
  /** Elastic: this worker joined a running job and waits to be admitted ({@link #awaitAdmission}). */
  private volatile boolean joining;
  /** The most worker indices a job hands out (its W, then those of workers that join it). */
  static final int MAX_INDEX = 4096;
  private volatile String failure;
  private volatile boolean closed;
  private String previousBarrier;
  private Thread monitor;

  private JobCoordinator(Client client, String job, String prefix, int workers, int index,
      long lease, CloseableClient keepAlive, Options options) {
    this.client = client;
    this.kv = client.getKVClient();
    this.job = job;
    this.prefix = prefix;
    this.workers = workers;
    this.index = index;
    this.lease = lease;
    this.keepAlive = keepAlive;
    this.options = options;
    java.util.TreeSet<Integer> all = new java.util.TreeSet<>();
    for (int i = 0; i < workers; i++) {
      all.add(i);
    }
    this.participants = java.util.Collections.unmodifiableSortedSet(all);
  }

  /**
   * Joins job {@code job} of {@code workers} workers through the etcd cluster at {@code
   * endpoints} ({@code host:port,...}) and waits for the others.
   *
   * @param settings what every worker of the job must agree on (model settings, corpus); the
   *     first worker's become the job's, and a worker with different ones is refused, with the
   *     differences named
   */
  public static JobCoordinator join(String endpoints, String job, int workers,
      Map<String, String> settings, Options options) {
    return join(endpoints, job, workers, -1, settings, options);
  }

  /**
   * As above, as worker {@code index} ({@code -1}: the lowest free index). A fixed index is how a
   * restarted job gives the leader's role (and its checkpoint) back to the same worker, and how
   * Kubernetes' indexed Jobs and StatefulSet ordinals map to workers.
   */
  public static JobCoordinator join(String endpoints, String job, int workers, int index,
      Map<String, String> settings, Options options) {
    if (index < -1 || index >= workers) {
      throw new JobException("worker index (--worker-index) must be in 0.." + (workers - 1)
          + " but was " + index);
    }
    if (workers < 1 || workers > 1024) {
      throw new JobException("the number of workers (--workers) must be in 1..1024 but was "
          + workers);
    }
    if (job.isEmpty() || !job.matches("[A-Za-z0-9._-]+")) {
      throw new JobException("job name (--job) must be letters, digits, '.', '_' or '-' but was '"
          + job + "'");
    }
    Client client = Client.builder().endpoints(parseEndpoints(endpoints))
        .connectTimeout(Duration.ofSeconds(5)).build();
    long lease = 0;
    CloseableClient keepAlive = null;
    try {
      lease = await(client.getLeaseClient().grant(options.leaseTtl().getSeconds()),
          "granting a lease on etcd at " + endpoints).getID();
      keepAlive = client.getLeaseClient().keepAlive(lease, keepAliveLog(job, lease));
      Map<String, String> wanted = new TreeMap<>(settings);
      wanted.put("workers", String.valueOf(workers));
      wanted.put("elastic", String.valueOf(options.elastic()));
      Joining joining = new Joining(client, job, workers, index, lease, keepAlive, options,
          wanted);
      while (true) {
        JobCoordinator c = joining.attempt();
        if (c != null) {
          return c;
        }
      }
    } catch (RuntimeException e) {
      if (keepAlive != null) {
        keepAlive.close();
      }
      if (lease != 0) {
        try {
          client.getLeaseClient().revoke(lease).get(5, TimeUnit.SECONDS);
        } catch (Exception ignored) {
          // the lease expires by itself
        }
      }
      client.close();
      throw e;
    }
  }

  /**
   * A worker's way into a job: each attempt reads the job's current generation and either opens
   * the next one (the current one is over), joins it running (elastic), waits for it to end, or
   * claims an index to start it with the others. An attempt returns null to be made again.
   */
  private static final class Joining {
    private final Client client;
    private final KV kv;
    private final String job;
    private final int workers;
    private final int index;
    private final long lease;
    private final CloseableClient keepAlive;
    private final Options options;
    private final Map<String, String> wanted;
    private final long deadline;
    private final String root;
    /** Since when this worker has seen the job running without it (0: not yet). */
    private long runningSince;

    Joining(Client client, String job, int workers, int index, long lease,
        CloseableClient keepAlive, Options options, Map<String, String> wanted) {
      this.client = client;
      this.kv = client.getKVClient();
      this.job = job;
      this.workers = workers;
      this.index = index;
      this.lease = lease;
      this.keepAlive = keepAlive;
      this.options = options;
      this.wanted = wanted;
      this.deadline = System.nanoTime() + options.joinTimeout().toNanos();
      this.root = ROOT + job + "/";
    }

    JobCoordinator attempt() {
      long gen = generation(kv, root);
      String prefix = root + gen + "/";
      boolean started = exists(kv, prefix + "started");
      boolean stopped = exists(kv, prefix + "stop");
      long live = count(kv, prefix + "members/");
      long left = count(kv, prefix + "left/");
      if (stopped || left > 0 || (started && live == 0)) {
        // the generation is over: open the next one on a clean prefix
        ByteSequence g = bytes(root + "gen");
        await(kv.txn().If(new Cmp(g, Cmp.Op.EQUAL, CmpTarget.value(bytes(String.valueOf(gen)))))
            .Then(Op.put(g, bytes(String.valueOf(gen + 1)), PutOption.DEFAULT),
                Op.delete(bytes(prefix), DeleteOption.builder().isPrefix(true).build()))
            .commit(), "opening the job's next generation");
        return null;
      }
      // the state above was read key by key: another worker may have opened the next generation
      // meanwhile (and deleted this one's prefix), so every write below holds only while the
      // generation is still this one; otherwise look again
      Cmp current = new Cmp(bytes(root + "gen"), Cmp.Op.EQUAL,
          CmpTarget.value(bytes(String.valueOf(gen))));
      if (started && options.elastic() && live > 0) {
        return joinRunning(prefix, current);
      }
      if (started) {
        // a worker may have died without the survivors noticing yet (they stop the
        // generation within a lease TTL); otherwise the job is running with its workers
        if (runningFor() > options.leaseTtl().toNanos() + 3_000_000_000L) {
          throw new JobException("job " + job + " is running with all of its " + workers
              + " workers; wait for it to end or stop it, or choose another job name (--job)");
        }
        sleep(200);
        return null;
      }
      return startWithTheOthers(prefix, current);
    }

    private long runningFor() {
      if (runningSince == 0) {
        runningSince = System.nanoTime();
      }
      return System.nanoTime() - runningSince;
    }

    /**
     * A running elastic job takes new workers at the end of a round: claim an index past the W
     * it started with, then wait to be admitted ({@link #awaitAdmission}).
     */
    private JobCoordinator joinRunning(String prefix, Cmp current) {
      if (!checkSettings(kv, prefix, job, wanted, current)) {
        return null;
      }
      // a worker restarted with its own index (--worker-index: a pod's index) takes it back if
      // no live worker holds it, and continues its counters once admitted
      int claimed = index >= 0 ? claimRejoin(kv, prefix, index, lease, current)
          : claimJoiner(kv, prefix, workers, lease, current);
      if (claimed == GENERATION_MOVED) {
        return null;
      }
      if (claimed < 0 && index >= 0
          && runningFor() < options.leaseTtl().toNanos() + 3_000_000_000L) {
        // the earlier process of this index may be dead with its lease still running
        sleep(200);
        return null;
      }
      if (claimed < 0) {
        throw new JobException(index >= 0 ? "job " + job + " already has a live worker "
            + index : "job " + job + " has taken " + MAX_INDEX + " worker indices; it"
            + " takes no more");
      }
      JobCoordinator c = new JobCoordinator(client, job, prefix, workers, claimed, lease,
          keepAlive, options);
      List<KeyValue> me = await(kv.get(bytes(prefix + "members/" + claimed)),
          "reading this worker's membership").getKvs();
      if (me.isEmpty()) {
        return null; // its lease ran out already: try again
      }
      c.memberRevisions = Map.of(claimed, me.get(0).getCreateRevision());
      c.participants = java.util.Collections.emptySortedSet();
      c.joining = true;
      c.startMonitor();
      return c;
    }

    /** A job not started yet: claim an index, then start it with the others at a barrier. */
    private JobCoordinator startWithTheOthers(String prefix, Cmp current) {
      if (!checkSettings(kv, prefix, job, wanted, current)) {
        return null;
      }
      int claimed = claimIndex(kv, prefix, workers, index, lease, current);
      if (claimed == GENERATION_MOVED) {
        return null;
      }
      if (claimed < 0 && options.elastic() && index < 0 && System.nanoTime() < deadline) {
        sleep(200); // its W workers are starting it: join once it runs
        return null;
      }
      if (claimed < 0) {
        throw new JobException(index >= 0 ? "job " + job + " already has a worker " + index
            : "job " + job + " already has its " + workers + " workers (indices 0.."
            + (workers - 1) + " are taken)");
      }
      JobCoordinator c = new JobCoordinator(client, job, prefix, workers, claimed, lease,
          keepAlive, options);
      c.barrierUntil("start", "", Math.max(0, deadline - System.nanoTime()), true);
      await(kv.put(bytes(prefix + "started"), bytes("1")), "marking the job started");
      GetResponse members = await(kv.get(bytes(prefix + "members/"),
          GetOption.builder().isPrefix(true).build()), "reading the job's members");
      Map<Integer, Long> revs = new HashMap<>();
      for (KeyValue m : members.getKvs()) {
        revs.put(memberIndex(m, prefix), m.getCreateRevision());
      }
      c.memberRevisions = revs;
      c.startMonitor();
      return c;
    }
  }

  /** This worker's index in {@code 0..workers()-1}; worker 0 leads (checkpoints, restores). */
  public int index() {
    return index;
  }

  /** The workers the job started with. */
  public int workers() {
    return workers;
  }

  /** Whether a worker that leaves has its share re-planned over the others (else it stops the job). */
  public boolean elastic() {
    return options.elastic();
  }

  /**
   * The workers of the next round, in index order: all of them, or in an elastic job those that
   * arrived at the last barrier. Every worker of the job sees the same list between barriers.
   */
  public List<Integer> participants() {
    return List.copyOf(participants);
  }

  /** Elastic: the workers that left the job so far, with why. */
  public Map<Integer, String> departed() {
    synchronized (departed) {
      return new TreeMap<>(departed);
    }
  }

  /**
   * Whether this worker leads: checkpoints and restores. Worker 0, or in an elastic job that lost
   * worker 0, the lowest index still in it.
   */
  public boolean leader() {
    return !participants.isEmpty() && participants.first() == index;
  }

  /**
   * Whether this worker joined an elastic job that was already running: it must {@link
   * #awaitAdmission} before it trains, and it neither restores nor counts.
   */
  public boolean joining() {
    return joining;
  }

  /**
   * Waits until the job's leader admits this joining worker at the end of a round, and returns
   * the state the leader handed it (the trainer's position and counters). From then on this
   * worker is a participant like the others. Throws if the job stops or no round ends within the
   * barrier timeout.
   */
  public Map<String, String> awaitAdmission() {
    if (!joining) {
      throw new IllegalStateException("worker " + index + " did not join a running job");
    }
    String key = prefix + "admitted/" + index;
    long start = System.nanoTime();
    long sleep = 5;
    while (true) {
      check();
      Optional<String> v = value(kv, key);
      if (v.isPresent()) {
        Map<String, String> state = decode(v.get());
        String name = state.get("barrier");
        Map<Integer, Long> before = parseRevisions(state.get("participants"));
        // the barrier at which the leader admits it, seen as its participants see it: the
        // admission holds only if the leader arrived there with it (else it left first)
        Map<Integer, Long> revs = new HashMap<>(before);
        revs.putAll(memberRevisions);
        Map<Integer, String> in = awaitArrivals(name, new java.util.TreeSet<>(before.keySet()),
            revs, start, true);
        await(kv.delete(bytes(key)), "reading this worker's admission");
        if (admittedIn(in).containsKey(index)) {
          memberRevisions = Map.copyOf(revs);
          advance(in, true);
          previousBarrier = name;
          joining = false;
          return state;
        }
        continue; // the leader left before it arrived: wait for the next round's
      }
      if (ended()) {
        failure = notAdmitted();
        throw new JobException(failure);
      }
      if (System.nanoTime() - start > options.barrierTimeout().toNanos()) {
        throw new JobException("job " + job + " did not admit worker " + index + " within "
            + options.barrierTimeout().toSeconds() + " s (no round ended)");
      }
      sleep(sleep);
      sleep = Math.min(100, sleep * 2);
    }
  }

  /** Why the job stopped, if it did (a worker left, a barrier timed out, a worker failed). */
  public Optional<String> failure() {
    return Optional.ofNullable(failure);
  }

  /** Throws if the job stopped. */
  public void check() {
    String f = failure;
    if (f != null) {
      throw new JobException(dropped ? f : "job " + job + " stopped: " + f);
    }
  }

  /**
   * Waits until every worker has called {@code barrier(name, ...)}, and returns their payloads by
   * worker index. Throws (and stops the job) if a worker leaves meanwhile or the last one does not
   * arrive within the barrier timeout. Names must be unique within a job's run.
   */
  public Map<Integer, String> barrier(String name, String payload) {
    return barrier(name, payload, null);
  }

  /**
   * As above; in an elastic job, also the barrier where workers that joined the running job are
   * admitted: the leader hands each of them {@code admission}'s state (the position after the
   * barrier) and names them in its payload, and every worker counts them as participants from
   * the next barrier on. Payloads of such a barrier carry an {@code admit} entry (encoded maps).
   */
  public Map<Integer, String> barrier(String name, String payload,
      java.util.function.Supplier<Map<String, String>> admission) {
    if (joining) {
      throw new IllegalStateException("worker " + index + " must await its admission first");
    }
    Map<Integer, String> all = options.elastic() ? elasticBarrier(name, payload, admission)
        : barrierUntil(name, payload, options.barrierTimeout().toNanos(), false);
    if (leader() && previousBarrier != null) {
      // every worker arrived here, so every worker has passed the previous barrier
      try {
        await(kv.delete(bytes(prefix + "barriers/" + previousBarrier + "/"),
            DeleteOption.builder().isPrefix(true).build()), "clearing barrier " + previousBarrier);
      } catch (JobException ignored) {
        // a leftover is harmless: the generation's prefix goes at its end
      }
    }
    previousBarrier = name;
    return all;
  }

  private Map<Integer, String> barrierUntil(String name, String payload, long timeoutNanos,
      boolean joining) {
    checkBarrierName(name);
    check();
    String dir = prefix + "barriers/" + name + "/";
    await(kv.put(bytes(dir + index), bytes(payload)), "arriving at barrier " + name);
    long start = System.nanoTime();
    long sleep = 5;
    while (true) {
      GetResponse r = await(kv.get(bytes(dir), GetOption.builder().isPrefix(true).build()),
          "waiting at barrier " + name);
      if (r.getKvs().size() >= workers) {
        Map<Integer, String> all = new TreeMap<>();
        for (KeyValue k : r.getKvs()) {
          all.put(Integer.parseInt(k.getKey().toString(StandardCharsets.UTF_8)
              .substring(dir.length())), k.getValue().toString(StandardCharsets.UTF_8));
        }
        return all;
      }
      check();
      if (joining && !exists(kv, prefix + "members/" + index)) {
        throw new JobException("job " + job + " was reset while this worker waited to start");
      }
      if (System.nanoTime() - start > timeoutNanos) {
        List<Integer> missing = new ArrayList<>();
        for (int i = 0; i < workers; i++) {
          boolean in = false;
          for (KeyValue k : r.getKvs()) {
            in |= k.getKey().toString(StandardCharsets.UTF_8).equals(dir + i);
          }
          if (!in) {
            missing.add(i);
          }
        }
        String why = (joining ? "workers " + missing + " did not join" : "workers " + missing
            + " did not reach barrier " + name) + " within "
            + Duration.ofNanos(timeoutNanos).toSeconds() + " s";
        stop(why);
        throw new JobException("job " + job + " stopped: " + why);
      }
      sleep(sleep);
      sleep = Math.min(100, sleep * 2);
    }
  }

  /**
   * An elastic job's barrier: waits until every participant has arrived or left the job (its
   * lease expired before it arrived), and returns the payloads of those that arrived, which are
   * the participants of the next barrier. Every worker computes the same set: each poll reads the
   * members and the arrivals in one etcd transaction (one revision), a worker still a member is
   * waited for, and one that is not can no longer arrive (an arrival is written only while its
   * writer's member key is the one it created), so a worker missing from a complete poll is
   * missing from every worker's. Throws if this worker itself was dropped (its lease ran out):
   * the others have re-planned its share.
   */
  private Map<Integer, String> elasticBarrier(String name, String payload,
      java.util.function.Supplier<Map<String, String>> admission) {
    checkBarrierName(name);
    check();
    String dir = prefix + "barriers/" + name + "/";
    if (admission != null && leader()) {
      Map<Integer, Long> joiners = waitingJoiners();
      if (!joiners.isEmpty()) {
        Map<String, String> state = new TreeMap<>(admission.get());
        state.put("barrier", name);
        state.put("participants", revisions(participants, memberRevisions));
        state.put("admit", revisions(joiners.keySet(), joiners));
        for (int j : joiners.keySet()) {
          await(kv.put(bytes(prefix + "admitted/" + j), bytes(encode(state))), "admitting a worker");
        }
        Map<String, String> p = new TreeMap<>(decode(payload));
        p.put("admit", state.get("admit"));
        payload = encode(p);
      }
    }
    ByteSequence me = bytes(prefix + "members/" + index);
    boolean arrived = await(kv.txn().If(new Cmp(me, Cmp.Op.EQUAL,
            CmpTarget.createRevision(memberRevisions.getOrDefault(index, -1L))))
        .Then(Op.put(bytes(dir + index), bytes(payload), PutOption.DEFAULT)).commit(),
        "arriving at barrier " + name).isSucceeded();
    if (!arrived) {
      throw droppedNow();
    }
    Map<Integer, String> in = awaitArrivals(name, participants, memberRevisions,
        System.nanoTime(), false);
    for (int p : participants) {
      if (!in.containsKey(p)) {
        synchronized (departed) {
          departed.put(p, "its lease expired before barrier " + name + " (killed, crashed"
              + " or cut off from etcd for more than " + options.leaseTtl().toSeconds()
              + " s)");
        }
      }
    }
    advance(in, admission != null);
    return in;
  }

  /**
   * The participants after a barrier, computed alike by every worker that saw it complete (and
   * by a joiner watching the barrier that admits it): those that arrived, plus, at a barrier
   * that admits, the workers the leader's payload names, whose member revisions are kept.
   */
  private void advance(Map<Integer, String> arrived, boolean admits) {
    java.util.TreeSet<Integer> next = new java.util.TreeSet<>(arrived.keySet());
    if (admits) {
      Map<Integer, Long> admitted = admittedIn(arrived);
      Map<Integer, Long> revs = new HashMap<>(memberRevisions);
      revs.putAll(admitted);
      memberRevisions = Map.copyOf(revs);
      next.addAll(admitted.keySet());
    }
    participants = java.util.Collections.unmodifiableSortedSet(next);
  }

  private static void checkBarrierName(String name) {
    if (name.isEmpty() || name.contains("/")) {
      throw new IllegalArgumentException("barrier name must be non-empty and free of '/': " + name);
    }
  }

  /**
   * Deals items {@code 0..count-1} over the participants (item k of a pass to participant k mod
   * P), runs {@code work} on this worker's share, then barrier {@code name} (pass p > 0: {@code
   * name-p}); the items of participants that did not arrive are dealt again over those that
   * did, until every item was worked by a worker that arrived. With all W workers in the job
   * that is one pass: item k to worker k mod W. Returns how many items were dealt again.
   */
  public int dealOut(String name, int count, java.util.function.Consumer<List<Integer>> work) {
    List<Integer> pending = new ArrayList<>();
    for (int k = 0; k < count; k++) {
      pending.add(k);
    }
    int again = 0;
    for (int pass = 0; !pending.isEmpty(); pass++) {
      List<Integer> in = participants();
      List<Integer> mine = new ArrayList<>();
      for (int k = 0; k < pending.size(); k++) {
        if (in.get(k % in.size()) == index) {
          mine.add(pending.get(k));
        }
      }
      work.accept(mine);
      java.util.Set<Integer> arrived = barrier(pass == 0 ? name : name + "-" + pass, "")
          .keySet();
      List<Integer> lost = new ArrayList<>();
      for (int k = 0; k < pending.size(); k++) {
        if (!arrived.contains(in.get(k % in.size()))) {
          lost.add(pending.get(k));
        }
      }
      again += lost.size();
      pending = lost;
    }
    return again;
  }

  /**
   * Polls barrier {@code name} until each of {@code expected} has arrived or left (its member key
   * gone or re-created: no longer the revision in {@code revisions}), and returns the arrivals
   * among them. Each poll reads members and arrivals in one transaction (one revision): a
   * worker still a member is waited for, and one that is not can no longer arrive (an arrival is
   * written only while its writer's member key is the one it created), so every worker that
   * completes the poll sees the same arrivals.
   */
  private Map<Integer, String> awaitArrivals(String name, java.util.SortedSet<Integer> expected,
      Map<Integer, Long> revisions, long start, boolean observer) {
    String dir = prefix + "barriers/" + name + "/";
    long sleep = 5;
    GetOption all = GetOption.builder().isPrefix(true).build();
    while (true) {
      io.etcd.jetcd.kv.TxnResponse t = await(kv.txn().Then(
          Op.get(bytes(prefix + "members/"), all), Op.get(bytes(dir), all)).commit(),
          "waiting at barrier " + name);
      Map<Integer, Long> live = new HashMap<>();
      for (KeyValue m : t.getGetResponses().get(0).getKvs()) {
        live.put(memberIndex(m, prefix), m.getCreateRevision());
      }
      Map<Integer, String> in = new TreeMap<>();
      for (KeyValue k : t.getGetResponses().get(1).getKvs()) {
        int i = Integer.parseInt(k.getKey().toString(StandardCharsets.UTF_8)
            .substring(dir.length()));
        if (expected.contains(i)) {
          in.put(i, k.getValue().toString(StandardCharsets.UTF_8));
        }
      }
      List<Integer> waiting = new ArrayList<>();
      for (int p : expected) {
        if (!in.containsKey(p) && revisions.get(p).equals(live.get(p))) {
          waiting.add(p);
        }
      }
      if (waiting.isEmpty()) {
        return in;
      }
      check();
      if (System.nanoTime() - start > options.barrierTimeout().toNanos()) {
        String why = "workers " + waiting + " did not reach barrier " + name + " within "
            + options.barrierTimeout().toSeconds() + " s (and are still members)";
        if (observer) { // a joiner watching the barrier that admits it: not its job to stop
          throw new JobException("worker " + index + " could not join job " + job + ": " + why);
        }
        stop(why);
        throw new JobException("job " + job + " stopped: " + why);
      }
      sleep(sleep);
      sleep = Math.min(100, sleep * 2);
    }
  }

  /** Members that joined the running job and are not participants yet, with their revisions. */
  private Map<Integer, Long> waitingJoiners() {
    GetResponse members = await(kv.get(bytes(prefix + "members/"),
        GetOption.builder().isPrefix(true).build()), "reading the job's members");
    Map<Integer, Long> joiners = new TreeMap<>();
    for (KeyValue m : members.getKvs()) {
      int i = memberIndex(m, prefix);
      if (!participants.contains(i)) { // a new index, or one that left and came back
        joiners.put(i, m.getCreateRevision());
      }
    }
    return joiners;
  }

  /** The workers admitted at a barrier: the {@code admit} entries of its payloads. */
  private static Map<Integer, Long> admittedIn(Map<Integer, String> payloads) {
    Map<Integer, Long> admitted = new TreeMap<>();
    for (String p : payloads.values()) {
      String a = p.contains("admit=") ? decode(p).get("admit") : null;
      if (a != null) {
        admitted.putAll(parseRevisions(a));
      }
    }
    return admitted;
  }

  /** {@code index:revision,...} of these workers. */
  private static String revisions(java.util.Set<Integer> indices, Map<Integer, Long> revs) {
    StringBuilder b = new StringBuilder();
    for (int i : indices) {
      b.append(b.length() == 0 ? "" : ",").append(i).append(':').append(revs.get(i));
    }
    return b.toString();
  }

  private static Map<Integer, Long> parseRevisions(String s) {
    Map<Integer, Long> m = new TreeMap<>();
    for (String e : s == null || s.isEmpty() ? new String[0] : s.split(",")) {
      int c = e.indexOf(':');
      m.put(Integer.parseInt(e.substring(0, c)), Long.parseLong(e.substring(c + 1)));
    }
    return m;
  }

  /** Whether this generation of the job is over: a worker finished, or its keys are gone. */
  private boolean ended() {
    return count(kv, prefix + "left/") > 0 || !exists(kv, prefix + "config");
  }

  private String notAdmitted() {
    dropped = true; // nothing of this worker to stop: the job ended without it
    return "job " + job + " ended before it admitted worker " + index + " (a job admits workers"
        + " at the end of a round, not after its last)";
  }

  /** Marks this worker as dropped from its elastic job and says so. */
  private JobException droppedNow() {
    dropped = true;
    failure = "worker " + index + " was dropped from job " + job + ": its lease expired (paused"
        + " or cut off from etcd for more than " + options.leaseTtl().toSeconds() + " s) and the"
        + " other workers took over its share";
    return new JobException(failure);
  }

  /** Stops the job for every worker, with a reason they will report (the first reason wins). */
  public void stop(String reason) {
    if (dropped) {
      return; // the job goes on without this worker: nothing of it to stop
    }
    if (failure == null) {
      failure = reason;
    }
    ByteSequence k = bytes(prefix + "stop");
    try {
      await(kv.txn().If(new Cmp(k, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
          .Then(Op.put(k, bytes(reason), PutOption.DEFAULT)).commit(), "stopping the job");
    } catch (JobException ignored) {
      // etcd unreachable: the others learn of it through this worker's lease
    }
  }

  /**
   * Stops the job because this worker failed ({@code worker I failed: message}); the others
   * report it. A job already stopped keeps its first reason.
   */
  public void fail(Exception e) {
    stop("worker " + index + " failed: " + e.getMessage());
  }

  /** Leaves a job whose work is done: after the last worker leaves, the generation is cleared. */
  public void finish() {
    await(kv.put(bytes(prefix + "left/" + index), bytes("1")), "leaving the job");
    // every worker still in the job finishes (the last barrier's participants: the same set for
    // all of them); workers that left an elastic job never write left/
    if (count(kv, prefix + "left/") >= participants.size()) {
      await(kv.delete(bytes(prefix), DeleteOption.builder().isPrefix(true).build()),
          "clearing the finished job");
    }
    close();
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    if (monitor != null) {
      monitor.interrupt();
    }
    keepAlive.close();
    try {
      client.getLeaseClient().revoke(lease).get(5, TimeUnit.SECONDS);
    } catch (Exception ignored) {
      // it expires by itself
    }
    client.close();
  }

  /**
   * Tests: lose this worker's lease while the process lives on (as a long pause or a partition
   * from etcd would), keeping its etcd client.
   */
  void loseLease() {
    keepAlive.close();
    await(client.getLeaseClient().revoke(lease), "revoking the lease");
  }

  /** Tests: vanish as a killed process would (no revoke, no leaving; the lease runs out). */
  void abandon() {
    closed = true;
    if (monitor != null) {
      monitor.interrupt();
    }
    keepAlive.close();
    client.close();
  }

  private void startMonitor() {
    monitor = new Thread(() -> {
      while (!closed && failure == null) {
        try {
          Thread.sleep(MONITOR_MS);
          watchOnce();
        } catch (InterruptedException e) {
          return;
        } catch (RuntimeException e) {
          // etcd unreachable for a moment: the lease (TTL) decides, not one failed poll
        }
      }
    }, "job-monitor-" + job);
    monitor.setDaemon(true);
    monitor.start();
  }

  /** One look at the job: a stop key, or a member gone (or replaced) that did not leave. */
  private void watchOnce() {
    Optional<String> stop = value(kv, prefix + "stop");
    if (stop.isPresent()) {
      failure = stop.get();
      return;
    }
    GetResponse members = await(kv.get(bytes(prefix + "members/"),
        GetOption.builder().isPrefix(true).build()), "watching the job's members");
    Map<Integer, Long> now = new HashMap<>();
    for (KeyValue m : members.getKvs()) {
      now.put(memberIndex(m, prefix), m.getCreateRevision());
    }
    if (options.elastic()) {
      // the others are counted at the barriers; only this worker's own expiry matters here
      if (joining && ended()) {
        failure = notAdmitted();
      } else if (!memberRevisions.get(index).equals(now.get(index))) {
        droppedNow();
      }
      return;
    }
    for (Map.Entry<Integer, Long> e : memberRevisions.entrySet()) {
      if (!e.getValue().equals(now.get(e.getKey()))
          && !exists(kv, prefix + "left/" + e.getKey())) {
        stop("worker " + e.getKey() + " left the job: its lease expired (killed, crashed or cut"
            + " off from etcd for more than " + options.leaseTtl().toSeconds() + " s)");
        return;
      }
    }
  }

  private static long generation(KV kv, String root) {
    ByteSequence g = bytes(root + "gen");
    Optional<String> v = value(kv, root + "gen");
    if (v.isPresent()) {
      return Long.parseLong(v.get());
    }
    await(kv.txn().If(new Cmp(g, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
        .Then(Op.put(g, bytes("1"), PutOption.DEFAULT)).commit(), "creating the job");
    return Long.parseLong(value(kv, root + "gen").orElseThrow());
  }

  /**
   * Writes this worker's settings as the generation's if it has none, and refuses settings that
   * differ from the generation's; false if the generation is no longer {@code current}.
   */
  static boolean checkSettings(KV kv, String prefix, String job,
      Map<String, String> wanted, Cmp current) {
    ByteSequence k = bytes(prefix + "config");
    await(kv.txn().If(new Cmp(k, Cmp.Op.EQUAL, CmpTarget.createRevision(0)), current)
        .Then(Op.put(k, bytes(encode(wanted)), PutOption.DEFAULT)).commit(), "writing the job's settings");
    Optional<String> config = value(kv, prefix + "config");
    if (config.isEmpty()) { // the next generation deleted this one's prefix
      return false;
    }
    Map<String, String> theirs = decode(config.get());
    if (!theirs.equals(wanted)) {
      Map<String, String> diff = new TreeMap<>();
      for (String key : new java.util.TreeSet<>(union(theirs, wanted))) {
        String a = theirs.get(key);
        String b = wanted.get(key);
        if (a == null ? b != null : !a.equals(b)) {
          diff.put(key, "job has " + a + ", this worker " + b);
        }
      }
      throw new JobException("this worker's settings differ from job " + job + "'s: " + diff
          + "; start every worker with the same settings and files");
    }
    return true;
  }

  private static List<String> union(Map<String, String> a, Map<String, String> b) {
    List<String> keys = new ArrayList<>(a.keySet());
    keys.addAll(b.keySet());
    return keys;
  }

  /** {@link #claimIndex}'s answer when the generation is no longer the one the claim was for. */
  static final int GENERATION_MOVED = -2;

  /**
   * Claims index {@code wanted} (or, if negative, the first free one) in the generation under
   * {@code prefix} while it is {@code current}: the index, -1 if none is free, or {@link
   * #GENERATION_MOVED}.
   */
  static int claimIndex(KV kv, String prefix, int workers, int wanted, long lease,
      Cmp current) {
    for (int i = Math.max(0, wanted); i < (wanted >= 0 ? wanted + 1 : workers); i++) {
      ByteSequence k = bytes(prefix + "members/" + i);
      boolean won = await(kv.txn().If(new Cmp(k, Cmp.Op.EQUAL, CmpTarget.createRevision(0)),
          current).Then(Op.put(k, bytes(String.valueOf(ProcessHandle.current().pid())),
              PutOption.builder().withLeaseId(lease).build())).commit(), "claiming a worker index")
          .isSucceeded();
      if (won) {
        return i;
      }
    }
    // every claim failed: the indices are taken, or the generation moved on (then all fail)
    boolean stillCurrent = await(kv.txn().If(current).commit(), "reading the generation")
        .isSucceeded();
    return stillCurrent ? -1 : GENERATION_MOVED;
  }

  /**
   * Claims the first index from {@code workers} on that no worker of this generation has held
   * (a permanent {@code claimed/I} key, so that a joiner never takes the index, and so the
   * counters, of a worker that left), with its member key under {@code lease}.
   */
  static int claimJoiner(KV kv, String prefix, int workers, long lease, Cmp current) {
    for (int i = workers; i < MAX_INDEX; i++) {
      ByteSequence c = bytes(prefix + "claimed/" + i);
      ByteSequence k = bytes(prefix + "members/" + i);
      boolean won = await(kv.txn().If(new Cmp(c, Cmp.Op.EQUAL, CmpTarget.createRevision(0)),
          current).Then(Op.put(c, bytes("1"), PutOption.DEFAULT),
              Op.put(k, bytes(String.valueOf(ProcessHandle.current().pid())),
                  PutOption.builder().withLeaseId(lease).build())).commit(),
          "claiming a worker index").isSucceeded();
      if (won) {
        return i;
      }
      boolean stillCurrent = await(kv.txn().If(current).commit(), "reading the generation")
          .isSucceeded();
      if (!stillCurrent) {
        return GENERATION_MOVED;
      }
    }
    return -1;
  }

  /**
   * Claims index {@code index} of a running elastic job for a worker that comes back (its
   * earlier process left): only while no live worker holds it. The index, -1 if a live worker
   * holds it, or {@link #GENERATION_MOVED}.
   */
  static int claimRejoin(KV kv, String prefix, int index, long lease, Cmp current) {
    ByteSequence k = bytes(prefix + "members/" + index);
    boolean won = await(kv.txn().If(new Cmp(k, Cmp.Op.EQUAL, CmpTarget.createRevision(0)),
        current).Then(Op.put(k, bytes(String.valueOf(ProcessHandle.current().pid())),
            PutOption.builder().withLeaseId(lease).build())).commit(),
        "claiming a worker index").isSucceeded();
    if (won) {
      return index;
    }
    return await(kv.txn().If(current).commit(), "reading the generation").isSucceeded() ? -1
        : GENERATION_MOVED;
  }

  private static int memberIndex(KeyValue m, String prefix) {
    return Integer.parseInt(m.getKey().toString(StandardCharsets.UTF_8)
        .substring((prefix + "members/").length()));
  }

  private static boolean exists(KV kv, String key) {
    return await(kv.get(bytes(key), GetOption.builder().withCountOnly(true).build()),
        "reading " + key).getCount() > 0;
  }

  private static long count(KV kv, String keyPrefix) {
    return await(kv.get(bytes(keyPrefix), GetOption.builder().isPrefix(true).withCountOnly(true)
        .build()), "reading " + keyPrefix).getCount();
  }

  private static Optional<String> value(KV kv, String key) {
    List<KeyValue> kvs = await(kv.get(bytes(key)), "reading " + key).getKvs();
    return kvs.isEmpty() ? Optional.empty()
        : Optional.of(kvs.get(0).getValue().toString(StandardCharsets.UTF_8));
  }

  /** {@code host:port,...} (or URLs) as etcd client endpoints. */
  static URI[] parseEndpoints(String endpoints) {
    String[] parts = endpoints.split(",");
    URI[] uris = new URI[parts.length];
    for (int i = 0; i < parts.length; i++) {
      String p = parts[i].trim();
      if (!p.matches("(https?://)?[A-Za-z0-9.\\-\\[\\]:]+:\\d{1,5}")) {
        throw new JobException("coordinator (--coordinator) must be etcd's host:port[,host:port...]"
            + " but '" + p + "' is not a host:port");
      }
      uris[i] = URI.create(p.startsWith("http") ? p : "http://" + p);
    }
    return uris;
  }

  /** Key=value lines (values free of newlines), sorted: the payload format of settings. */
  public static String encode(Map<String, String> m) {
    StringBuilder b = new StringBuilder();
    for (Map.Entry<String, String> e : new TreeMap<>(m).entrySet()) {
      if (e.getKey().contains("=") || e.getKey().contains("\n") || e.getValue().contains("\n")) {
        throw new IllegalArgumentException("cannot encode " + e.getKey() + "=" + e.getValue());
      }
      b.append(e.getKey()).append('=').append(e.getValue()).append('\n');
    }
    return b.toString();
  }

  public static Map<String, String> decode(String s) {
    Map<String, String> m = new LinkedHashMap<>();
    for (String line : s.split("\n")) {
      if (!line.isEmpty()) {
        int eq = line.indexOf('=');
        m.put(line.substring(0, eq), line.substring(eq + 1));
      }
    }
    return m;
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }

  private static <T> T await(java.util.concurrent.CompletableFuture<T> f, String what) {
    try {
      return f.get(15, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new JobException("interrupted while " + what, e);
    } catch (ExecutionException e) {
      throw new JobException("etcd failed while " + what + ": " + e.getCause().getMessage(),
          e.getCause());
    } catch (TimeoutException e) {
      f.cancel(true);
      throw new JobException("etcd did not answer within 15 s while " + what
          + " (is it running at the --coordinator address?)", e);
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new JobException("interrupted", e);
    }
  }

  /**
   * The keep-alive stream's end (etcd out of reach, the lease revoked) is not an error by itself:
   * the lease's expiry is what counts, and the other workers see it. Logged, so that a worker's
   * operator sees when its heartbeat stopped.
   */
  private static StreamObserver<LeaseKeepAliveResponse> keepAliveLog(String job, long lease) {
    return new StreamObserver<>() {
      @Override
      public void onNext(LeaseKeepAliveResponse r) {}

      @Override
      public void onError(Throwable t) {
        log.info(() -> String.format("job %s: this worker's keep-alive of lease %x ended (%s);"
            + " once the lease expires the job counts the worker as gone", job, lease, t));
      }

      @Override
      public void onCompleted() {}
    };
  }
}
