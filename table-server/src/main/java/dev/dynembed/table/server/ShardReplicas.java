package dev.dynembed.table.server;

import com.google.protobuf.ByteString;
import dev.dynembed.table.cluster.ClusterException;
import dev.dynembed.table.cluster.ClusterMember;
import dev.dynembed.table.cluster.ShardGroup;
import dev.dynembed.table.common.Dirs;
import dev.dynembed.table.common.Durable;
import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.engine.ReplicationHook;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.ShardState;
import dev.dynembed.table.v1.FileChunk;
import dev.dynembed.table.v1.FollowRequest;
import dev.dynembed.table.v1.FollowerMessage;
import dev.dynembed.table.v1.LogRecord;
import dev.dynembed.table.v1.ReplicatedRecord;
import dev.dynembed.table.v1.ReplicationMessage;
import dev.dynembed.table.v1.ShardReplicationGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Stream;

/**
 * The processes of one replicated shard (docs/design/0019-cluster-map.md): a primary that takes
 * calls and ships its write-ahead log, and followers that apply it to their own engine and log.
 * {@link ShardGroup} (etcd) decides the roles; this class plays them.
 *
 * <p>As primary ({@link #lead}): every record appended is queued for each follower; a follower
 * that subscribes first gets a fresh snapshot's files (hard links, so later snapshots may delete
 * it meanwhile), then the records from the snapshot's start on; or, when it followed this epoch
 * already and the records it lacks are still in this log and fewer bytes than a snapshot, those
 * records read from the log (a rejoin: docs/design/0023-faults.md). A follower that has
 * acknowledged the log up to the record last appended when its snapshot was sent (or when its
 * rejoin began) is recorded in etcd as in sync, and from then on, with {@code sync}, every
 * mutating call waits until every follower in sync holds its record (and at least {@code --min-sync-replicas} do); a follower that falls
 * behind by {@code --replication-timeout-ms} or whose stream ends is removed from the record in
 * etcd before any call is answered without it. Every answer also needs the lease: a primary
 * that has not renewed it within half its TTL answers nothing (a paused or cut-off primary may
 * have been replaced).
 *
 * <p>As follower ({@link #follow}): the engine refuses every call; the primary's snapshot
 * replaces this process's state (or, on a rejoin, its own log is kept), then its records are
 * applied and logged in order and each is acknowledged once in this process's log. Deposed
 * ({@link #deposed}), the process exits (code 75): its state may hold records no follower got,
 * so it comes back as a follower and loads the new primary's snapshot (crash-only, as for a
 * failed log).
 *
 * <p>Serving replicas (docs/design/0024-vectors-in.md; {@link #serve}): followers nobody writes
 * to, in no group. A primary, or an unreplicated shard with a log ({@link #serveAsSource}),
 * streams its log to them as to followers, but never counts them in sync nor waits for them, and
 * answers their pings with its last LSN, by which they bound their lag.
 */
final class ShardReplicas extends ShardReplicationGrpc.ShardReplicationImplBase
    implements ShardGroup.Roles, ReplicationHook {
  private static final Logger log = Logger.getLogger(ShardReplicas.class.getName());
  /** A follower queue past this many bytes is cut off (it reconnects and loads a snapshot). */
  static final long MAX_QUEUED_BYTES = 512L << 20;
  private static final int CHUNK = 1 << 20;
  static final int DEPOSED_EXIT_CODE = 75;

  enum Mode { SYNC, ASYNC }

  /** A serving replica that was never fresh. */
  private static final long NEVER = Long.MIN_VALUE;

  /** How often a serving replica asks where its training shard's log is. */
  static final long HEARTBEAT_MILLIS = 200;

  /** CRC32C of a record's serialized form: how a serving replica's last record is recognised. */
  static int recordCrc(LogRecord r) {
    java.util.zip.CRC32C c = new java.util.zip.CRC32C();
    c.update(r.toByteArray());
    return (int) c.getValue();
  }

  /**
   * How a follower reaches its primary: TLS (the CA of the peers' certificates, and this
   * process's certificate as its client certificate) and a bearer token, each null for none.
   */
  record Peers(Path ca, Path cert, Path key, String token) {}

  /** Re-opens the shard's state after its files were replaced (a follower's snapshot). */
  interface StateOpener {
    ShardState open() throws IOException;
  }

  private final ShardEngine engine;
  private final AtomicReference<ShardState> state;
  private final StateOpener reopen;
  private final Path stateDir;
  private final Mode mode;
  private final int minInSync;
  private final Duration timeout;
  private final Runnable exit;
  /** Whether a reconnecting follower may get records from this log instead of a snapshot. */
  private final boolean rejoinFromLog;
  private final String member;
  private final Peers peers;
  private volatile ShardGroup group;

  // primary
  private final Object monitor = new Object();
  /** By stream: a member's old stream stays (closed) until etcd no longer lists it in sync. */
  private final Map<Long, Follower> followers = new ConcurrentHashMap<>();
  private final AtomicLong streams = new AtomicLong();
  private final ExecutorService isr = Executors.newSingleThreadExecutor(r -> daemon(r, "isr"));
  private volatile boolean leading;
  private volatile long epoch;
  /**
   * As primary: the epoch whose stream this process's log was a prefix of when it began to lead
   * (0: none known), and the first record of its own epoch. A member of that earlier epoch (its
   * deposed primary, or a follower of it) shares this log up to {@code epochStart - 1}: it
   * rejoins from its own log, cut there first if it runs past it.
   */
  private volatile long prevEpoch;
  private volatile long epochStart;
  /** Writes answered as primary, and when the last was (ms since the Unix epoch). */
  private final java.util.concurrent.atomic.LongAdder answeredWrites =
      new java.util.concurrent.atomic.LongAdder();
  private volatile long lastAnswerMillis;
  /** Calls refused since the lease last was valid (the first prints what was answered). */
  private final AtomicLong lapses = new AtomicLong();

  // follower
  private final Object sessionLock = new Object();
  private FollowSession session; // under sessionLock

  /**
   * A shard outside any replicated group whose log serving replicas follow (docs/design/
   * 0024-vectors-in.md): it leads "epoch 0" for them alone, ships its records once the first
   * serving replica connects, and never waits for one.
   */
  private volatile boolean source;
  /** A serving replica: reads answered only while it lags by at most this (0: no bound). */
  private volatile long maxLagMillis;

  ShardReplicas(ShardEngine engine, AtomicReference<ShardState> state, StateOpener reopen,
      Path stateDir, String member, Peers peers, Mode mode, int minInSync, Duration timeout,
      boolean rejoinFromLog, Runnable exit) {
    this.engine = engine;
    this.rejoinFromLog = rejoinFromLog;
    this.member = member;
    this.peers = peers;
    this.state = state;
    this.reopen = reopen;
    this.stateDir = stateDir;
    this.mode = mode;
    this.minInSync = minInSync;
    this.timeout = timeout;
    this.exit = exit;
    Thread lag = new Thread(this::watchLag, "replication-lag-" + engine.shardIndex());
    lag.setDaemon(true);
    lag.start();
  }

  void joined(ShardGroup g) {
    this.group = g;
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  /** This shard's state directory, STATE_DIR/shard-I. */
  private Path root() {
    return ShardState.root(stateDir, engine.shardIndex());
  }

  private String name() {
    return "shard " + engine.shardIndex();
  }

  /**
   * The epoch of the primary whose log this process's log is a prefix of, while it follows
   * (written once its state came from that primary: a snapshot loaded, or a rejoin accepted);
   * a rejoining follower names it so that the primary can send records instead of a snapshot.
   */
  private Path followEpochFile() {
    return root().resolve("follow-epoch");
  }

  /** Records, atomically and durably, that this process's log is a prefix of epoch {@code e}'s. */
  private void writeFollowEpoch(long e) throws IOException {
    Durable.writeAtomically(followEpochFile(),
        Long.toString(e).getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  private long followEpoch() {
    try {
      return Long.parseLong(Files.readString(followEpochFile()).strip());
    } catch (IOException | NumberFormatException e) {
      return 0; // none (or unreadable): a snapshot
    }
  }

  // ------------------------------------------------------------------ roles

  @Override
  public void lead(long e) {
    stopFollowing();
    epoch = e;
    ShardState s = state.get();
    if (s == null) {
      // elected while its state was being replaced by a snapshot that did not load: it cannot
      // serve; out (crash-only), so that the lease runs out and another process leads
      deposed("elected without a loaded state");
      return;
    }
    // its log was a prefix of the epoch it followed up to here, and is this epoch's stream from
    // here on: a member of the earlier epoch rejoins from its own log (cut here if it runs past)
    prevEpoch = followEpoch();
    epochStart = s.lastLsn() + 1;
    try {
      writeFollowEpoch(e);
    } catch (IOException io) {
      prevEpoch = 0; // a member of the earlier epoch loads a snapshot
      log.warning(name() + ": cannot write " + followEpochFile() + ": " + io.getMessage());
      try {
        Files.deleteIfExists(followEpochFile());
      } catch (IOException ignored) {
        // a deposed process's rejoin names an epoch that no longer matches: a snapshot
      }
    }
    s.replicateTo(this);
    long from = System.currentTimeMillis(); // before any answer of this epoch
    leading = true;
    engine.refuse(null);
    System.out.printf("table-server shard %d leads its replicated group (epoch %d, replication"
        + " %s, at least %d follower(s) in sync per answer) from %d%n", engine.shardIndex(), e,
        mode.name().toLowerCase(java.util.Locale.ROOT), mode == Mode.SYNC ? minInSync : 0, from);
    System.out.flush();
  }

  @Override
  public void follow(ClusterMember primary, long e) {
    engine.refuse(name() + ": this process is a follower; the primary is at "
        + primary.endpoint() + " (epoch " + e + "): resend there");
    synchronized (sessionLock) {
      if (session != null) {
        session.stop();
      }
      session = new FollowSession(primary, e);
      session.start();
    }
  }

  @Override
  public void deposed(String why) {
    boolean led = leading;
    leading = false;
    if (led) {
      printAnswered("deposed");
    }
    engine.refuse(name() + ": this process no longer leads (" + why + ")");
    synchronized (monitor) {
      monitor.notifyAll();
    }
    System.err.printf("table-server shard %d: deposed (%s); exiting: restarted, it joins as a"
        + " follower%n", engine.shardIndex(), why);
    System.err.flush();
    exit.run();
  }

  /**
   * Lets serving replicas (--serve-from) follow this shard, which is in no replicated group: its
   * records are shipped to them from the first one's connection on, and no call waits for them.
   */
  void serveAsSource() {
    epoch = 0;
    source = true;
    leading = true;
  }

  /**
   * Makes this process a serving replica of a training shard (docs/design/0024-vectors-in.md):
   * read-only, its tables loaded from that shard's snapshot and kept up to date from its log;
   * reads are refused while it lags by more than {@code maxLagMillis} (0: never refused for lag)
   * and until its first load. The shard's address is asked of {@code resolve} at every
   * connection (the primary of a replicated group, from the cluster map: a replica follows a
   * failover); {@code source} names it in messages. {@code fromCheckpoint}: its tables were
   * restored from a checkpoint (--start-from), and reads are answered from them until the first
   * load instead of refused.
   */
  void serve(String source, java.util.function.Supplier<String> resolve, long maxLagMillis,
      boolean fromCheckpoint) {
    this.maxLagMillis = maxLagMillis;
    engine.setReadOnly("this process is a serving replica of shard " + engine.shardIndex()
        + " at " + source + ": it takes no changes; send them to the training shard");
    engine.refuse(fromCheckpoint ? null : name() + ": this serving replica has not loaded its"
        + " training shard's tables yet; resend later");
    ClusterMember primary = ClusterMember.of(engine.shardIndex(), engine.numShards(), source,
        0, "training-shard");
    synchronized (sessionLock) {
      session = new FollowSession(primary, 0, true);
      session.resolve = resolve;
      session.start();
    }
  }

  @Override
  public boolean mayHoldAnswers() {
    return !source; // a source's serving replicas never hold an answer back
  }

  private void stopFollowing() {
    synchronized (sessionLock) {
      if (session != null) {
        session.stop();
        session = null;
      }
    }
  }

  // ------------------------------------------------------------------ primary: the write path

  @Override
  public void appended(long lsn, LogRecord record) {
    for (Follower f : followers.values()) {
      f.offer(lsn, record);
    }
  }

  @Override
  public void awaitReplicated(long lsn) {
    ShardGroup g = group;
    if (!leading) {
      throw unavailable("this process does not lead; resend to the primary");
    }
    if (g != null && !g.leaseValid()) {
      if (lapses.getAndIncrement() == 0) {
        printAnswered("lease lapsed");
      }
      throw unavailable("the lease of this primary was not renewed in time (etcd unreachable,"
          + " or the process was paused): it answers nothing until etcd confirms it still leads");
    }
    if (lapses.get() != 0) {
      lapses.set(0); // valid again: a later lapse prints again
    }
    if (mode == Mode.ASYNC) {
      answered();
      return;
    }
    long deadline = System.nanoTime() + timeout.toNanos() * 2;
    synchronized (monitor) {
      while (true) {
        if (!leading) {
          throw unavailable("this process no longer leads; resend to the new primary");
        }
        int holding = 0;
        boolean everyInSync = true;
        for (Follower f : followers.values()) {
          if (f.inSync) {
            if (f.acked >= lsn) {
              holding++;
            } else {
              everyInSync = false;
            }
          }
        }
        if (everyInSync && holding >= minInSync) {
          answered();
          return;
        }
        if (System.nanoTime() > deadline) {
          throw unavailable(String.format("%d follower(s) in sync hold this write, %d are"
              + " required (--min-sync-replicas): it is applied here and will be answered once"
              + " enough followers hold it; resend", holding, minInSync));
        }
        try {
          monitor.wait(20);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw unavailable("interrupted while waiting for the followers");
        }
      }
    }
  }

  /** A mutating call of this epoch may be answered: counted, with its time. */
  private void answered() {
    answeredWrites.increment();
    lastAnswerMillis = System.currentTimeMillis();
  }

  /**
   * Prints what this primary answered in its epoch: a partition test checks from the processes'
   * logs that no primary answered after its successor began to lead (two primaries of one group
   * never serve writes at once).
   */
  private void printAnswered(String why) {
    System.out.printf("table-server shard %d epoch %d: answered %d writes as primary, the last"
        + " at %d (%s)%n", engine.shardIndex(), epoch, answeredWrites.sum(), lastAnswerMillis,
        why);
    System.out.flush();
  }

  private TableException unavailable(String what) {
    return new TableException(ErrorCode.UNAVAILABLE, name() + ": " + what);
  }

  /** Followers in sync that stopped acknowledging for longer than the timeout are cut off. */
  private void watchLag() {
    while (true) {
      try {
        Thread.sleep(Math.max(20, timeout.toMillis() / 10));
      } catch (InterruptedException e) {
        return;
      }
      long now = System.nanoTime();
      for (Follower f : followers.values()) {
        long behindSince = f.behindSince.get();
        if (f.inSync && !f.closed && f.acked < f.sent && behindSince != 0
            && now - behindSince > timeout.toNanos()) {
          f.fail("acknowledged nothing new for " + timeout.toMillis() + " ms");
        }
      }
    }
  }

  /** Records in etcd the followers now in sync, then wakes the waiting calls. */
  private void updateInSync(Follower joining) {
    isr.execute(() -> {
      ShardGroup g = group;
      if (g == null || !leading) {
        return;
      }
      Set<String> members = new LinkedHashSet<>();
      for (Follower f : followers.values()) {
        if (!f.closed && (f.inSync || f == joining)) {
          members.add(f.member);
        }
      }
      try {
        g.inSync(members); // etcd first: a write answered without a follower is never lost to it
      } catch (ClusterException e) {
        log.warning(name() + ": recording the followers in sync failed: " + e.getMessage());
        if (joining != null) {
          joining.fail("could not be recorded in sync");
        }
        return;
      }
      for (Follower f : followers.values()) {
        f.inSync = members.contains(f.member) && !f.closed;
        if (f.closed) {
          followers.remove(f.id, f); // etcd no longer counts it: the calls need not either
        }
      }
      if (joining != null && joining.inSync) {
        System.out.printf("table-server shard %d: follower %s is in sync at record %d%n",
            engine.shardIndex(), joining.member, joining.acked);
        System.out.flush();
      }
      synchronized (monitor) {
        monitor.notifyAll();
      }
    });
  }

  // ------------------------------------------------------------------ primary: the stream

  @Override
  public StreamObserver<FollowerMessage> follow(StreamObserver<ReplicationMessage> out) {
    ServerCallStreamObserver<ReplicationMessage> call =
        (ServerCallStreamObserver<ReplicationMessage>) out;
    // the handlers must be set before this method returns
    Object ready = new Object();
    AtomicReference<Follower> current = new AtomicReference<>();
    call.setOnReadyHandler(() -> {
      synchronized (ready) {
        ready.notifyAll();
      }
    });
    call.setOnCancelHandler(() -> {
      Follower f = current.get();
      if (f != null) {
        f.fail("it went away");
      }
    });
    return new StreamObserver<>() {
      private Follower f;

      @Override
      public void onNext(FollowerMessage m) {
        if (m.hasFollow()) {
          FollowRequest r = m.getFollow();
          String refusal = !leading ? "this process does not lead"
              : source && !r.getServing() ? "this shard is in no replicated group: only"
                  + " serving replicas (--serve-from) follow it"
              : !r.getServing() && r.getEpoch() != epoch ? "the follower read epoch "
                  + r.getEpoch() + " but this primary leads epoch " + epoch
              : r.getShardIndex() != engine.shardIndex() || r.getNumShards() != engine.numShards()
                  ? "the follower is shard " + r.getShardIndex() + " of " + r.getNumShards()
                  : null;
          ShardState st = state.get();
          if (refusal == null && st == null) {
            refusal = "this shard has not recovered its tables yet";
          }
          if (refusal != null) {
            call.onError(Status.FAILED_PRECONDITION.withDescription(name() + ": " + refusal)
                .asRuntimeException());
            return;
          }
          f = new Follower(streams.incrementAndGet(), r, call, ready);
          current.set(f);
          for (Follower old : followers.values()) {
            if (old.member.equals(f.member)) {
              old.fail("replaced by a new stream of the same member");
            }
          }
          followers.put(f.id, f);
          if (f.serving && !st.replicatingTo(ShardReplicas.this)) {
            // a source ships its records from now on: before the snapshot the follower starts
            // from is cut, so that every record after it is queued
            st.replicateTo(ShardReplicas.this);
          }
          f.start();
        } else if (f != null && m.getMsgCase() == FollowerMessage.MsgCase.PING) {
          f.pendingPing = m.getPing(); // answered by the sender, with the log's end after this
        } else if (f != null) {
          f.ack(m.getAckedLsn());
        }
      }

      @Override
      public void onError(Throwable t) {
        if (f != null) {
          f.fail("its stream broke (" + Status.fromThrowable(t).getCode() + ")");
        }
      }

      @Override
      public void onCompleted() {
        if (f != null) {
          f.fail("it closed its stream");
        }
      }
    };
  }

  private record Pending(long lsn, LogRecord record) {}

  /** The primary's end of one follower's stream. */
  private final class Follower {
    final long id;
    final String member;
    final ServerCallStreamObserver<ReplicationMessage> out;
    final LinkedBlockingQueue<Pending> queue = new LinkedBlockingQueue<>();
    final AtomicLong queuedBytes = new AtomicLong();
    /** When the follower first lagged behind what was sent to it (0: caught up). */
    final AtomicLong behindSince = new AtomicLong();
    final Object ready;
    volatile long acked;
    volatile long sent;
    volatile long catchUp = Long.MAX_VALUE; // in sync once acked reaches it
    volatile boolean inSync;
    volatile boolean closed;
    volatile String why;
    Thread sender;

    /** Where the follower's own log ends: the last record, and the epoch it is a prefix of. */
    final long lastLsn;
    final long lastEpoch;
    /** A serving replica: never in sync, never waited for, answered its pings. */
    final boolean serving;
    /** A serving replica's last ping not answered yet (null: none). */
    volatile Long pendingPing;
    final int lastCrc;

    Follower(long id, FollowRequest request, ServerCallStreamObserver<ReplicationMessage> out,
        Object ready) {
      this.id = id;
      this.member = request.getMember();
      this.lastLsn = request.getLastLsn();
      this.lastEpoch = request.getLastEpoch();
      this.serving = request.getServing();
      this.lastCrc = request.getLastCrc();
      this.out = out;
      this.ready = ready;
    }

    void start() {
      sender = new Thread(this::send, "replicate-to-" + member);
      sender.setDaemon(true);
      sender.start();
    }

    void offer(long lsn, LogRecord r) {
      if (closed) {
        return;
      }
      if (queuedBytes.addAndGet(r.getSerializedSize()) > MAX_QUEUED_BYTES) {
        fail("fell behind by more than " + (MAX_QUEUED_BYTES >> 20) + " MiB of log");
        return;
      }
      queue.add(new Pending(lsn, r));
    }

    void ack(long lsn) {
      if (lsn <= acked) {
        return;
      }
      acked = lsn;
      if (lsn >= sent) {
        behindSince.set(0);
      }
      maybeInSync();
      synchronized (monitor) {
        monitor.notifyAll();
      }
    }

    private synchronized void maybeInSync() {
      if (serving) {
        return; // never counted in sync: no call waits for it
      }
      if (!inSync && acked >= catchUp && !closed) {
        catchUp = Long.MAX_VALUE; // asked once
        updateInSync(this);
      }
    }

    void fail(String reason) {
      if (closed) {
        return;
      }
      why = reason;
      closed = true;
      if (!inSync) {
        followers.remove(id, this);
      }
      log.info(String.format("%s: follower %s dropped: %s", name(), member, reason));
      if (sender != null) {
        sender.interrupt();
      }
      if (inSync) {
        updateInSync(null); // etcd first; the waiting calls wait for it
      }
    }

    private void send() {
      Path links = null;
      try {
        ShardState s = state.get();
        long start; // the first record the queue must send: those before came another way
        if (serving) {
          emit(ReplicationMessage.newBuilder().setStreamEpoch(epoch).build());
        }
        long cut = serving ? 0 : divergedAfter(s);
        if (cut > 0) { // it cuts its log there and connects again
          System.out.printf("table-server shard %d: follower %s runs past record %d, where"
              + " epoch %d began, with records of epoch %d that this log does not hold: it cuts"
              + " them and rejoins%n", engine.shardIndex(), member, cut, epoch, lastEpoch);
          System.out.flush();
          emit(ReplicationMessage.newBuilder().setCutAfter(cut).build());
          fail("it cuts its log after record " + cut + " and connects again");
          return;
        }
        long resumeAfter = serving ? servingResumable(s) : resumable(s);
        if (resumeAfter >= 0) {
          // every record up to here is whole in the log; those after it are queued
          long to = s.lastLsn();
          emit(ReplicationMessage.newBuilder().setResumeFrom(resumeAfter).build());
          sent = resumeAfter;
          catchUp = to;
          System.out.printf("table-server shard %d: follower %s rejoins from its own log after"
              + " record %d: records %d..%d from this log, no snapshot (in sync once it holds"
              + " record %d; its log followed epoch %d, this is epoch %d)%n", engine.shardIndex(),
              member, resumeAfter, resumeAfter + 1, to, to, lastEpoch, epoch);
          System.out.flush();
          maybeInSync();
          s.readLog(resumeAfter + 1, to, this::sendRecord);
          start = to + 1;
        } else {
          // the snapshot starts after this follower's queue did: every record from its start
          // on is queued
          s.snapshot();
          links = root().resolve("replication-" + member + "-" + System.nanoTime());
          start = s.linkCurrentSnapshot(links);
          try (Stream<Path> files = Files.list(links)) {
            for (Path p : files.sorted().toList()) {
              sendFile(p, p.getFileName().toString(), true);
            }
          }
          emit(ReplicationMessage.newBuilder().setSnapshotDone(start).build());
          sent = start - 1;
          catchUp = s.lastLsn();
          log.info(String.format(serving ? "%s: serving replica %s gets the log from record %d"
              : "%s: follower %s gets the log from record %d (in sync once it holds record %d)",
              name(), member, start, catchUp));
          maybeInSync();
        }
        while (!closed) {
          Pending p = queue.poll(serving ? HEARTBEAT_MILLIS / 4 : 200, TimeUnit.MILLISECONDS);
          Long ping = pendingPing;
          if (serving && ping != null) {
            // the log's end now, after the ping came: every write answered before the replica
            // pinged is at or below it
            pendingPing = null;
            emit(ReplicationMessage.newBuilder().setHeartbeat(
                dev.dynembed.table.v1.Heartbeat.newBuilder().setLsn(s.lastLsn()).setPing(ping))
                .build());
          }
          if (p == null) {
            continue;
          }
          queuedBytes.addAndGet(-p.record.getSerializedSize());
          if (p.lsn < start) {
            continue; // in the snapshot, or read from the log
          }
          sendRecord(p.lsn, p.record);
        }
      } catch (InterruptedException e) {
        // cut off
      } catch (IOException | RuntimeException e) {
        if (!closed) {
          fail("sending failed: " + e);
        }
      } finally {
        if (links != null) {
          try {
            Dirs.deleteTree(links);
          } catch (IOException ignored) {
            // left for the next start's clean-up
          }
        }
        try {
          out.onError(Status.UNAVAILABLE.withDescription(name() + ": replication stopped: "
              + why).asRuntimeException());
        } catch (RuntimeException ignored) {
          // already closed
        }
      }
    }

    /**
     * The follower's last record if it rejoins from its own log, else -1 (it loads a snapshot).
     * It can when its log is a prefix of this primary's (it followed this epoch: one primary per
     * epoch, which shipped it those records in order) and this log still holds every record
     * after it (a snapshot since may have let them go); it does when those records are fewer
     * bytes than a snapshot (Redis's partial resync has the same rule with a fixed backlog): a
     * step's record carries its gradients, so a long gap costs more to apply than the state it
     * built costs to load.
     */
    private long resumable(ShardState s) throws IOException {
      boolean prefix = lastEpoch == epoch // it followed this epoch
          || lastEpoch == prevEpoch && lastLsn < epochStart; // or the one before, no further
      if (!rejoinFromLog || lastEpoch == 0 || !prefix || lastLsn > s.lastLsn()
          || lastLsn + 1 < s.snapshotStart()) {
        return -1;
      }
      return cheaperThanSnapshot(s, lastLsn) ? lastLsn : -1;
    }

    /**
     * A serving replica's last record if it rejoins from its own log, else -1: whatever epoch it
     * followed, when this log holds a record at its last LSN with the same CRC32C (then the
     * replica's log is a prefix of this one: logs only ever lose a tail, and a different record
     * at that LSN would be another history), and the records after it, fewer bytes than a
     * snapshot.
     */
    private long servingResumable(ShardState s) throws IOException {
      if (!rejoinFromLog || lastLsn < 1 || lastLsn > s.lastLsn() || lastLsn < s.snapshotStart()) {
        return -1;
      }
      int[] crc = {0};
      boolean[] found = {false};
      s.readLog(lastLsn, lastLsn, (lsn, r) -> {
        crc[0] = recordCrc(r);
        found[0] = true;
      });
      if (!found[0] || crc[0] != lastCrc) {
        return -1;
      }
      return cheaperThanSnapshot(s, lastLsn) ? lastLsn : -1;
    }

    /** Whether the records after {@code lsn} are fewer bytes than a snapshot (said if not). */
    private boolean cheaperThanSnapshot(ShardState s, long lsn) throws IOException {
      long logBytes = s.logBytesAfter(lsn);
      // what a snapshot would hold now: the tables' memory (the last snapshot's size when larger,
      // as with rows in a disk tier; it may be old: the table grew since)
      long snapshotBytes = Math.max(s.lastSnapshotBytes(), engine.bytesInUse());
      if (logBytes > snapshotBytes) {
        System.out.printf("table-server shard %d: follower %s could rejoin from its log after"
            + " record %d, but the records it lacks (about %,d bytes of log) outweigh a"
            + " snapshot (%,d bytes): it loads one%n", engine.shardIndex(), member, lsn,
            logBytes, snapshotBytes);
        System.out.flush();
        return false;
      }
      return true;
    }

    /**
     * Where the follower must cut its log to rejoin from it, or 0: it belongs to the epoch this
     * primary followed before it led, and runs past that epoch's last record here (records of
     * the deposed primary that never reached this process: a sync primary answered none of
     * them), while this log still holds every record after the cut. Raft's and Kafka's followers
     * truncate a diverged tail the same way, by the leader's epoch history.
     */
    private long divergedAfter(ShardState s) throws IOException {
      long cut = epochStart - 1;
      return rejoinFromLog && prevEpoch != 0 && lastEpoch == prevEpoch && lastLsn > cut
          && cut >= 1 && cut + 1 >= s.snapshotStart() && cheaperThanSnapshot(s, cut) ? cut : 0;
    }

    /** One record, after the files it names (a restored table's, a slot import's). */
    private void sendRecord(long lsn, LogRecord record) throws IOException {
      try {
        if (record.hasRestore()) {
          Path dir = state.get().walDirectory().resolve(record.getRestore().getDirectory());
          try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.sorted().toList()) {
              sendFile(f, dir.getFileName() + "/" + f.getFileName(), false);
            }
          }
        }
        if (record.hasImportSlots()) { // a slot move's files, as a restore's
          Path wal = state.get().walDirectory();
          Path dir = wal.resolve(record.getImportSlots().getDirectory());
          try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
              sendFile(f, wal.relativize(f).toString().replace('\\', '/'), false);
            }
          }
        }
        if (acked >= sent) {
          behindSince.set(System.nanoTime()); // from now on it owes an answer
        }
        sent = lsn;
        emit(ReplicationMessage.newBuilder().setRecord(ReplicatedRecord.newBuilder()
            .setLsn(lsn).setEpoch(epoch).setRecord(record)).build());
      } catch (InterruptedException e) {
        throw new java.io.InterruptedIOException("cut off");
      }
    }

    private void sendFile(Path p, String path, boolean snapshot) throws IOException,
        InterruptedException {
      try (InputStream in = Files.newInputStream(p)) {
        long offset = 0;
        byte[] buf = new byte[CHUNK];
        boolean first = true;
        while (true) {
          int n = in.readNBytes(buf, 0, buf.length);
          if (n == 0 && !first) {
            break;
          }
          FileChunk c = FileChunk.newBuilder().setPath(path).setOffset(offset)
              .setData(ByteString.copyFrom(buf, 0, n)).build();
          emit(snapshot ? ReplicationMessage.newBuilder().setSnapshotFile(c).build()
              : ReplicationMessage.newBuilder().setRestoreFile(c).build());
          offset += n;
          first = false;
          if (n < buf.length) {
            break;
          }
        }
      }
    }

    /** Sends one message once the stream can take it (HTTP/2 flow control). */
    private void emit(ReplicationMessage m) throws InterruptedException {
      synchronized (ready) {
        while (!out.isReady()) {
          if (closed) {
            throw new InterruptedException();
          }
          ready.wait(100);
        }
      }
      if (closed) {
        throw new InterruptedException();
      }
      out.onNext(m);
    }
  }

  // ------------------------------------------------------------------ follower

  /** This process's stream from its primary; it reconnects (and reloads) until stopped. */
  private final class FollowSession {
    final ClusterMember primary;
    /** The stream's epoch: the group's, or for a serving replica what the primary says. */
    volatile long epoch;
    final boolean serving;
    final ExecutorService apply;
    /** A serving replica: the CRC32C of the last record applied, and its LSN (0: none yet). */
    int appliedCrc;
    long appliedCrcLsn;
    /**
     * A serving replica's freshness: answers to its pings not reached yet (the primary's LSN,
     * the ping's time), and the latest ping whose answer it reached: it holds every write its
     * shard answered before then ({@link #NEVER}: none yet).
     */
    final java.util.ArrayDeque<long[]> beats = new java.util.ArrayDeque<>();
    volatile long freshAtNanos = NEVER;
    /** A serving replica swapping in a snapshot: its reads stay refused meanwhile. */
    volatile boolean reloading;
    /** A serving replica: where its training shard is now, asked at each connection. */
    java.util.function.Supplier<String> resolve;
    volatile boolean stopped;
    volatile ManagedChannel channel;
    volatile ClientCallStreamObserver<FollowerMessage> requests;
    Path incoming;
    FileChannel file;
    String fileName;
    boolean loaded;
    /**
     * The stream's number (apply thread): an ended stream's late callbacks (the error that
     * follows a cancel) are ignored, so that one failure reconnects once.
     */
    long generation;

    FollowSession(ClusterMember primary, long epoch) {
      this(primary, epoch, false);
    }

    FollowSession(ClusterMember primary, long epoch, boolean serving) {
      this.primary = primary;
      this.epoch = epoch;
      this.serving = serving;
      if (serving) {
        Thread w = new Thread(this::watchFreshness, "serving-lag-" + engine.shardIndex());
        w.setDaemon(true);
        w.start();
      }
      this.apply = Executors.newSingleThreadExecutor(r -> daemon(r, "follow-" + primary.member()));
    }

    void start() {
      apply.execute(this::connect);
    }

    void stop() {
      stopped = true;
      ClientCallStreamObserver<FollowerMessage> r = requests;
      if (r != null) {
        r.cancel("stopped following", null);
      }
      apply.shutdown();
      try {
        apply.awaitTermination(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      ManagedChannel c = channel;
      if (c != null) {
        c.shutdownNow();
      }
      closeFile();
    }

    /** Opens the stream (on the apply thread; its messages are applied there, in order). */
    private void connect() {
      if (stopped) {
        return;
      }
      loaded = false;
      try {
        incoming = root().resolve("incoming-" + System.nanoTime());
        Files.createDirectories(incoming);
      } catch (IOException e) {
        failed(e);
        return;
      }
      try {
        channel = channel(resolve != null ? resolve.get() : primary.endpoint());
      } catch (IOException e) {
        failed(e);
        return;
      }
      long gen = ++generation;
      ShardReplicationGrpc.newStub(channel).follow(new ClientResponseObserver<FollowerMessage,
          ReplicationMessage>() {
        @Override
        public void beforeStart(ClientCallStreamObserver<FollowerMessage> r) {
          requests = r;
        }

        @Override
        public void onNext(ReplicationMessage m) {
          if (stopped || gen != generation) {
            return;
          }
          try {
            handle(m);
          } catch (IOException | RuntimeException e) {
            requests.cancel("applying failed: " + e.getMessage(), e);
            failed(e);
          }
        }

        @Override
        public void onError(Throwable t) {
          if (gen == generation) {
            failed(t);
          }
        }

        @Override
        public void onCompleted() {
          if (gen == generation) {
            failed(new IOException("the primary ended the stream"));
          }
        }
      });
      ShardState s = state.get();
      FollowRequest.Builder fr = FollowRequest.newBuilder()
          .setMember(member != null ? member : "serving-" + ProcessHandle.current().pid())
          .setShardIndex(engine.shardIndex()).setNumShards(engine.numShards()).setEpoch(epoch)
          .setLastLsn(s == null ? 0 : s.lastLsn()).setLastEpoch(s == null ? 0 : followEpoch());
      if (serving) {
        fr.setServing(true);
        long last = s == null ? 0 : s.lastLsn();
        Integer crc = last == 0 ? null : lastRecordCrc(s, last);
        if (crc == null) {
          fr.setLastLsn(0); // its last record is not known: a snapshot
        } else {
          fr.setLastCrc(crc);
        }
      }
      requests.onNext(FollowerMessage.newBuilder().setFollow(fr).build());
    }

    private ManagedChannel channel(String endpoint) throws IOException {
      NettyChannelBuilder b;
      if (peers.ca() == null) {
        b = NettyChannelBuilder.forTarget(endpoint).usePlaintext();
      } else {
        io.grpc.TlsChannelCredentials.Builder t = io.grpc.TlsChannelCredentials.newBuilder()
            .trustManager(peers.ca().toFile());
        if (peers.cert() != null) {
          t.keyManager(peers.cert().toFile(), peers.key().toFile());
        }
        b = NettyChannelBuilder.forTarget(endpoint, t.build());
      }
      if (peers.token() != null) {
        io.grpc.Metadata md = new io.grpc.Metadata();
        md.put(io.grpc.Metadata.Key.of("authorization", io.grpc.Metadata.ASCII_STRING_MARSHALLER),
            "Bearer " + peers.token());
        b.intercept(io.grpc.stub.MetadataUtils.newAttachHeadersInterceptor(md));
      }
      // a record is a step's gradients (megabytes): a window that holds one, as the clients'
      return b.maxInboundMessageSize(Limits.MAX_MESSAGE_BYTES)
          .flowControlWindow(Limits.FLOW_CONTROL_WINDOW).executor(apply).build();
    }

    /** The CRC32C of this replica's record {@code lsn}, or null when it is not known. */
    private Integer lastRecordCrc(ShardState s, long lsn) {
      if (appliedCrcLsn == lsn) {
        return appliedCrc;
      }
      try {
        if (lsn < s.snapshotStart()) {
          return null; // a snapshot holds it, the log no longer does
        }
        Integer[] crc = {null};
        s.readLog(lsn, lsn, (l, r) -> crc[0] = recordCrc(r));
        return crc[0];
      } catch (IOException e) {
        return null;
      }
    }

    /** Asks the primary where its log ends (on the apply thread, which owns the stream). */
    private void ping() {
      ClientCallStreamObserver<FollowerMessage> r = requests;
      if (stopped || r == null) {
        return;
      }
      try {
        r.onNext(FollowerMessage.newBuilder().setPing(System.nanoTime()).build());
      } catch (RuntimeException e) {
        // the stream ended: the next one pings
      }
    }

    /**
     * A serving replica's pings (every {@link #HEARTBEAT_MILLIS}) and reads: refused until
     * loaded and while it lags past the bound.
     */
    private void watchFreshness() {
      long pingedAt = 0;
      while (!stopped) {
        try {
          Thread.sleep(HEARTBEAT_MILLIS / 4);
        } catch (InterruptedException e) {
          return;
        }
        if (System.nanoTime() - pingedAt >= HEARTBEAT_MILLIS * 1_000_000L) {
          pingedAt = System.nanoTime();
          try {
            apply.execute(this::ping);
          } catch (java.util.concurrent.RejectedExecutionException e) {
            return; // stopped
          }
        }
        synchronized (this) { // a load's refusal is never lifted here while it runs
          long fresh = freshAtNanos;
          long bound = maxLagMillis;
          if (fresh == NEVER || reloading) {
            continue; // not loaded yet (refused since serve()), or loading again
          }
          long lag = (System.nanoTime() - fresh) / 1_000_000;
          String why = engine.notReadyMessage();
          if (bound > 0 && lag > bound) {
            engine.refuse(name() + ": this serving replica lags " + lag + " ms behind its"
                + " training shard at " + primary.endpoint() + " (bound --max-lag-ms " + bound
                + "); resend later, or to another replica");
          } else if (why != null && why.contains("serving replica")) {
            engine.refuse(null);
          }
        }
      }
    }

    /** A serving replica's tables are being replaced: reads refused until {@link #reloaded}. */
    private synchronized void reloading() {
      reloading = true;
      engine.refuse(name() + ": this serving replica is loading its training shard's"
          + " snapshot; resend later");
    }

    /**
     * Its tables are whole again (a snapshot loaded, or a rejoin from its own log accepted):
     * the bound decides from now on.
     */
    private synchronized void reloaded(long applied) {
      reloading = false;
      reached(applied);
    }

    /** This replica's freshness after applying up to {@code applied}. */
    private void reached(long applied) {
      long[] b;
      while ((b = beats.peekFirst()) != null && b[0] <= applied) {
        freshAtNanos = Math.max(freshAtNanos, b[1]); // every write answered before that ping
        beats.pollFirst();
      }
    }

    private void handle(ReplicationMessage m) throws IOException {
      switch (m.getMsgCase()) {
        case STREAM_EPOCH -> epoch = m.getStreamEpoch();
        case HEARTBEAT -> {
          ShardState s = state.get();
          long lsn = m.getHeartbeat().getLsn();
          long pinged = m.getHeartbeat().getPing();
          if (loaded && s != null && s.lastLsn() >= lsn) {
            beats.clear();
            // it holds every write its shard answered before it pinged
            freshAtNanos = Math.max(freshAtNanos, pinged);
          } else {
            beats.addLast(new long[] {lsn, pinged});
          }
        }
        case SNAPSHOT_FILE -> write(incoming, m.getSnapshotFile());
        case SNAPSHOT_DONE -> {
          closeFile();
          long start = m.getSnapshotDone();
          if (serving) { // its tables are swapped: reads wait (UNAVAILABLE) rather than miss
            reloading();
          }
          ShardState old = state.getAndSet(null);
          if (old != null) {
            old.close(false);
          }
          engine.clearForResync();
          ShardState.installReceived(stateDir, engine.shardIndex(), incoming, start);
          ShardState fresh = reopen.open();
          state.set(fresh);
          // this log is now a prefix of this primary's: durable before the first ack
          writeFollowEpoch(epoch);
          loaded = true;
          if (serving) {
            reloaded(fresh.lastLsn());
          }
          System.out.printf("table-server shard %d follows %s (epoch %d): loaded its snapshot"
              + " at record %d (%d tables)%n", engine.shardIndex(), primary.endpoint(), epoch,
              start, engine.tables().size());
          System.out.flush();
          ack(fresh.lastLsn());
        }
        case RESUME_FROM -> {
          ShardState s = state.get();
          if (loaded || s == null || m.getResumeFrom() != s.lastLsn()) {
            throw new IOException("the primary resumes the log after record "
                + m.getResumeFrom() + " but this process's log ends at "
                + (s == null ? "nothing" : String.valueOf(s.lastLsn())));
          }
          Dirs.deleteTree(incoming); // no snapshot comes
          if (followEpoch() != epoch) { // the epoch before: a prefix of this one's stream now
            writeFollowEpoch(epoch);
          }
          loaded = true;
          if (serving) { // also after a load that failed past its swap
            reloaded(s.lastLsn());
          }
          System.out.printf("table-server shard %d follows %s (epoch %d): rejoined from its own"
              + " log after record %d (no snapshot)%n", engine.shardIndex(), primary.endpoint(),
              epoch, s.lastLsn());
          System.out.flush();
          ack(s.lastLsn());
        }
        case CUT_AFTER -> {
          long cut = m.getCutAfter();
          ShardState old = state.getAndSet(null);
          if (old != null) {
            old.close(false);
          }
          engine.clearForResync();
          boolean done = ShardState.cutLogAfter(stateDir, engine.shardIndex(), cut);
          if (!done) { // its snapshot is later than the cut: it loads the primary's
            Files.deleteIfExists(followEpochFile());
          }
          ShardState fresh = reopen.open(); // replays up to the cut
          state.set(fresh);
          System.out.printf("table-server shard %d follows %s (epoch %d): %s%n",
              engine.shardIndex(), primary.endpoint(), epoch, done
                  ? "cut its log after record " + cut + " (the records after it were a deposed"
                  + " primary's), now at record " + fresh.lastLsn() + "; connecting again"
                  : "could not cut its log after record " + cut + " (its snapshot is later):"
                  + " it loads a snapshot");
          System.out.flush();
          throw new IOException("the log was cut after record " + cut + ": rejoining");
        }
        case RESTORE_FILE -> {
          if (!loaded) {
            throw new IOException("a restored table's file came before the snapshot");
          }
          write(state.get().walDirectory(), m.getRestoreFile());
        }
        case RECORD -> {
          if (!loaded) {
            throw new IOException("a log record came before the snapshot");
          }
          closeFile();
          ReplicatedRecord r = m.getRecord();
          if (r.getEpoch() != epoch) {
            throw new IOException("a record of epoch " + r.getEpoch() + " in a stream of epoch "
                + epoch);
          }
          ShardState s = state.get();
          s.applyReplicated(r.getLsn(), r.getRecord());
          s.awaitDurable(r.getLsn()); // as durable as this process's --fsync promises
          if (serving) {
            appliedCrc = recordCrc(r.getRecord());
            appliedCrcLsn = r.getLsn();
            reached(r.getLsn());
          }
          ack(r.getLsn());
        }
        default -> throw new IOException("unknown replication message " + m.getMsgCase());
      }
    }

    private void ack(long lsn) {
      requests.onNext(FollowerMessage.newBuilder().setAckedLsn(lsn).build());
    }

    private void write(Path base, FileChunk c) throws IOException {
      Path p = base.resolve(c.getPath()).normalize();
      if (!p.startsWith(base)) {
        throw new IOException("file " + c.getPath() + " escapes " + base);
      }
      if (!c.getPath().equals(fileName)) {
        closeFile();
        Files.createDirectories(p.getParent());
        file = FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
            StandardOpenOption.TRUNCATE_EXISTING);
        fileName = c.getPath();
      }
      ByteBuffer b = c.getData().asReadOnlyByteBuffer();
      long pos = c.getOffset();
      while (b.hasRemaining()) {
        pos += file.write(b, pos);
      }
    }

    private void closeFile() {
      if (file != null) {
        try {
          file.force(true);
          file.close();
        } catch (IOException ignored) {
          // the snapshot install fsyncs what it moves
        }
        file = null;
        fileName = null;
      }
    }

    /** The stream ended: drop what half arrived and connect again (a full load) in a second. */
    private void failed(Throwable t) {
      generation++; // this stream's later callbacks are ignored
      beats.clear(); // heard on that stream
      if (stopped) {
        return;
      }
      Throwable root = t;
      while (root.getCause() != null) {
        root = root.getCause();
      }
      log.log(Level.INFO, String.format("%s: the stream from %s ended (%s%s); connecting again",
          name(), primary.endpoint(), Status.fromThrowable(t).getDescription() != null
              ? Status.fromThrowable(t).getDescription() : t.toString(),
          root == t ? "" : ": " + root));
      closeFile();
      ManagedChannel c = channel;
      if (c != null) {
        c.shutdownNow();
      }
      try {
        if (incoming != null) {
          Dirs.deleteTree(incoming);
        }
      } catch (IOException ignored) {
        // cleaned at the next start
      }
      if (!stopped) {
        new Thread(() -> {
          try {
            Thread.sleep(1000);
            if (!stopped) {
              apply.execute(this::connect);
            }
          } catch (InterruptedException | java.util.concurrent.RejectedExecutionException e) {
            // stopped
          }
        }, "follow-retry").start();
      }
    }
  }

  /** Leftovers of an earlier process: half-received snapshots, links of snapshots sent. */
  static void cleanUp(Path stateDir) throws IOException {
    if (!Files.isDirectory(stateDir)) {
      return;
    }
    try (Stream<Path> s = Files.list(stateDir)) {
      for (Path p : s.toList()) {
        String n = p.getFileName().toString();
        if (n.startsWith("incoming-") || n.startsWith("replication-")) {
          Dirs.deleteTree(p);
        }
      }
    }
  }



  /** Followers in sync now (metrics). */
  int followersInSync() {
    return (int) followers.values().stream().filter(f -> f.inSync && !f.closed).count();
  }

  /** Records the slowest connected follower lacks (metrics; 0 on a follower). */
  long lagRecords(ShardEngine e) {
    if (!leading || e.journal() == null) {
      return 0;
    }
    long last = e.journal().lastLsn();
    return followers.values().stream().filter(f -> !f.closed)
        .mapToLong(f -> Math.max(0, last - f.acked)).max().orElse(0);
  }

  boolean leading() {
    return leading;
  }

  long epoch() {
    return epoch;
  }
}
