package dev.dynembed.ops;

import java.util.HashMap;
import java.util.Map;

/**
 * Learning rate, step and sampling stream of the current training step, per table and per thread
 * (set by the trainer before each step; the ops' backward passes run on the caller's thread, so
 * Hogwild threads never see each other's settings).
 */
public final class StepContext {
  private record Ctx(float lr, long step, int stream) {}

  private static final ThreadLocal<Map<String, Ctx>> CTX = ThreadLocal.withInitial(HashMap::new);

  private StepContext() {}

  /** @param learningRate 0 keeps the table's configured rate */
  public static void set(String table, float learningRate, long step) {
    set(table, learningRate, step, 0);
  }

  /**
   * @param stream distinguishes concurrent trainers (e.g. the executor's thread index), so their
   *     samplers draw different candidates at the same step
   */
  public static void set(String table, float learningRate, long step, int stream) {
    CTX.get().put(table, new Ctx(learningRate, step, stream));
  }

  static boolean has(String table) {
    return CTX.get().containsKey(table);
  }

  static float learningRate(String table) {
    Ctx c = CTX.get().get(table);
    return c == null ? 0f : c.lr();
  }

  static long step(String table) {
    Ctx c = CTX.get().get(table);
    return c == null ? 0 : c.step();
  }

  static int stream(String table) {
    Ctx c = CTX.get().get(table);
    return c == null ? 0 : c.stream();
  }
}
