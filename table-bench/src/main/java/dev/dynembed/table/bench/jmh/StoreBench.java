package dev.dynembed.table.bench.jmh;

import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.engine.TableStore;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The engine's hot paths without the network: find / findOrInsert / applyGradients of batches of
 * 2,048 distinct keys drawn uniformly from a table of {@code keys} rows (uniform draws are the
 * cache-hostile case; Zipf batches hit hot rows). Score = microseconds per batch.
 *
 * <pre>
 *   java -cp table-bench/target/table-bench-0.1.0-SNAPSHOT-all.jar org.openjdk.jmh.Main StoreBench</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgs = {"-Xms4g", "-Xmx4g", "-XX:+UseParallelGC"})
public class StoreBench {
  @Param({"1000000"})
  int keys;

  @Param({"64"})
  int dim;

  static final int BATCH = 2048;
  static final int BATCHES = 64;

  TableStore table;
  PackedKeys[] batches;
  float[] out;
  byte[] found;
  float[] grads;
  int next;

  @Setup(Level.Trial)
  public void setUp() {
    table = new ShardEngine(0, 1, Path.of(".")).create(TableConfigs.builder("b", dim)
        .setOptimizer(TableConfigs.adagrad(0.05f, 0f, 0f)).build());
    String[] all = new String[keys];
    for (int i = 0; i < keys; i++) {
      all[i] = "key:" + i;
    }
    for (int i = 0; i < keys; i += 65536) {
      String[] chunk = java.util.Arrays.copyOfRange(all, i, Math.min(keys, i + 65536));
      table.findOrInsert(PackedKeys.of(chunk), null, new float[chunk.length * dim]);
    }
    SplittableRandom rnd = new SplittableRandom(7);
    batches = new PackedKeys[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
      String[] k = new String[BATCH];
      for (int i = 0; i < BATCH; i++) {
        k[i] = all[rnd.nextInt(keys)];
      }
      batches[b] = PackedKeys.of(k);
      batches[b].hash(0); // hashes computed once, as a server does per request
    }
    out = new float[BATCH * dim];
    found = new byte[BATCH / 8];
    grads = new float[BATCH * dim];
    for (int i = 0; i < grads.length; i++) {
      grads[i] = (float) rnd.nextGaussian() * 1e-3f;
    }
  }

  @Benchmark
  public float find() {
    table.find(batches[next++ & (BATCHES - 1)], out, found);
    return out[0];
  }

  @Benchmark
  public float findOrInsert() {
    table.findOrInsert(batches[next++ & (BATCHES - 1)], null, out);
    return out[0];
  }

  @Benchmark
  public int applyGradients() {
    return table.applyGradients(batches[next++ & (BATCHES - 1)], grads, 0f, next);
  }
}
