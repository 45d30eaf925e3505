package dev.dynembed.layers.bench;

import dev.dynembed.layers.AsyncExecutor;
import dev.dynembed.ops.Combiner;
import dev.dynembed.layers.Layers;
import dev.dynembed.layers.Trainer;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.SamplerKind;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Sgd;

/**
 * Throughput of the asynchronous executor, 1 vs 2 threads: a CBOW model (bag of 4 context words
 * -> negative-sampling loss over the center word, dim 64, 5 negatives, batch 1,024) trained on the
 * first tokens of a text corpus split into 8 files. Prints examples/s.
 *
 * <pre>java -cp ... dev.dynembed.layers.bench.AsyncThroughput CORPUS [TOKENS]</pre>
 */
public final class AsyncThroughput {
  static final int B = 1024;
  static final int D = 64;

  public static void main(String[] args) throws IOException {
    if (args.length < 1) {
      System.err.println("usage: AsyncThroughput CORPUS [TOKENS]");
      System.exit(2);
    }
    int max = args.length > 1 ? Integer.parseInt(args[1]) : 400_000;
    String[] tokens = Arrays.stream(Files.readString(Path.of(args[0])).trim().split("\\s+"))
        .limit(max).toArray(String[]::new);
    Path dir = Files.createTempDirectory("async-bench");
    List<Path> files = new ArrayList<>();
    int per = tokens.length / 8;
    for (int f = 0; f < 8; f++) {
      Path p = dir.resolve("part-" + f);
      Files.writeString(p, String.join(" ", Arrays.copyOfRange(tokens, f * per, (f + 1) * per)));
      files.add(p);
    }
    System.out.printf(Locale.ROOT, "corpus %s: %,d tokens in 8 files; CBOW dim %d, batch %d,"
        + " 5 negatives; JDK %s, %d cores%n", args[0], 8L * per, D, B,
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
    for (int threads : new int[] {1, 2, 1, 2}) { // second round: warm JIT
      try (TableClient tables = TableClients.inProcess(dir)) {
        EmbeddingTable in = tables.createTable(TableConfigs.builder("in", D)
            .setOptimizer(TableConfigs.sgd(0.05f))
            .setInitializer(TableConfigs.uniform(-0.5f / D, 0.5f / D, 1)).build());
        EmbeddingTable out = tables.createTable(TableConfigs.builder("out", D)
            .setOptimizer(TableConfigs.sgd(0.05f)).setInitializer(TableConfigs.zeros()).build());
        AsyncExecutor ex = new AsyncExecutor(i -> model(in, out), threads);
        AsyncExecutor.RunResult r = ex.runFromFiles(files, threads, AsyncThroughput::read,
            List.of("loss"), 0f);
        System.out.printf(Locale.ROOT, "%d thread(s): %,d steps, %,.0f examples/s, mean loss %.4f%n",
            threads, r.steps(), r.steps() * (double) B / r.seconds(), r.averages().get("loss"));
      }
    }
  }

  static Trainer model(EmbeddingTable in, EmbeddingTable out) {
    SameDiff sd = SameDiff.create();
    Layers layers = new Layers(sd);
    SDVariable ctx = sd.placeHolder("ctx", DataType.UTF8, -1, 4);
    SDVariable ctxMask = sd.placeHolder("ctxMask", DataType.FLOAT, -1, 4);
    SDVariable target = sd.placeHolder("target", DataType.UTF8, -1, 1);
    SDVariable targetMask = sd.placeHolder("targetMask", DataType.FLOAT, -1, 1);
    SDVariable bag = layers.embeddingBag("bag", ctx, ctxMask, in, Combiner.MEAN, true);
    SDVariable scale = sd.var("scale", Nd4j.ones(DataType.FLOAT, 1, D));
    layers.negativeSamplingLoss("loss", bag.mul(scale), target, targetMask, out, 5, 3);
    return new Trainer(sd, "loss", new Sgd(0.01), List.of(in, out));
  }

  static Iterable<Map<String, INDArray>> read(Path file) {
    String[] w;
    try {
      w = Files.readString(file).split(" ");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<Map<String, INDArray>> batches = new ArrayList<>();
    for (int start = 2; start + B + 2 <= w.length; start += B) {
      List<String> ctx = new ArrayList<>(4 * B);
      List<String> target = new ArrayList<>(B);
      for (int i = start; i < start + B; i++) {
        ctx.addAll(List.of(w[i - 2], w[i - 1], w[i + 1], w[i + 2]));
        target.add(w[i]);
      }
      batches.add(Map.of("ctx", Nd4j.create(ctx, B, 4), "ctxMask", Nd4j.ones(DataType.FLOAT, B, 4),
          "target", Nd4j.create(target, B, 1), "targetMask", Nd4j.ones(DataType.FLOAT, B, 1)));
    }
    return batches;
  }
}
