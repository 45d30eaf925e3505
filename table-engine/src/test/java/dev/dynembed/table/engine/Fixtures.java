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
