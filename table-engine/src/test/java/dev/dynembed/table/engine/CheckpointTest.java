package dev.dynembed.table.engine;

import static dev.dynembed.table.engine.Fixtures.assertError;
import static dev.dynembed.table.engine.Fixtures.snapshot;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.CheckpointFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointTest {
  @TempDir Path dir;
  private ShardEngine engine;
  private CheckpointFile file;
  private Map<String, TableStore.Record> saved;

  @BeforeEach
  void train() {
    engine = new ShardEngine(0, 1, dir);
    TableStore t = engine.create(TableConfigs.builder("emb", 8)
        .setOptimizer(TableConfigs.ftrl(0.1f, 0f, 0.01f, 0.01f, 0f)).build());
    Random rnd = new Random(1);
    for (int step = 1; step <= 50; step++) {
      String[] keys = new String[64];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = "key" + rnd.nextInt(3000) + (i % 5 == 0 ? "-日本" : "");
      }
      float[] g = new float[keys.length * 8];
      for (int i = 0; i < g.length; i++) {
        g[i] = (float) rnd.nextGaussian();
      }
      t.findOrInsert(PackedKeys.of(keys), null, new float[g.length]);
      t.applyGradients(PackedKeys.of(keys), g, 0f, step);
    }
    file = engine.save("emb", "ckpt", 50);
    saved = snapshot(t);
  }

  @Test
  void saveRestore_sameShardCount_identicalRowsSlotsAndMetadata() {
    assertEquals(saved.size(), file.getKeys());
    ShardEngine other = new ShardEngine(0, 1, dir);
    assertEquals(saved.size(), other.restore("emb", "ckpt", List.of(file)));
    Fixtures.assertSameRecords(saved, snapshot(other.get("emb")));
    assertEquals(engine.get("emb").config(), other.get("emb").config());
  }

  @Test
  void restore_intoThreeShards_everyKeyOnItsOwnShardOnce() {
    Map<String, TableStore.Record> merged = new HashMap<>();
    for (int s = 0; s < 3; s++) {
      ShardEngine shard = new ShardEngine(s, 3, dir);
      shard.restore("emb", "ckpt", List.of(file));
      for (Map.Entry<String, TableStore.Record> e : snapshot(shard.get("emb")).entrySet()) {
        assertEquals(s, KeyHashing.shardOf(e.getKey(), 3));
        assertTrue(merged.put(e.getKey(), e.getValue()) == null);
      }
    }
    Fixtures.assertSameRecords(saved, merged);
  }

  interface Damage {
    void apply(Path file) throws IOException;
  }

  private void corruptAndExpect(String fragment, Damage damage) throws IOException {
    ShardEngine other = new ShardEngine(0, 1, dir);
    TableStore live = other.create(TableConfigs.builder("emb", 8).build());
    Fixtures.rows(live, "live-key");
    Map<String, TableStore.Record> before = snapshot(live);
    damage.apply(dir.resolve("ckpt").resolve(file.getName()));
    assertError(ErrorCode.DATA_LOSS, fragment, () -> other.restore("emb", "ckpt", List.of(file)));
    Fixtures.assertSameRecords(before, snapshot(other.get("emb")));
  }

  @Test
  void restore_flippedByte_isRefusedAndLiveTableUnchanged() throws IOException {
    corruptAndExpect("corrupt", p -> {
      byte[] b = Files.readAllBytes(p);
      b[b.length / 2] ^= 0x40;
      Files.write(p, b);
    });
  }

  @Test
  void restore_truncatedFile_isRefused() throws IOException {
    corruptAndExpect("truncated", p -> {
      byte[] b = Files.readAllBytes(p);
      Files.write(p, java.util.Arrays.copyOf(b, b.length - 100));
    });
  }

  @Test
  void restore_missingFile_isRefused() throws IOException {
    corruptAndExpect("is missing", Files::delete);
  }

  @Test
  void readFile_truncatedWithMatchingManifest_isRefusedByTrailer() throws IOException {
    // a manifest entry rewritten to match the damaged file: the format itself must catch it
    Path p = dir.resolve("ckpt").resolve(file.getName());
    byte[] b = Files.readAllBytes(p);
    byte[] cut = java.util.Arrays.copyOf(b, b.length - 20);
    Files.write(p, cut);
    CheckpointFile forged = file.toBuilder().setBytes(cut.length)
        .setCrc32C((int) CheckpointIo.crcOfFile(p)).build();
    assertError(ErrorCode.DATA_LOSS, "truncated", () ->
        new ShardEngine(0, 1, dir).restore("emb", "ckpt", List.of(forged)));
  }

  @Test
  void save_staleSamplerSnapshot_liveAndRestoredTablesDrawAlike() {
    ShardEngine live = new ShardEngine(0, 1, dir);
    TableStore t = live.create(TableConfigs.builder("samp", 2).build());
    for (int i = 0; i < 1000; i++) {
      t.findOrInsert(PackedKeys.of("k" + i), new int[] {100}, new float[2]);
    }
    live.sample("samp", PackedKeys.of(), 10, dev.dynembed.table.v1.SamplerKind.UNIGRAM_SAMPLER,
        1f, 1); // snapshot built
    t.findOrInsert(PackedKeys.of("k0"), new int[] {500}, new float[2]); // +0.5%: snapshot stale
    CheckpointFile f = live.save("samp", "ck2", 1);
    ShardEngine restored = new ShardEngine(0, 1, dir);
    restored.restore("samp", "ck2", List.of(f));
    SampleCandidates a = live.sample("samp", PackedKeys.of("k0"), 300,
        dev.dynembed.table.v1.SamplerKind.UNIGRAM_SAMPLER, 1f, 2);
    SampleCandidates b = restored.sample("samp", PackedKeys.of("k0"), 300,
        dev.dynembed.table.v1.SamplerKind.UNIGRAM_SAMPLER, 1f, 2);
    assertEquals(List.of(a.keys().toStrings()), List.of(b.keys().toStrings()));
    assertEquals(600.0 / 100_500.0, a.probability()[0], 1e-12); // the saved counts, not stale ones
    org.junit.jupiter.api.Assertions.assertArrayEquals(a.probability(), b.probability());
  }

  @Test
  void restore_underAnotherTableName_isRefused() {
    assertError(ErrorCode.FAILED_PRECONDITION, "holds table 'emb', not 'other'",
        () -> new ShardEngine(0, 1, dir).restore("other", "ckpt", List.of(file)));
  }
}
