package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pipeline on a small synthetic corpus with known structure: two topics whose words only
 * co-occur within their topic, plus shared function words. After training, words of one topic
 * are nearer to each other than to the other topic's.
 */
class Word2VecTest {
  @TempDir static Path shared;
  static Path corpus;

  // non-ASCII words in both topics: keys must survive UTF-8 end to end (ND4J's own string arrays
  // corrupt them; see KeyArrays)
  static final String[] ANIMALS = {"cat", "dog", "horse", "cow", "sheep", "chèvre", "pig",
      "mouse"};
  static final String[] METALS = {"iron", "gold", "silver", "copper", "étain", "lead", "亜鉛",
      "nickel"};
  static final String[] FUNCTION = {"the", "a", "of", "and", "is"};

  @BeforeAll
  static void writeCorpus() throws Exception {
    Random r = new Random(11);
    StringBuilder b = new StringBuilder();
    for (int s = 0; s < 6000; s++) {
      String[] topic = r.nextBoolean() ? ANIMALS : METALS;
      for (int i = 0; i < 10; i++) {
        b.append(r.nextInt(3) == 0 ? FUNCTION[r.nextInt(FUNCTION.length)]
            : topic[r.nextInt(topic.length)]).append(' ');
      }
      b.append(s % 7 == 0 ? "rareword" + s : "").append('\n');
    }
    corpus = shared.resolve("topics.txt");
    Files.writeString(corpus, b.toString());
  }

  static Word2VecConfig config(int epochs) {
    return new Word2VecConfig(16, 3, 5, 0, 5, epochs, 0.025f, Word2VecConfig.Optimizer.SGD, 64, 3,
        "t", 64);
  }

  private static Word2Vec.Result train(Path model, int epochs, int threads) {
    try (TableClient c = TableClients.inProcess(model)) {
      return new Word2Vec(config(epochs), c, threads).train(List.of(corpus),
          new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
    }
  }

  /** Two table servers on loopback (any free port) sharing {@code dir}; the caller closes them. */
  static List<dev.dynembed.table.server.TableServer> twoShards(Path dir) throws Exception {
    List<dev.dynembed.table.server.TableServer> servers = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      servers.add(new dev.dynembed.table.server.TableServer(
          new dev.dynembed.table.engine.ShardEngine(i, 2, dir), "127.0.0.1", 0, 4));
    }
    return servers;
  }

  static List<String> endpoints(List<dev.dynembed.table.server.TableServer> servers) {
    List<String> out = new ArrayList<>();
    for (var s : servers) {
      out.add("127.0.0.1:" + s.port());
    }
    return out;
  }

  static double cos(float[] a, float[] b) {
    double d = 0;
    double na = 0;
    double nb = 0;
    for (int i = 0; i < a.length; i++) {
      d += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    return d / Math.sqrt(na * nb);
  }

  @Test
  void finalLoss_isTheLastTenthsMean_notTheLastShortInterval() {
    // 10 intervals of 100 words at loss 2, then a 4-word interval that ended at 5
    List<double[]> curve = new ArrayList<>();
    for (int i = 1; i <= 10; i++) {
      curve.add(new double[] {100 * i, 2});
    }
    curve.add(new double[] {1004, 5});
    // the last tenth: 100.4 words, 96.4 of them at 2 and 4 at 5
    assertEquals((96.4 * 2 + 4 * 5) / 100.4, Word2Vec.Result.tailLoss(curve), 1e-12);
    assertEquals(3.0, Word2Vec.Result.tailLoss(List.of(new double[] {7, 3})), 0);
    assertTrue(Double.isNaN(Word2Vec.Result.tailLoss(List.of())));
  }

  @Test
  void training_onTwoLoopbackShards_separatesTopics(@TempDir Path model) throws Exception {
    List<dev.dynembed.table.server.TableServer> servers = twoShards(model);
    List<String> endpoints = endpoints(servers);
    try {
      try (TableClient c = TableClients.connect(endpoints)) {
        Word2Vec.Result r = new Word2Vec(config(3), c, 2).train(List.of(corpus),
            new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
        assertEquals(ANIMALS.length + METALS.length + FUNCTION.length, r.vocabulary());
      }
      for (var srv : servers) {
        assertTrue(srv.engine().get("t_in").size() > 0, "every shard holds words");
      }
      // queries straight to the shards (as to serving replicas): the same model
      try (Queries q = new Queries(model, 0, String.join(",", endpoints))) {
        assertTopicsSeparate(q);
      }
    } finally {
      servers.forEach(dev.dynembed.table.server.TableServer::close);
    }
    // the checkpoint written by the shards reads back in process, into a separating model
    try (Queries q = new Queries(model)) {
      assertTopicsSeparate(q);
    }
  }

  /**
   * The "storage doesn't optimize" backend: the rows live in a real redis-server, this process
   * runs the optimizer; word2vec trains the same model through it (issue 15).
   */
  @Test
  @Tag("redis")
  void training_onRedis_separatesTopics_andSavesACheckpointTheShardsRead(@TempDir Path model) {
    try (dev.dynembed.table.redis.LocalRedis redis = dev.dynembed.table.redis.LocalRedis.single();
        TableClient c = TableClients.open(redis.uri(),
            dev.dynembed.table.client.ClientOptions.DEFAULTS)) {
      Word2Vec.Result r = new Word2Vec(config(3), c, 2).train(List.of(corpus),
          new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
      assertEquals(ANIMALS.length + METALS.length + FUNCTION.length, r.vocabulary());
    }
    // the checkpoint written from Redis reads back in process, into a separating model
    try (Queries q = new Queries(model)) {
      assertTopicsSeparate(q);
    }
  }

  static void assertTopicsSeparate(Queries q) {
    double within = 0;
    double across = 0;
    for (int i = 0; i < ANIMALS.length; i++) {
      for (int j = 0; j < ANIMALS.length; j++) {
        if (i != j) {
          within += cos(q.vector(ANIMALS[i]), q.vector(ANIMALS[j]))
              + cos(q.vector(METALS[i]), q.vector(METALS[j]));
        }
        across += 2 * cos(q.vector(ANIMALS[i]), q.vector(METALS[j]));
      }
    }
    within /= 2 * ANIMALS.length * (ANIMALS.length - 1);
    across /= 2 * ANIMALS.length * ANIMALS.length;
    assertTrue(within > across + 0.3, "within-topic cosine " + within + " vs across " + across);
  }

  @Test
  void training_lossFalls_relatedWordsNearer_rareWordsNotAdmitted(@TempDir Path model) {
    Word2Vec.Result r = train(model, 3, 2);
    List<double[]> curve = r.lossCurve();
    assertTrue(curve.size() >= 1);
    // 6 = 1 positive + 5 negatives at log 2 each: the loss of untrained vectors
    double last = curve.get(curve.size() - 1)[1];
    assertTrue(last < 0.8 * 6 * Math.log(2), "final loss " + last + " should be well below 4.16");
    assertEquals(ANIMALS.length + METALS.length + FUNCTION.length, r.vocabulary(),
        "the rare words (seen once) must not get rows");
    try (Queries q = new Queries(model)) {
      assertTopicsSeparate(q);
      // nearest neighbours of a topic word come from its topic (through the topK op)
      List<String> near = q.nearest("cat", 3).stream().map(Queries.Hit::word).toList();
      assertTrue(List.of(ANIMALS).containsAll(near), "nearest to cat: " + near);
      for (String w : new String[] {"étain", "亜鉛"}) {
        List<String> n = q.nearest(w, 3).stream().map(Queries.Hit::word).toList();
        assertTrue(List.of(METALS).containsAll(n), "nearest to " + w + ": " + n);
      }
      CorpusException e = assertThrows(CorpusException.class, () -> q.nearest("rareword7", 3));
      assertTrue(e.getMessage().contains("not in the model"), e.getMessage());
      // through the approximate index (a search of 8 candidates over 21 words): the same
      // neighbours (nearest --search-breadth)
      try (Queries approx = new Queries(model, 8)) {
        for (String w : new String[] {"cat", "iron", "亜鉛"}) {
          assertEquals(q.nearest(w, 3), approx.nearest(w, 3), "nearest to " + w);
        }
      }
      assertThrows(CorpusException.class, () -> new Queries(model, -1));
    }
  }

  /**
   * --shared-negatives (pWord2Vec's orientation, a window's contexts share their negatives):
   * trains within the band the per-pair mode is held to ({@link
   * #training_lossFalls_relatedWordsNearer_rareWordsNotAdmitted}: final loss under 0.8 x that
   * of untrained vectors), its curve falling, and the topics separate. The shared step's
   * gradients are checked against their direct sums in SampledLogitsTest; on Brown both modes
   * end at the same loss (docs/benchmarks.md).
   */
  @Test
  void sharedNegatives_lossFallsAsThePerPairModes_topicsSeparate(@TempDir Path model) {
    Word2VecConfig cfg = config(3).toBuilder().sharedNegatives(true).build();
    try (TableClient c = TableClients.inProcess(model)) {
      Word2Vec.Result r = new Word2Vec(cfg, c, 2).train(List.of(corpus),
          new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
      List<double[]> curve = r.lossCurve();
      double first = curve.get(0)[1];
      double last = curve.get(curve.size() - 1)[1];
      assertTrue(last < 0.8 * 6 * Math.log(2), "final loss " + last + " should be well below 4.16");
      assertTrue(last < first, "the loss falls: " + first + " -> " + last);
    }
    try (Queries q = new Queries(model)) {
      assertTopicsSeparate(q);
    }
  }

  /**
   * Plain SGD at the C tool's rate with batches of 1,024 and 8,192 pairs: on 21 words every row
   * takes hundreds to thousands of terms per step, so summed steps overshoot (they diverge,
   * checked below) while implicit steps train: the loss falls at both sizes. (Topics separate
   * at 8,192; at 1,024 the margin stays under the other tests' 0.3 within 3 epochs:
   * docs/benchmarks.md.)
   */
  @Test
  void sgd_largeBatches_implicitStepsTrain_summedStepsDiverge(@TempDir Path dir) {
    for (int batch : new int[] {1024, 8192}) {
      Path model = dir.resolve("implicit" + batch);
      Word2Vec.Result r = trainSgd(model, batch, true);
      double last = r.lossCurve().get(r.lossCurve().size() - 1)[1];
      assertTrue(last < 0.8 * 6 * Math.log(2), "batch " + batch + ": final loss " + last
          + " should be well below 4.16");
      if (batch == 8192) {
        try (Queries q = new Queries(model)) {
          assertTopicsSeparate(q);
        }
      }
    }
    // the same run with summed steps: NaN or infinite gradients (refused by the table) or a
    // loss that does not fall
    Path model = dir.resolve("summed");
    try {
      Word2Vec.Result r = trainSgd(model, 8192, false);
      double last = r.lossCurve().get(r.lossCurve().size() - 1)[1];
      assertTrue(!(last < 0.8 * 6 * Math.log(2)), "summed SGD steps at batch 8192 were expected"
          + " to diverge, but the loss fell to " + last);
    } catch (dev.dynembed.table.common.TableException e) {
      assertTrue(e.getMessage().matches("(?s).*gradient of key .* is (NaN|-?Infinity).*"),
          e.getMessage());
    }
  }

  private static Word2Vec.Result trainSgd(Path model, int batch, boolean implicit) {
    Word2VecConfig cfg = new Word2VecConfig(16, 3, 5, 0, 5, 3, 0.025f,
        Word2VecConfig.Optimizer.SGD, batch, 3, "t", Word2VecConfig.defaultPool(batch), implicit,
        false);
    try (TableClient c = TableClients.inProcess(model)) {
      return new Word2Vec(cfg, c, 1).train(List.of(corpus),
          new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
    }
  }

  /**
   * The counting pass: every word is admitted before training, so the first epoch trains every
   * occurrence of an admitted word (without it, a word's first min_count - 1 occurrences are
   * skipped), and frequencies are the corpus counts (counted once, not again by epoch 1).
   */
  @Test
  void countPass_admitsBeforeTraining_andCountsOnce(@TempDir Path dir) throws Exception {
    java.util.Map<String, Long> exact = new java.util.HashMap<>();
    for (String w : Files.readString(corpus).trim().split("\\s+")) {
      exact.merge(w, 1L, Long::sum);
    }
    long rare = exact.values().stream().filter(n -> n < 5).mapToLong(n -> n).sum();
    String[] words = exact.keySet().stream().filter(w -> exact.get(w) >= 5)
        .toArray(String[]::new);
    for (boolean pass : new boolean[] {true, false}) {
      Path model = dir.resolve("pass-" + pass);
      Word2VecConfig cfg = new Word2VecConfig(16, 3, 5, 0, 5, 1, 0.025f,
          Word2VecConfig.Optimizer.SGD, 64, 3, "t", 64, true, pass);
      try (TableClient c = TableClients.inProcess(model)) {
        Word2Vec w2v = new Word2Vec(cfg, c, 2);
        Word2Vec.Result r = w2v.train(List.of(corpus),
            new Word2Vec.TrainOptions(model, 0, false, false), s -> {});
        assertEquals(words.length, r.vocabulary());
        long skipped = pass ? 0 : (long) words.length * (5 - 1);
        assertEquals(r.tokens() - rare - skipped, r.words(), "pass " + pass);
        long[] f = w2v.outputTable().count(words, false).frequencies();
        for (int i = 0; i < words.length; i++) {
          assertEquals(exact.get(words[i]), f[i], words[i] + ", pass " + pass);
        }
      }
    }
  }

  @Test
  void export_thenReimport_roundTripsInBothFormats(@TempDir Path model) throws Exception {
    train(model, 1, 1);
    VectorSet v = VectorSet.fromModel(model);
    assertTrue(List.of(FUNCTION).contains(v.words().get(0)),
        "most frequent first (a function word), not " + v.words().get(0));
    for (boolean binary : new boolean[] {true, false}) {
      Path f = model.resolve(binary ? "v.bin" : "v.txt");
      v.write(f, binary);
      VectorSet back = VectorSet.read(f);
      assertEquals(v.words(), back.words());
      if (binary) {
        assertArrayEquals(v.raw(), back.raw()); // bit for bit
      } else {
        for (int i = 0; i < v.raw().length; i++) {
          assertEquals(v.raw()[i], back.raw()[i], 0f); // Float.toString round-trips exactly
        }
      }
    }
    // an independent reader: DL4J's loader of word2vec's binary format
    var dl4j = org.deeplearning4j.models.embeddings.loader.WordVectorSerializer
        .readWord2VecModel(model.resolve("v.bin").toFile());
    int i = v.indexOf("gold");
    double[] theirs = dl4j.getWordVector("gold");
    for (int j = 0; j < v.dim(); j++) {
      assertEquals(v.vector(i)[j], theirs[j], 1e-6);
    }
  }

  @Test
  void resume_afterInterruption_continuesExactlyAsAnUninterruptedRun(@TempDir Path dir) {
    // A: 2 epochs, 1 thread, a checkpoint after round 3, then on to the end
    Path a = dir.resolve("a");
    try (TableClient c = TableClients.inProcess(a)) {
      // prefetch 0: with a reader thread, its counting races the step's negative sampling
      new Word2Vec(config(2), c, 1).setPrefetch(0).train(List.of(corpus),
          new Word2Vec.TrainOptions(a, 0, false, false, 3, 0), s -> {});
    }
    // B: the same run interrupted right after that checkpoint, then resumed by a new client
    Path b = dir.resolve("b");
    try (TableClient c = TableClients.inProcess(b)) {
      new Word2Vec(config(2), c, 1).setPrefetch(0).train(List.of(corpus),
          new Word2Vec.TrainOptions(b, 0, false, false, 0, 3), s -> {});
    }
    assertEquals("false", ModelDir.extras(b).get("complete"));
    try (TableClient c = TableClients.inProcess(b)) {
      // the same checkpoint schedule as A from here on (a checkpoint rebuilds the sampler's
      // snapshot, so both runs must checkpoint at the same points to draw the same negatives)
      new Word2Vec(config(2), c, 1).setPrefetch(0).train(List.of(corpus),
          new Word2Vec.TrainOptions(b, 0, true, false, 3, 0), s -> {});
    }
    VectorSet va = VectorSet.fromModel(a);
    VectorSet vb = VectorSet.fromModel(b);
    assertEquals(va.words(), vb.words());
    assertArrayEquals(va.raw(), vb.raw(), "resumed vectors must equal the uninterrupted run's");
    assertEquals(ModelDir.extras(a).get("words"), ModelDir.extras(b).get("words"));
  }

  /**
   * PMI positives (design 0026): the first epoch reports its window pairs to the output table's
   * co-occurrence counts, later epochs add drawn positives; the counts are part of the
   * checkpoint, so a run interrupted in its second epoch and resumed trains exactly as the
   * uninterrupted one (the shards' side of reports and draws: PairReportsClientTest).
   */
  @Test
  void pmiPositives_areDrawnFromCountsTheCheckpointKeeps_andResumeExactly(@TempDir Path dir)
      throws Exception {
    Word2VecConfig cfg = config(2).toBuilder().pmiPositives(1).build();
    Path a = dir.resolve("a");
    long counted;
    try (TableClient c = TableClients.inProcess(a)) {
      Word2Vec w = new Word2Vec(cfg, c, 1).setPrefetch(0);
      w.train(List.of(corpus), new Word2Vec.TrainOptions(a, 0, false, false, 3, 0), s -> {});
      assertTrue(w.pmiPositivesDrawn() > 10_000, "drawn: " + w.pmiPositivesDrawn());
      var counters = c.openTable("t_out").describe().getCounters();
      counted = counters.getPairsCounted();
      assertTrue(counted > 50_000, counters.toString());
      assertEquals(ANIMALS.length + METALS.length + FUNCTION.length, counters.getPairAnchors(),
          "pairs of admitted words only");
    }
    Path b = dir.resolve("b");
    try (TableClient c = TableClients.inProcess(b)) {
      new Word2Vec(cfg, c, 1).setPrefetch(0).train(List.of(corpus),
          new Word2Vec.TrainOptions(b, 0, false, false, 0, 3), s -> {});
    }
    try (TableClient c = TableClients.inProcess(b)) {
      Word2Vec w = new Word2Vec(cfg, c, 1).setPrefetch(0);
      w.train(List.of(corpus), new Word2Vec.TrainOptions(b, 0, true, false, 3, 0), s -> {});
      assertTrue(w.pmiPositivesDrawn() > 0, "the resumed part draws from the restored counts");
      assertEquals(counted, c.openTable("t_out").describe().getCounters().getPairsCounted());
    }
    assertArrayEquals(VectorSet.fromModel(a).raw(), VectorSet.fromModel(b).raw(),
        "resumed vectors must equal the uninterrupted run's");
    try (Queries q = new Queries(a)) {
      assertTopicsSeparate(q);
    }
  }

  /**
   * A model continued at a larger dim (--init-from with a larger --dim): its tables are grown
   * (docs/design/0025), the run trains at the new width, stops part-way, and resumes at it (the
   * grown tables' configs are the ones a run at that dim creates); the topics still separate.
   */
  @Test
  void initFrom_atALargerDim_growsTheModel_trainsAndResumesAtIt(@TempDir Path dir) {
    Path a = dir.resolve("a");
    try (TableClient c = TableClients.inProcess(a)) {
      new Word2Vec(config(1), c, 2).train(List.of(corpus),
          new Word2Vec.TrainOptions(a, 0, false, false), s -> {});
    }
    Word2VecConfig wide = new Word2VecConfig(24, 3, 5, 0, 5, 1, 0.025f,
        Word2VecConfig.Optimizer.SGD, 64, 3, "t", 64);
    Path g = dir.resolve("g");
    try (TableClient c = TableClients.inProcess(g)) {
      new Word2Vec(wide, c, 2).train(List.of(corpus),
          new Word2Vec.TrainOptions(g, 0, false, false, 0, 2).initFrom(a, false), s -> {});
    }
    assertEquals("false", ModelDir.extras(g).get("complete"));
    assertEquals("16", ModelDir.extras(g).get("init_grown_from_dim"));
    try (TableClient c = TableClients.inProcess(g)) {
      new Word2Vec(wide, c, 2).train(List.of(corpus),
          new Word2Vec.TrainOptions(g, 0, true, false), s -> {});
    }
    assertEquals("true", ModelDir.extras(g).get("complete"));
    assertEquals(24, VectorSet.fromModel(g).dim());
    try (Queries q = new Queries(g)) {
      assertTopicsSeparate(q);
    }
  }

  /**
   * The grow a larger --dim makes (docs/design/0025): every word vector kept exactly (new input
   * columns zero, so its cosines too), every score unchanged, the output rows' new columns small
   * and non-zero (so gradients reach the new columns), new keys as a fresh model of the new dim
   * starts them.
   */
  @Test
  void grow_keepsEveryWordVectorAndScore_startsTheOutputsNewColumns(@TempDir Path dir) {
    Word2VecConfig narrow = config(1);
    Word2VecConfig wide = new Word2VecConfig(24, 3, 5, 0, 5, 1, 0.025f,
        Word2VecConfig.Optimizer.SGD, 64, 3, "t", 64);
    String[] keys = {"cat", "iron", "the", "亜鉛"};
    Random rnd = new Random(5);
    float[] u = new float[keys.length * 16];
    float[] v = new float[keys.length * 16];
    for (int i = 0; i < u.length; i++) {
      u[i] = (float) rnd.nextGaussian();
      v[i] = (float) rnd.nextGaussian();
    }
    long[] freq = {9, 9, 9, 9};
    try (TableClient c = TableClients.inProcess(dir)) {
      c.createTable(Word2Vec.inConfig(narrow)).assign(keys, u, freq, 1);
      c.createTable(Word2Vec.outConfig(narrow)).assign(keys, v, freq, 1);
      Word2Vec.grow(c, wide);
      float[] gu = c.openTable(wide.inTable()).find(keys).rows();
      float[] gv = c.openTable(wide.outTable()).find(keys).rows();
      float r = 0.5f / 24;
      for (int k = 0; k < keys.length; k++) {
        for (int j = 0; j < 24; j++) {
          if (j < 16) {
            assertEquals(u[k * 16 + j], gu[k * 24 + j], keys[k]);
            assertEquals(v[k * 16 + j], gv[k * 24 + j], keys[k]);
          } else {
            assertEquals(0f, gu[k * 24 + j], keys[k] + ": a word vector's new column");
            assertTrue(gv[k * 24 + j] != 0 && Math.abs(gv[k * 24 + j]) <= r,
                keys[k] + ": an output row's new column " + gv[k * 24 + j]);
          }
        }
        for (int l = 0; l < keys.length; l++) { // every score as before the grow
          float before = 0;
          float after = 0;
          for (int j = 0; j < 16; j++) {
            before += u[k * 16 + j] * v[l * 16 + j];
          }
          for (int j = 0; j < 24; j++) {
            after += gu[k * 24 + j] * gv[l * 24 + j];
          }
          assertEquals(before, after, 1e-5f, keys[k] + "." + keys[l]);
        }
      }
      // a new word: as a fresh model of dim 24 starts it (uniform +-0.5/24 in, zeros out)
      float[] nu = c.openTable(wide.inTable()).findOrInsert("zinc");
      assertTrue(java.util.stream.IntStream.range(0, 24).allMatch(j -> nu[j] != 0 && Math.abs(nu[j]) <= r));
      assertEquals(Word2Vec.inConfig(wide).getInitializer(),
          c.openTable(wide.inTable()).config().getInitializer());
      assertEquals(Word2Vec.outConfig(wide).getInitializer(),
          c.openTable(wide.outTable()).config().getInitializer());
    }
  }

  /**
   * Continual training (--init-from): a model trained on the topics corpus goes on with a second
   * corpus of the same topics and four new words. The new words get rows and land in their
   * topics, the old words' counts are the sum of both corpora's (the model's tables were
   * restored, not started empty), the schedule offset is the old run's share of the work, and a
   * run of another dim, optimizer or table name is refused by name.
   */
  @Test
  void initFrom_continuesAModel_newWordsGetRows_countsCarryOver(@TempDir Path dir)
      throws Exception {
    Path a = dir.resolve("a");
    String[] old = {"cat", "iron", "the", "亜鉛"};
    long[] before;
    try (TableClient c = TableClients.inProcess(a)) {
      Word2Vec w = new Word2Vec(config(1), c, 2);
      w.train(List.of(corpus), new Word2Vec.TrainOptions(a, 0, false, false), s -> {});
      before = w.outputTable().count(old, false).frequencies();
    }
    String[] animals = java.util.stream.Stream.concat(java.util.Arrays.stream(ANIMALS),
        java.util.stream.Stream.of("llama", "yak")).toArray(String[]::new);
    String[] metals = java.util.stream.Stream.concat(java.util.Arrays.stream(METALS),
        java.util.stream.Stream.of("zinc", "cobalt")).toArray(String[]::new);
    Random r = new Random(12);
    StringBuilder b = new StringBuilder();
    for (int s = 0; s < 3000; s++) {
      String[] topic = r.nextBoolean() ? animals : metals;
      for (int i = 0; i < 10; i++) {
        b.append(r.nextInt(3) == 0 ? FUNCTION[r.nextInt(FUNCTION.length)]
            : topic[r.nextInt(topic.length)]).append(' ');
      }
      b.append('\n');
    }
    Path day2 = dir.resolve("day2.txt");
    Files.writeString(day2, b.toString());
    java.util.Map<String, Long> counted = new java.util.HashMap<>();
    for (String w : b.toString().trim().split("\\s+")) {
      counted.merge(w, 1L, Long::sum);
    }
    Path m = dir.resolve("b");
    try (TableClient c = TableClients.inProcess(m)) {
      Word2Vec w = new Word2Vec(config(2), c, 2);
      Word2Vec.Result res = w.train(List.of(day2),
          new Word2Vec.TrainOptions(m, 0, false, false).initFrom(a, true), s -> {});
      long[] after = w.outputTable().count(old, false).frequencies();
      for (int i = 0; i < old.length; i++) {
        assertEquals(before[i] + counted.get(old[i]), after[i], old[i] + ": counts carry over");
      }
      for (boolean f : w.inputTable().find("llama", "yak", "zinc", "cobalt").found()) {
        assertTrue(f, "new words get rows");
      }
      assertEquals(ANIMALS.length + METALS.length + FUNCTION.length + 4, res.vocabulary());
    }
    try (Queries q = new Queries(m)) {
      assertTopicsSeparate(q);
      for (String w : new String[] {"llama", "zinc"}) {
        List<String> near = q.nearest(w, 3).stream().map(Queries.Hit::word).toList();
        assertTrue(List.of(w.equals("llama") ? animals : metals).containsAll(near),
            "nearest to the new word " + w + ": " + near);
      }
    }
    java.util.Map<String, String> extras = ModelDir.extras(m);
    assertEquals(a.toAbsolutePath().normalize().toString(), extras.get("init_from"));
    double oldWork = 1.0 * Files.size(corpus);
    assertEquals(oldWork / (oldWork + 2.0 * Files.size(day2)),
        Double.parseDouble(extras.get("init_schedule_offset")), 1e-12);
    // refused by name: another dim, optimizer, table name; with --resume
    String[][] cases = {
        {"16", "ADAGRAD", "t", "trained with the sgd optimizer but this run asks for adagrad"},
        {"8", "SGD", "t", "was trained at dim 16 but this run asks for dim 8; a model grows"},
        {"16", "SGD", "u", "holds tables named 't' but this run's are 'u'"}};
    for (String[] k : cases) {
      Word2VecConfig cfg = new Word2VecConfig(Integer.parseInt(k[0]), 3, 5, 0, 5, 1, 0.025f,
          Word2VecConfig.Optimizer.valueOf(k[1]), 64, 3, k[2], 64);
      Path x = dir.resolve("x" + k[0] + k[1] + k[2]);
      try (TableClient c = TableClients.inProcess(x)) {
        CorpusException e = assertThrows(CorpusException.class, () -> new Word2Vec(cfg, c, 1)
            .train(List.of(day2), new Word2Vec.TrainOptions(x, 0, false, false)
                .initFrom(a, false), s -> {}));
        assertTrue(e.getMessage().contains(k[3]), e.getMessage());
      }
    }
    CorpusException e = assertThrows(CorpusException.class,
        () -> new Word2Vec.TrainOptions(m, 0, true, false).initFrom(a, false));
    assertTrue(e.getMessage().contains("give one of them"), e.getMessage());
  }

  @Test
  void badInput_getsClearMessages_andNeverDamagesAModel(@TempDir Path dir) throws Exception {
    Path model = dir.resolve("m");
    train(model, 1, 1);
    Path manifest = dev.dynembed.layers.Trainer.latest(model.resolve("checkpoint"))
        .resolve("MANIFEST.properties");
    byte[] before = Files.readAllBytes(manifest);
    Path empty = Files.writeString(dir.resolve("empty.txt"), "");
    Path binary = dir.resolve("bin.dat");
    Files.write(binary, new byte[] {'a', 'b', ' ', 0, 1, 2, 3});
    Path latin1 = dir.resolve("latin1.txt");
    Files.write(latin1, "caf\u00e9 ol\u00e9 ".getBytes(StandardCharsets.ISO_8859_1));
    Path tiny = Files.writeString(dir.resolve("tiny.txt"), "one two three one two\n");
    String[][] cases = {
        {"train", "--input", dir.resolve("missing.txt").toString(), "--model", model.toString(),
            "--overwrite"},
        {"train", "--input", empty.toString(), "--model", model.toString(), "--overwrite"},
        {"train", "--input", binary.toString(), "--model", model.toString(), "--overwrite"},
        {"train", "--input", latin1.toString(), "--model", model.toString(), "--overwrite"},
        {"train", "--input", corpus.toString(), "--model", model.toString()},
        {"nearest", "--model", model.toString(), "neverseen"},
        {"nearest", "--model", dir.resolve("nomodel").toString(), "cat"},
        {"train", "--input", tiny.toString(), "--model", dir.resolve("t").toString()},
    };
    String[] expected = {"does not exist", "corpus is empty", "binary", "invalid UTF-8",
        "already holds a model", "not in the model", "not a word2vec model directory",
        "no word of the corpus reached minCount (--min-count)"};
    for (int i = 0; i < cases.length; i++) {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = Word2VecCli.run(cases[i], new PrintStream(new ByteArrayOutputStream()),
          new PrintStream(err, true, StandardCharsets.UTF_8));
      String msg = err.toString(StandardCharsets.UTF_8);
      assertTrue(code != 0, String.join(" ", cases[i]) + " must fail");
      assertTrue(msg.contains(expected[i]), "'" + msg + "' should say '" + expected[i] + "'");
      assertTrue(!msg.contains("\tat "), "no stack trace: " + msg);
    }
    // the failed runs left the saved model as it was
    assertEquals(manifest, dev.dynembed.layers.Trainer.latest(model.resolve("checkpoint"))
        .resolve("MANIFEST.properties"));
    assertArrayEquals(before, Files.readAllBytes(manifest));
    try (Queries q = new Queries(model)) {
      assertEquals(16, q.vector("cat").length);
    }
  }

  @Test
  void tokenReader_splitsShareNoWord_andTheirUnionIsTheFile(@TempDir Path dir) throws Exception {
    StringBuilder b = new StringBuilder();
    Random r = new Random(3);
    for (int i = 0; i < 30000; i++) {
      b.append("w").append(r.nextInt(1000)).append(i % 17 == 0 ? "\n" : i % 5 == 0 ? "  " : " ");
    }
    Path f = Files.writeString(dir.resolve("c.txt"), b.toString());
    List<String> whole = new ArrayList<>(List.of(b.toString().trim().split("\\s+")));
    List<TextSplits.Split> splits = TextSplits.plan(List.of(f), 1_000); // 64 KiB minimum
    List<String> read = new ArrayList<>();
    List<String> sentence = new ArrayList<>();
    for (TextSplits.Split s : splits) {
      try (TokenReader t = new TokenReader(s, 256)) {
        while (t.nextSentence(sentence)) {
          read.addAll(sentence);
        }
      }
    }
    assertTrue(splits.size() > 1);
    assertEquals(whole, read);
  }
}
