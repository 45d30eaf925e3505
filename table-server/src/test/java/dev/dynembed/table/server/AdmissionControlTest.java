package dev.dynembed.table.server;

import dev.dynembed.table.engine.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.Rows;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.ApplyGradientsRequest;
import dev.dynembed.table.v1.FindOrInsertRequest;
import dev.dynembed.table.v1.FindRequest;
import dev.dynembed.table.v1.ReadItem;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.WriteRequest;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A shard's memory budget and table cap: refused before anything changes, reads go on. */
class AdmissionControlTest {
  @TempDir Path dir;

  private static String[] keys(int from, int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = "key-" + (from + i);
    }
    return k;
  }

  private static ReadRequest insert(String table, String[] keys) {
    return ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setFindOrInsert(
        FindOrInsertRequest.newBuilder().setTable(table).setKeys(PackedKeys.of(keys).toProto())
            .setOmitRows(true))).build();
  }

  @Test
  void memoryBudget_refusesGrowthBeforeAnyChange_andReadsGoOn() throws Exception {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    TableGrpcService service = new TableGrpcService(engine);
    engine.create(TableConfigs.builder("emb", 64).setOptimizer(TableConfigs.adagrad(0.1f, 0.1f,
        1e-7f)).build()); // 64 x 2 floats + metadata: ~570 bytes a key
    engine.setMemoryBudget(2L << 20);
    int batch = 1000;
    int inserted = 0;
    TableStore t = engine.get("emb");
    while (true) {
      String[] k = keys(inserted, batch);
      long before = t.size();
      try {
        engine.read(insert("emb", k), service::runItem);
      } catch (dev.dynembed.table.common.TableException e) {
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
        assertTrue(e.getMessage().contains("memory budget of 2 MiB reached"), e.getMessage());
        assertTrue(e.getMessage().contains("nothing was changed"), e.getMessage());
        assertEquals(before, t.size()); // the refused batch created no row
        break;
      }
      inserted += batch;
      assertTrue(inserted < 100_000, "the budget never refused");
    }
    assertTrue(engine.bytesInUse() <= 2L << 20, engine.bytesInUse() + " bytes in use");
    assertTrue(inserted >= 2000, "refused too early: " + inserted + " keys");
    // gradients for new keys are refused too; for existing keys they go through
    float[] g = new float[batch * 64];
    String[] fresh = keys(inserted, batch);
    Fixtures.assertError(ErrorCode.RESOURCE_EXHAUSTED, "memory budget", () -> engine.write(
        WriteRequest.newBuilder().addItems(ApplyGradientsRequest.newBuilder().setTable("emb")
            .setKeys(PackedKeys.of(fresh).toProto())
            .setGradients(Rows.encode(g))).build(), ShardState::checkWrite));
    // reads of existing rows go on
    engine.read(ReadRequest.newBuilder().addItems(ReadItem.newBuilder().setFind(
        FindRequest.newBuilder().setTable("emb").setKeys(PackedKeys.of(keys(0, 10)).toProto())))
        .build(), service::runItem);
    // a larger budget lets the same call through
    engine.setMemoryBudget(64L << 20);
    engine.read(insert("emb", keys(inserted, batch)), service::runItem);
    assertEquals(inserted + batch, t.size());
  }

  @Test
  void tableCap_refusesTheNextTable() {
    ShardEngine engine = new ShardEngine(0, 1, dir);
    engine.setMaxTables(2);
    engine.create(TableConfigs.builder("a", 4).build());
    engine.create(TableConfigs.builder("b", 4).build());
    engine.create(TableConfigs.builder("b", 4).build()); // the same table again: fine
    Fixtures.assertError(ErrorCode.RESOURCE_EXHAUSTED, "maximum of 2 tables",
        () -> engine.create(TableConfigs.builder("c", 4).build()));
    assertEquals(2, engine.tables().size());
  }
}
