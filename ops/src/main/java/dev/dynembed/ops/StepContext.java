package dev.dynembed.ops;

import java.util.concurrent.ConcurrentHashMap;

/** Learning rate and step of the current training step, per table (set by the trainer). */
public final class StepContext {
  private record Ctx(float lr, long step) {}

  private static final ConcurrentHashMap<String, Ctx> CTX = new ConcurrentHashMap<>();

  private StepContext() {}

  /** @param learningRate 0 keeps the table's configured rate */
  public static void set(String table, float learningRate, long step) {
    CTX.put(table, new Ctx(learningRate, step));
  }

  static boolean has(String table) {
    return CTX.containsKey(table);
  }

  static float learningRate(String table) {
    Ctx c = CTX.get(table);
    return c == null ? 0f : c.lr();
  }

  static long step(String table) {
    Ctx c = CTX.get(table);
    return c == null ? 0 : c.step();
  }
}
