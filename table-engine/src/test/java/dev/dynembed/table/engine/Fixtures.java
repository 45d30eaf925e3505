package dev.dynembed.table.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.OptimizerConfig;
import dev.dynembed.table.v1.TableConfig;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.function.Executable;

public final class Fixtures {
  private Fixtures() {}

  public static TableConfig config(String name, int dim, OptimizerConfig opt) {
    return TableConfigs.normalize(TableConfigs.builder(name, dim).setOptimizer(opt)
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 11)).build());
  }

  public static float[] rows(TableStore t, String... keys) {
    float[] out = new float[keys.length * t.dim()];
    t.findOrInsert(PackedKeys.of(keys), null, out);
    return out;
  }

  /**
   * A counting find_or_insert of {@code keys} through the engine's command path (logged, as a
   * shard's Read call), run by the table's store.
   *
   * @param found bitmap of the keys with a row after it (LSB first), or null
   */
  public static void countedRead(ShardEngine e, String table, String[] keys, byte[] found) {
    e.read(dev.dynembed.table.v1.ReadRequest.newBuilder().addItems(
        dev.dynembed.table.v1.ReadItem.newBuilder().setFindOrInsert(
            dev.dynembed.table.v1.FindOrInsertRequest.newBuilder().setTable(table)
                .setKeys(PackedKeys.of(keys).toProto()).setOmitRows(true))).build(),
        (item, resent) -> {
          var f = item.getFindOrInsert();
          e.get(table).findOrInsert(PackedKeys.fromProto(f.getKeys(), 256, "keys"), null,
              !resent, (float[]) null, found, null);
          return dev.dynembed.table.v1.ReadResult.getDefaultInstance();
        });
  }

  /** A follower: its engine and its durable state. */
  public record Follower(ShardEngine engine, ShardState state) {}

  /**
   * A shard of its own under {@code dir} that applied every record of the log in {@code walDir}
   * as a replica applies its primary's (close its state when done).
   */
  public static Follower follow(java.nio.file.Path dir, java.nio.file.Path walDir)
      throws Exception {
    ShardEngine follower = new ShardEngine(0, 1, dir);
    java.nio.file.Path states = dir.resolve("state");
    java.nio.file.Files.createDirectories(ShardState.root(states, 0));
    ShardState state = ShardState.recover(follower, states, ShardLog.Fsync.ALWAYS, 1L << 30,
        x -> { });
    ShardLog.replay(walDir, state.lastLsn() + 1, (lsn, payload) ->
        state.applyReplicated(lsn, dev.dynembed.table.v1.LogRecord.parseFrom(payload)));
    return new Follower(follower, state);
  }

  /**
   * Checks a logged shard's state three ways, each with {@code check} (named): a follower that
   * applied its log, a restart that replays the log after {@code state} crashed, and a restart
   * from the snapshot that replay took. Leaves no state open.
   *
   * @param dir the shard's data directory
   * @param states the state root {@code state} was recovered from
   */
  public static void recoveries(java.nio.file.Path dir, ShardState state,
      java.nio.file.Path states, java.util.function.BiConsumer<String, ShardEngine> check)
      throws Exception {
    Follower follower = follow(dir.resolve("follower"), state.walDirectory());
    check.accept("a follower", follower.engine());
    follower.state().close(false);
    state.crash();
    ShardEngine again = new ShardEngine(0, 1, dir);
    ShardState replayed = ShardState.recover(again, states, ShardLog.Fsync.ALWAYS, 1L << 30,
        x -> { });
    check.accept("a replay", again);
    replayed.close(true);
    ShardEngine third = new ShardEngine(0, 1, dir);
    ShardState.recover(third, states, ShardLog.Fsync.ALWAYS, 1L << 30, x -> { }).close(false);
    check.accept("the snapshot", third);
  }

  /** A shard with a log: its engine, its durable state and the state's root. */
  public record Logged(ShardEngine engine, ShardState state, java.nio.file.Path states) {}

  /** Shard 0 of 1 under {@code dir}, recovered (empty) with a log synced as {@code fsync}. */
  public static Logged logged(java.nio.file.Path dir, ShardLog.Fsync fsync) throws Exception {
    ShardEngine e = new ShardEngine(0, 1, dir);
    java.nio.file.Path states = dir.resolve("state");
    java.nio.file.Files.createDirectories(ShardState.root(states, 0));
    return new Logged(e, ShardState.recover(e, states, fsync, 1L << 30, x -> { }), states);
  }

  /** {@link #recoveries(java.nio.file.Path, ShardState, java.nio.file.Path,
   * java.util.function.BiConsumer)} of a shard made by {@link #logged}. */
  public static void recoveries(java.nio.file.Path dir, Logged shard,
      java.util.function.BiConsumer<String, ShardEngine> check) throws Exception {
    recoveries(dir, shard.state(), shard.states(), check);
  }

  /** A piece of work a test thread runs, which may throw. */
  public interface Work {
    void run() throws Exception;
  }

  /** Runs each piece of work on its own thread, all at once, and fails with what any threw. */
  public static void concurrently(java.util.List<Work> work) throws InterruptedException {
    java.util.List<Throwable> failures =
        java.util.Collections.synchronizedList(new java.util.ArrayList<>());
    java.util.List<Thread> threads = new java.util.ArrayList<>();
    for (Work w : work) {
      threads.add(new Thread(() -> {
        try {
          w.run();
        } catch (Throwable x) {
          failures.add(x);
        }
      }));
    }
    threads.forEach(Thread::start);
    for (Thread t : threads) {
      t.join();
    }
    assertEquals(java.util.List.of(), failures);
  }

  /** Every stored record (weights, slots, metadata) by key. */
  public static Map<String, TableStore.Record> snapshot(TableStore t) {
    Map<String, TableStore.Record> m = new HashMap<>();
    for (String k : t.keys()) {
      m.put(k, t.record(k));
    }
    return m;
  }

  /** Same keys with bit-identical records (weights, slots, metadata). */
  public static void assertSameRecords(Map<String, TableStore.Record> a, Map<String, TableStore.Record> b) {
    assertEquals(a, b);
  }

  public static TableException assertError(ErrorCode code, String fragment, Executable call) {
    TableException e = assertThrows(TableException.class, call);
    assertEquals(code, e.code(), e.getMessage());
    if (!e.getMessage().contains(fragment)) {
      throw new AssertionError("message '" + e.getMessage() + "' lacks '" + fragment + "'");
    }
    return e;
  }
}
