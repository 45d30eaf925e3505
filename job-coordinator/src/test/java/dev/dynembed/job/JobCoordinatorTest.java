package dev.dynembed.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Against a real etcd on loopback (Debian's etcd-server, installed by .ci/run). */
@Tag("etcd")
class JobCoordinatorTest {
  static LocalEtcd etcd;
  static final JobCoordinator.Options FAST = new JobCoordinator.Options(Duration.ofSeconds(2),
      Duration.ofSeconds(20), Duration.ofSeconds(20));
  final ExecutorService pool = Executors.newCachedThreadPool();

  @BeforeAll
  static void start() {
    etcd = new LocalEtcd();
  }

  @AfterAll
  static void stop() {
    etcd.close();
  }

  private List<JobCoordinator> joinAll(String job, int n, JobCoordinator.Options o)
      throws Exception {
    List<Future<JobCoordinator>> f = new java.util.ArrayList<>();
    for (int i = 0; i < n; i++) {
      f.add(pool.submit(() -> JobCoordinator.join(etcd.endpoint(), job, n, Map.of("dim", "8"),
          o)));
    }
    List<JobCoordinator> all = new java.util.ArrayList<>();
    for (Future<JobCoordinator> c : f) {
      all.add(c.get());
    }
    all.sort(java.util.Comparator.comparingInt(JobCoordinator::index));
    return all;
  }

  @Test
  void workersGetDistinctIndicesAndBarriersExchangePayloads() throws Exception {
    List<JobCoordinator> w = joinAll("payloads", 3, FAST);
    Set<Integer> indices = new TreeSet<>();
    for (JobCoordinator c : w) {
      indices.add(c.index());
      assertEquals(3, c.workers());
    }
    assertEquals(Set.of(0, 1, 2), indices);
    assertTrue(w.get(0).leader());
    for (int round = 0; round < 3; round++) {
      String name = "round-" + round;
      List<Future<Map<Integer, String>>> got = new java.util.ArrayList<>();
      for (JobCoordinator c : w) {
        int r = round;
        got.add(pool.submit(() -> c.barrier(name, "w" + c.index() + "r" + r)));
      }
      for (Future<Map<Integer, String>> g : got) {
        assertEquals(Map.of(0, "w0r" + round, 1, "w1r" + round, 2, "w2r" + round), g.get());
      }
    }
    for (JobCoordinator c : w) {
      c.finish();
    }
    // finished: the name is free for a new run
    List<JobCoordinator> again = joinAll("payloads", 2, FAST);
    assertEquals(2, again.size());
    again.forEach(JobCoordinator::finish);
  }

  /** Waits (up to 10 s) until a worker of {@code job} is a member in etcd. */
  private static void awaitMember(String job) throws Exception {
    awaitKey(job, "/members/");
  }

  /** Waits (up to 10 s) until a key of {@code job} contains {@code part}. */
  private static void awaitKey(String job, String part) throws Exception {
    try (io.etcd.jetcd.Client c = io.etcd.jetcd.Client.builder().endpoints(
        "http://" + etcd.endpoint()).build()) {
      io.etcd.jetcd.ByteSequence prefix = io.etcd.jetcd.ByteSequence.from("/dynembed/jobs/" + job
          + "/", java.nio.charset.StandardCharsets.UTF_8);
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (System.nanoTime() < deadline) {
        var keys = c.getKVClient().get(prefix, io.etcd.jetcd.options.GetOption.builder()
            .isPrefix(true).withKeysOnly(true).build()).get().getKvs();
        if (keys.stream().anyMatch(kv -> kv.getKey().toString().contains(part))) {
          return;
        }
        Thread.sleep(20);
      }
      throw new AssertionError("job " + job + " has no key with " + part + " after 10 s");
    }
  }

  @Test
  void aWorkerWithOtherSettingsIsRefusedWithTheDifferenceNamed() throws Exception {
    Future<JobCoordinator> first = pool.submit(() -> JobCoordinator.join(etcd.endpoint(),
        "settings", 2, Map.of("dim", "8", "window", "5"), FAST));
    awaitMember("settings"); // the first worker's settings are the job's before the second asks
    JobException e = assertThrows(JobException.class, () -> JobCoordinator.join(etcd.endpoint(),
        "settings", 2, Map.of("dim", "16", "window", "5"), FAST));
    assertTrue(e.getMessage().contains("dim=job has 8, this worker 16"), e.getMessage());
    JobCoordinator second = JobCoordinator.join(etcd.endpoint(), "settings", 2,
        Map.of("dim", "8", "window", "5"), FAST);
    first.get().finish();
    second.finish();
  }

  @Test
  void aWorkerWhoseLeaseExpiresStopsTheJobAndTheNextRunStartsClean() throws Exception {
    List<JobCoordinator> w = joinAll("crash", 2, FAST);
    w.get(1).abandon(); // as kill -9 would: no leaving, the lease runs out after 2 s
    long t0 = System.nanoTime();
    JobException e = assertThrows(JobException.class, () -> w.get(0).barrier("round-0", ""));
    double seconds = (System.nanoTime() - t0) / 1e9;
    assertTrue(e.getMessage().contains("worker 1 left the job: its lease expired"),
        e.getMessage());
    assertTrue(seconds < 10, "detected after " + seconds + " s");
    w.get(0).close();
    // the stopped generation is closed; a restarted job opens the next one
    List<JobCoordinator> again = joinAll("crash", 2, FAST);
    Future<Map<Integer, String>> other = pool.submit(() -> again.get(1).barrier("x", "b"));
    assertEquals(Map.of(0, "a", 1, "b"), again.get(0).barrier("x", "a"));
    assertEquals(Map.of(0, "a", 1, "b"), other.get());
    again.forEach(JobCoordinator::close);
  }

  static final JobCoordinator.Options ELASTIC = new JobCoordinator.Options(Duration.ofSeconds(2),
      Duration.ofSeconds(20), Duration.ofSeconds(20), true);

  /** Every worker of {@code w} at barrier {@code name} at once; their answers by index. */
  private Map<Integer, Map<Integer, String>> all(List<JobCoordinator> w, String name)
      throws Exception {
    Map<Integer, Future<Map<Integer, String>>> f = new java.util.TreeMap<>();
    for (JobCoordinator c : w) {
      f.put(c.index(), pool.submit(() -> c.barrier(name, "w" + c.index())));
    }
    Map<Integer, Map<Integer, String>> got = new java.util.TreeMap<>();
    for (Map.Entry<Integer, Future<Map<Integer, String>>> e : f.entrySet()) {
      got.put(e.getKey(), e.getValue().get());
    }
    return got;
  }

  @Test
  void anElasticJobGoesOnWithoutAWorkerThatLeftAndTheLowestRemainingIndexLeads()
      throws Exception {
    List<JobCoordinator> w = joinAll("elastic", 3, ELASTIC);
    assertTrue(w.get(0).elastic());
    all(w, "round-0");
    assertEquals(List.of(0, 1, 2), w.get(1).participants());
    w.get(0).abandon(); // the leader is killed: its lease runs out after 2 s
    long t0 = System.nanoTime();
    Map<Integer, Map<Integer, String>> got = all(w.subList(1, 3), "round-1");
    double seconds = (System.nanoTime() - t0) / 1e9;
    assertEquals(Map.of(1, "w1", 2, "w2"), got.get(1));
    assertEquals(got.get(1), got.get(2));
    assertTrue(seconds < 10, "went on after " + seconds + " s");
    for (JobCoordinator c : w.subList(1, 3)) {
      assertEquals(List.of(1, 2), c.participants());
      assertEquals(Set.of(0), c.departed().keySet());
      assertTrue(c.departed().get(0).contains("lease expired before barrier round-1"));
      assertTrue(c.failure().isEmpty(), "the job did not stop");
    }
    assertTrue(w.get(1).leader() && !w.get(2).leader(), "worker 1 leads once 0 is gone");
    // a worker that arrives and then dies is in that barrier, and out of the next
    Future<Map<Integer, String>> early = pool.submit(() -> w.get(2).barrier("round-2-early",
        "w2"));
    awaitKey("elastic", "/barriers/round-2-early/2"); // it has arrived, and waits for worker 1
    w.get(2).abandon();
    assertThrows(java.util.concurrent.ExecutionException.class, early::get); // its client closed
    assertEquals(Map.of(1, "w1", 2, "w2"), w.get(1).barrier("round-2-early", "w1"));
    assertEquals(Map.of(1, "w1"), w.get(1).barrier("round-3", "w1"));
    assertEquals(List.of(1), w.get(1).participants());
    w.get(1).finish(); // the last worker in the job clears it: the name is free again
    List<JobCoordinator> again = joinAll("elastic", 2, ELASTIC);
    assertEquals(Map.of(0, "w0", 1, "w1"), all(again, "x").get(0));
    again.forEach(JobCoordinator::finish);
  }

  @Test
  void dealtOutItemsOfAWorkerThatLeftAreDealtAgainOverTheOthers() throws Exception {
    List<JobCoordinator> w = joinAll("deal", 3, ELASTIC);
    all(w, "round-0");
    w.get(2).abandon(); // items 2 and 5 of 7 go to worker 2, which never works them
    Map<Integer, Future<List<List<Integer>>>> worked = new java.util.TreeMap<>();
    Map<Integer, Future<Integer>> again = new java.util.TreeMap<>();
    for (JobCoordinator c : w.subList(0, 2)) {
      List<List<Integer>> passes = new java.util.concurrent.CopyOnWriteArrayList<>();
      again.put(c.index(), pool.submit(() -> c.dealOut("items", 7, passes::add)));
      worked.put(c.index(), pool.submit(() -> {
        again.get(c.index()).get();
        return passes;
      }));
    }
    assertEquals(List.of(List.of(0, 3, 6), List.of(2)), worked.get(0).get());
    assertEquals(List.of(List.of(1, 4), List.of(5)), worked.get(1).get());
    assertEquals(2, again.get(0).get());
    assertEquals(List.of(0, 1), w.get(0).participants());
    w.subList(0, 2).forEach(JobCoordinator::finish);
  }

  @Test
  void aWorkerDroppedFromAnElasticJobIsToldSoAndDoesNotStopTheOthers() throws Exception {
    List<JobCoordinator> w = joinAll("dropped", 2, ELASTIC);
    all(w, "round-0");
    w.get(1).loseLease(); // paused or cut off past its TTL, then back
    JobException e = assertThrows(JobException.class, () -> w.get(1).barrier("round-1", "w1"));
    assertTrue(e.getMessage().contains("worker 1 was dropped from job dropped: its lease expired"),
        e.getMessage());
    w.get(1).fail(e); // what a trainer does with an exception: must not stop the job
    assertEquals(Map.of(0, "w0"), w.get(0).barrier("round-1", "w0"));
    assertTrue(w.get(0).failure().isEmpty(), "the job goes on");
    w.get(1).close();
    w.get(0).finish();
  }

  @Test
  void aWorkerJoinsARunningElasticJobWhenTheLeaderAdmitsIt() throws Exception {
    List<JobCoordinator> w = joinAll("grow", 2, ELASTIC);
    all(w, "round-0");
    JobCoordinator late = JobCoordinator.join(etcd.endpoint(), "grow", 2, Map.of("dim", "8"),
        ELASTIC);
    assertTrue(late.joining());
    assertEquals(2, late.index(), "the first index past the job's 2");
    assertThrows(IllegalStateException.class, () -> late.barrier("x", ""));
    Future<Map<String, String>> admitted = pool.submit(late::awaitAdmission);
    // the barrier after a round admits it; only the leader's supplier is asked
    java.util.concurrent.atomic.AtomicInteger asked = new java.util.concurrent.atomic.AtomicInteger();
    Map<Integer, Future<Map<Integer, String>>> f = new java.util.TreeMap<>();
    for (JobCoordinator c : w) {
      f.put(c.index(), pool.submit(() -> c.barrier("saved-0", "", () -> {
        asked.incrementAndGet();
        return Map.of("epoch", "1", "next_split", "4");
      })));
    }
    for (Future<Map<Integer, String>> g : f.values()) {
      assertEquals(Set.of(0, 1), g.get().keySet());
    }
    assertEquals(1, asked.get());
    Map<String, String> state = admitted.get();
    assertEquals("1", state.get("epoch"));
    assertEquals("4", state.get("next_split"));
    assertTrue(!late.joining());
    List<JobCoordinator> three = List.of(w.get(0), w.get(1), late);
    for (JobCoordinator c : three) {
      assertEquals(List.of(0, 1, 2), c.participants());
    }
    assertEquals(Map.of(0, "w0", 1, "w1", 2, "w2"), all(three, "round-1").get(2));
    // the joiner is a participant like the others: when it leaves, the others go on
    late.abandon();
    assertEquals(Map.of(0, "w0", 1, "w1"), all(w, "round-2").get(0));
    w.forEach(JobCoordinator::finish);
  }

  @Test
  void aWorkerThatComesBackWithItsIndexIsAdmittedUnderIt() throws Exception {
    List<JobCoordinator> w = joinAll("back", 2, ELASTIC);
    all(w, "round-0");
    w.get(1).abandon();
    assertEquals(Map.of(0, "w0"), w.get(0).barrier("round-1", "w0")); // once its lease expired
    JobCoordinator back = JobCoordinator.join(etcd.endpoint(), "back", 2, 1, Map.of("dim", "8"),
        ELASTIC);
    assertTrue(back.joining());
    assertEquals(1, back.index(), "its own index back");
    Future<Map<String, String>> admitted = pool.submit(back::awaitAdmission);
    w.get(0).barrier("saved-1", "", () -> Map.of("epoch", "0"));
    assertEquals("0", admitted.get().get("epoch"));
    assertEquals(List.of(0, 1), w.get(0).participants());
    assertEquals(List.of(0, 1), back.participants());
    assertEquals(Map.of(0, "w0", 1, "w1"), all(List.of(w.get(0), back), "round-2").get(1));
    // an index whose worker is alive is not taken (after waiting out a lease, in case it died)
    JobException e = assertThrows(JobException.class, () -> JobCoordinator.join(
        etcd.endpoint(), "back", 2, 0, Map.of("dim", "8"), ELASTIC));
    assertTrue(e.getMessage().contains("job back already has a live worker 0"), e.getMessage());
    w.get(0).finish();
    back.finish();
  }

  @Test
  void aWorkerWaitingToJoinAJobThatEndsIsToldSo() throws Exception {
    List<JobCoordinator> w = joinAll("ending", 2, ELASTIC);
    all(w, "round-0");
    JobCoordinator late = JobCoordinator.join(etcd.endpoint(), "ending", 2, Map.of("dim", "8"),
        ELASTIC);
    Future<Map<String, String>> admitted = pool.submit(late::awaitAdmission);
    w.forEach(JobCoordinator::finish); // the last round ended without admitting anyone
    java.util.concurrent.ExecutionException e = assertThrows(
        java.util.concurrent.ExecutionException.class, admitted::get);
    assertTrue(e.getCause().getMessage().contains("job ending ended before it admitted worker 2"),
        e.getCause().getMessage());
    late.close();
  }

  @Test
  void elasticOrNotIsASettingEveryWorkerMustShare() throws Exception {
    Future<JobCoordinator> first = pool.submit(() -> JobCoordinator.join(etcd.endpoint(),
        "mixed", 2, Map.of("dim", "8"), ELASTIC));
    awaitMember("mixed");
    JobException e = assertThrows(JobException.class, () -> JobCoordinator.join(etcd.endpoint(),
        "mixed", 2, Map.of("dim", "8"), FAST));
    assertTrue(e.getMessage().contains("elastic=job has true, this worker false"),
        e.getMessage());
    JobCoordinator second = JobCoordinator.join(etcd.endpoint(), "mixed", 2, Map.of("dim", "8"),
        ELASTIC);
    first.get().finish();
    second.finish();
  }

  /**
   * Workers restarting a stopped job together race to open its next generation; one that read
   * the old generation's number just before another opened the next must not claim an index in
   * the old one (its prefix deleted), where it would wait alone (seen once in CI: "workers [1]
   * did not join within 19 s"). Each run here opens a generation with both workers in it.
   */
  @Test
  void workersRestartingAStoppedJobTogetherJoinOneGeneration() throws Exception {
    for (int run = 0; run < 8; run++) {
      List<JobCoordinator> w = joinAll("rejoin", 2, FAST);
      assertEquals(0, w.get(0).index());
      assertEquals(1, w.get(1).index());
      w.get(1).fail(new IllegalStateException("stopping run " + run));
      w.forEach(JobCoordinator::close);
    }
  }

  /** The race above made deterministic: writes for a generation that has moved on are refused. */
  @Test
  void claimsAndSettingsForAGenerationThatMovedOnAreRefused() throws Exception {
    try (io.etcd.jetcd.Client client = io.etcd.jetcd.Client.builder()
        .endpoints(JobCoordinator.parseEndpoints(etcd.endpoint())).build()) {
      io.etcd.jetcd.KV kv = client.getKVClient();
      String root = "/dynembed/test/stale/";
      kv.put(bytes(root + "gen"), bytes("2")).get(); // generation 2 is current
      io.etcd.jetcd.op.Cmp stale = genIs(root, 1);
      assertEquals(JobCoordinator.GENERATION_MOVED,
          JobCoordinator.claimIndex(kv, root + "1/", 2, -1, 0, stale));
      assertTrue(!JobCoordinator.checkSettings(kv, root + "1/", "stale", Map.of("dim", "8"),
          stale));
      assertEquals(0, kv.get(bytes(root + "1/"), io.etcd.jetcd.options.GetOption.builder()
          .isPrefix(true).build()).get().getCount(), "nothing written under generation 1");
      io.etcd.jetcd.op.Cmp current = genIs(root, 2);
      assertTrue(JobCoordinator.checkSettings(kv, root + "2/", "stale", Map.of("dim", "8"),
          current));
      assertEquals(0, JobCoordinator.claimIndex(kv, root + "2/", 2, -1, 0, current));
      assertEquals(1, JobCoordinator.claimIndex(kv, root + "2/", 2, -1, 0, current));
      assertEquals(-1, JobCoordinator.claimIndex(kv, root + "2/", 2, -1, 0, current));
    }
  }

  private static io.etcd.jetcd.ByteSequence bytes(String s) {
    return io.etcd.jetcd.ByteSequence.from(s, java.nio.charset.StandardCharsets.UTF_8);
  }

  private static io.etcd.jetcd.op.Cmp genIs(String root, long gen) {
    return new io.etcd.jetcd.op.Cmp(bytes(root + "gen"), io.etcd.jetcd.op.Cmp.Op.EQUAL,
        io.etcd.jetcd.op.CmpTarget.value(bytes(String.valueOf(gen))));
  }

  @Test
  void aBarrierNamesTheWorkersThatDidNotArriveByItsDeadline() throws Exception {
    JobCoordinator.Options shortBarrier = new JobCoordinator.Options(Duration.ofSeconds(5),
        Duration.ofSeconds(20), Duration.ofSeconds(1));
    List<JobCoordinator> w = joinAll("deadline", 2, shortBarrier);
    JobException e = assertThrows(JobException.class, () -> w.get(0).barrier("checkpoint-1", ""));
    assertTrue(e.getMessage().contains("workers [1] did not reach barrier checkpoint-1 within 1 s"),
        e.getMessage());
    // the other worker learns why the job stopped
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (w.get(1).failure().isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertTrue(w.get(1).failure().orElse("").contains("did not reach barrier checkpoint-1"),
        w.get(1).failure().toString());
    assertThrows(JobException.class, () -> w.get(1).barrier("checkpoint-1", ""));
    w.forEach(JobCoordinator::close);
  }

  @Test
  void aFullJobRefusesAnotherWorker() throws Exception {
    Future<JobCoordinator> a = pool.submit(() -> JobCoordinator.join(etcd.endpoint(), "full", 1,
        Map.of(), FAST));
    JobCoordinator only = a.get();
    JobException e = assertThrows(JobException.class, () -> JobCoordinator.join(etcd.endpoint(),
        "full", 1, Map.of(), FAST));
    assertTrue(e.getMessage().contains("is running with all of its 1 workers"), e.getMessage());
    only.finish();
  }

  @Test
  void badAddressesAndNamesAreRefusedClearly() {
    assertTrue(assertThrows(JobException.class, () -> JobCoordinator.join("nohost", "j", 2,
        Map.of(), FAST)).getMessage().contains("must be etcd's host:port"));
    assertTrue(assertThrows(JobException.class, () -> JobCoordinator.join(etcd.endpoint(),
        "a/b", 2, Map.of(), FAST)).getMessage().contains("job name (--job)"));
  }
}
