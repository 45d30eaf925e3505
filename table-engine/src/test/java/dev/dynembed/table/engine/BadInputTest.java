package dev.dynembed.table.engine;

import static dev.dynembed.table.engine.Fixtures.assertError;
import static dev.dynembed.table.engine.Fixtures.rows;
import static dev.dynembed.table.engine.Fixtures.snapshot;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.SamplerKind;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every bad input gets a clear error and leaves the stored rows exactly as they were. */
class BadInputTest {
  @TempDir Path dir;
  private ShardEngine engine;
  private TableStore table;
  private Map<String, TableStore.Record> before;

  @BeforeEach
  void setUp() {
    engine = new ShardEngine(0, 1, dir);
    table = engine.create(TableConfigs.builder("t", 4)
        .setOptimizer(TableConfigs.adam(0.1f, 0f, 0f, 0f)).build());
    rows(table, "a", "b", "c");
    table.applyGradients(PackedKeys.of("a"), new float[] {1, 1, 1, 1}, 0f, 1);
    before = snapshot(table);
  }

  @AfterEach
  void unchanged() {
    Fixtures.assertSameRecords(before, snapshot(engine.get("t")));
  }

  @Test
  void unknownTable_isNotFound() {
    assertError(ErrorCode.NOT_FOUND, "table 'nope' does not exist", () -> engine.get("nope"));
  }

  @Test
  void gradientOfWrongWidth_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "expects gradients of 2 keys x dim 4 = 8 floats but the"
        + " request had 6", () -> table.applyGradients(PackedKeys.of("a", "b"), new float[6], 0f, 2));
  }

  @Test
  void nanOrInfGradient_isInvalidAndNothingApplied() {
    float[] g = {1, 1, 1, 1, 1, Float.NaN, 1, 1};
    assertError(ErrorCode.INVALID_ARGUMENT, "gradient of key 1 ('b') column 1 is NaN",
        () -> table.applyGradients(PackedKeys.of("a", "b"), g, 0f, 2));
    float[] inf = {Float.POSITIVE_INFINITY, 0, 0, 0};
    assertError(ErrorCode.INVALID_ARGUMENT, "is Infinity",
        () -> table.applyGradients(PackedKeys.of("new-key"), inf, 0f, 2));
  }

  @Test
  void negativeLearningRate_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "learning_rate must be in [0, 1000000.0]",
        () -> table.applyGradients(PackedKeys.of("a"), new float[4], -1f, 2));
  }

  @Test
  void unboundedLearningRate_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "learning_rate must be in [0, 1000000.0] (0 = the"
        + " table's) but was 1.0E30",
        () -> table.applyGradients(PackedKeys.of("a"), new float[4], 1e30f, 2));
  }

  @Test
  void duplicateGradientsSummingToInfinity_areInvalid() {
    float[] g = {3e38f, 0, 0, 0, 3e38f, 0, 0, 0};
    assertError(ErrorCode.INVALID_ARGUMENT, "the gradients of key 'p' column 0 sum to Infinity",
        () -> table.applyGradients(PackedKeys.of("p", "p"), g, 0f, 2));
  }

  @Test
  void gradientTimesRateBeyondFloat_isInvalid() {
    float[] g = {1e33f, 0, 0, 0};
    assertError(ErrorCode.INVALID_ARGUMENT, "times the learning rate 1000000.0 is not finite",
        () -> table.applyGradients(PackedKeys.of("p"), g, 1e6f, 2));
  }

  @Test
  void emptyBatch_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "the batch of keys is empty",
        () -> table.findOrInsert(PackedKeys.of(), null, new float[0]));
    assertError(ErrorCode.INVALID_ARGUMENT, "the batch of keys is empty",
        () -> table.applyGradients(PackedKeys.of(), new float[0], 0f, 2));
  }

  @Test
  void overlongKey_isInvalid() {
    String longKey = "k".repeat(257);
    assertError(ErrorCode.INVALID_ARGUMENT, "is 257 bytes long; the table's max_key_bytes is 256",
        () -> rows(table, "d", longKey));
  }

  @Test
  void oversizedBatch_isResourceExhausted() {
    String[] keys = new String[Limits.MAX_BATCH_KEYS + 1];
    java.util.Arrays.fill(keys, "z");
    assertError(ErrorCode.RESOURCE_EXHAUSTED, "exceeds the limits",
        () -> table.findOrInsert(PackedKeys.of(keys), null, new float[0]));
  }

  @Test
  void badOccurrenceCounts_areInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "occurrence count of key 0 is 0",
        () -> table.findOrInsert(PackedKeys.of("a"), new int[] {0}, new float[4]));
  }

  @Test
  void createWithDifferentConfig_isAlreadyExists() {
    assertError(ErrorCode.ALREADY_EXISTS, "already exists with a different config",
        () -> engine.create(TableConfigs.builder("t", 8).build()));
  }

  @Test
  void invalidConfig_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "dim must be in [1, 4096] but was 0",
        () -> engine.create(TableConfigs.builder("u", 0).build()));
    assertError(ErrorCode.INVALID_ARGUMENT, "min_count must be in [0, 2147483647] but was"
        + " 4294967295", () -> engine.create(TableConfigs.builder("u", 4).setMinCount(-1).build()));
  }

  @Test
  void badSamplerAndTopKArguments_areInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "num_sampled must be in",
        () -> engine.sample("t", PackedKeys.of(), -1, SamplerKind.UNIFORM_SAMPLER, 0f, 1));
    assertError(ErrorCode.INVALID_ARGUMENT, "sampler SAMPLER_KIND_UNSPECIFIED is not supported",
        () -> engine.sample("t", PackedKeys.of(), 1, SamplerKind.SAMPLER_KIND_UNSPECIFIED, 0f, 1));
    assertError(ErrorCode.INVALID_ARGUMENT, "k must be in [1, 10000] but was 0",
        () -> engine.topK("t", new float[4], 1, 0, false, Metric.DOT, PackedKeys.of()));
    // k is a uint32 on the wire: 2^31 is said as such, not as a negative number
    assertError(ErrorCode.INVALID_ARGUMENT, "k must be in [1, 10000] but was 2147483648",
        () -> engine.topK("t", new float[4], 1, Integer.MIN_VALUE, false, Metric.DOT,
            PackedKeys.of()));
    assertError(ErrorCode.INVALID_ARGUMENT, "1 queries of width 3 need 3 floats but the request had 4",
        () -> engine.topK("t", new float[4], 1, 2, true, Metric.DOT, PackedKeys.of()));
    assertError(ErrorCode.INVALID_ARGUMENT, "query 0 column 1 is NaN",
        () -> engine.topK("t", new float[] {0, Float.NaN, 0, 0}, 1, 2, false, Metric.DOT,
            PackedKeys.of()));
  }

  @Test
  void badCheckpointDirectory_isInvalid() {
    assertError(ErrorCode.INVALID_ARGUMENT, "checkpoint directory is empty",
        () -> engine.save("t", "", 1));
  }
}
