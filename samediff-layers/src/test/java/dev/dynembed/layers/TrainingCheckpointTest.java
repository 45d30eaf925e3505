package dev.dynembed.layers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A save that dies at any of its steps leaves the previous or the new checkpoint readable, never
 * neither, and never a mix: the restored dense variables, table rows and step are exactly those
 * of one save. (The "crash" is an exception thrown from the step's hook: everything written
 * before it stays, nothing after it happens.)
 */
class TrainingCheckpointTest {
  static final String[] PROBE = {"w0", "w3", "w17", "label-2"};

  /** What a checkpoint must bring back: step, the dense variable, some table rows. */
  record State(long step, float[] w, float[] words, float[] labels) {
    static State of(Trainer t, TableClient c) {
      return new State(t.step(), t.graph().getVariable("w").getArr().dup().reshape(-1).toFloatVector(),
          c.openTable("words").find(PROBE).rows(), c.openTable("labels").find(PROBE).rows());
    }

    void assertSame(State o, String what) {
      assertEquals(step, o.step, what + ": step");
      assertArrayEquals(w, o.w, what + ": dense variable w");
      assertArrayEquals(words, o.words, what + ": rows of 'words'");
      assertArrayEquals(labels, o.labels, what + ": rows of 'labels'");
    }
  }

  @AfterEach
  void noCrash() {
    TrainingCheckpoint.crashPoint = p -> { };
  }

  private static void train(Trainer t, Random rnd, int steps) {
    for (int i = 0; i < steps; i++) {
      t.step(QuickStartTest.batch(rnd), 0f);
    }
  }

  private static State restored(Path ckpt, Path scratch) {
    try (TableClient c = TableClients.inProcess(scratch)) {
      Trainer t = QuickStartTest.readmeModel(c);
      t.restore(ckpt);
      return State.of(t, c);
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"dense written", "tables written", "manifest written",
      "checkpoint renamed", "pointer written", "pointer renamed", "cleaned up"})
  void saveDyingAtAnyStep_leavesTheOldOrTheNewCheckpoint(String point, @TempDir Path dir)
      throws Exception {
    Path ckpt = dir.resolve("ckpt");
    State old;
    State next;
    try (TableClient c = TableClients.inProcess(dir.resolve("live"))) {
      Trainer t = QuickStartTest.readmeModel(c);
      Random rnd = new Random(5);
      train(t, rnd, 4);
      t.save(ckpt);
      old = State.of(t, c);
      train(t, rnd, 3);
      next = State.of(t, c);
      TrainingCheckpoint.crashPoint = p -> {
        if (p.equals(point)) {
          throw new IllegalStateException("crash at " + p);
        }
      };
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> t.save(ckpt));
      assertEquals("crash at " + point, e.getMessage());
      TrainingCheckpoint.crashPoint = p -> { };

      boolean renamed = point.equals("pointer renamed") || point.equals("cleaned up");
      State got = restored(ckpt, dir.resolve("r1"));
      (renamed ? next : old).assertSame(got, "after a crash at '" + point + "'");

      // the next save after the crash works, and the directory holds at most 2 checkpoints
      train(t, rnd, 2);
      State third = State.of(t, c);
      t.save(ckpt);
      third.assertSame(restored(ckpt, dir.resolve("r2")), "the save after the crash");
      try (Stream<Path> files = Files.list(ckpt)) {
        List<String> names = files.map(p -> p.getFileName().toString()).sorted().toList();
        assertEquals(3, names.size(), "CURRENT and the last 2 checkpoints: " + names);
        assertTrue(names.contains("CURRENT"), names.toString());
        assertTrue(names.stream().noneMatch(n -> n.endsWith(".tmp")), names.toString());
      }
    }
  }

  @Test
  void olderLayout_isReadAndReplacedByTheFirstSave(@TempDir Path dir) throws Exception {
    Path ckpt = dir.resolve("ckpt");
    try (TableClient c = TableClients.inProcess(dir.resolve("live"))) {
      Trainer t = QuickStartTest.readmeModel(c);
      Random rnd = new Random(6);
      train(t, rnd, 3);
      t.save(ckpt);
      State s = State.of(t, c);
      // an older build wrote the checkpoint's files straight into the directory
      Path only = Trainer.latest(ckpt);
      try (Stream<Path> files = Files.list(only)) {
        for (Path p : files.toList()) {
          Files.move(p, ckpt.resolve(p.getFileName()));
        }
      }
      Files.delete(only);
      Files.delete(ckpt.resolve(TrainingCheckpoint.CURRENT));
      s.assertSame(restored(ckpt, dir.resolve("r1")), "older layout");
      train(t, rnd, 1);
      State s2 = State.of(t, c);
      t.save(ckpt);
      s2.assertSame(restored(ckpt, dir.resolve("r2")), "after the first save");
      assertTrue(!Files.exists(ckpt.resolve(TrainingCheckpoint.MANIFEST)), "old files gone");
    }
  }

  @Test
  void noCheckpoint_isAClearError(@TempDir Path dir) {
    Exception e = assertThrows(RuntimeException.class, () -> Trainer.latest(dir));
    assertTrue(e.getMessage().contains("no training checkpoint in"), e.getMessage());
    assertTrue(!Trainer.hasCheckpoint(dir));
  }
}
