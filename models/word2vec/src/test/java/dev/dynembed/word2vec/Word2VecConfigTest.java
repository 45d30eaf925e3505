package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class Word2VecConfigTest {
  @Test
  void builder_startsAtTheDefaults_andDerivedDefaultsFollowTheirInputs() {
    assertEquals(Word2VecConfig.defaults(), Word2VecConfig.builder().build());
    Word2VecConfig sgd = Word2VecConfig.builder().optimizer(Word2VecConfig.Optimizer.SGD)
        .batchPairs(1000).build();
    assertEquals(0.025f, sgd.alpha()); // the optimizer's rate
    assertTrue(sgd.implicitSteps()); // SGD needs them on summed batches
    assertEquals(250, sgd.negativePool()); // a quarter of the batch
    Word2VecConfig set = sgd.toBuilder().alpha(0.1f).implicitSteps(false).negativePool(0)
        .tableMaxBytes(1 << 20).diskTier(true).build();
    assertEquals(0.1f, set.alpha());
    assertEquals(false, set.implicitSteps());
    assertEquals(0, set.negativePool());
    assertEquals(set, set.toBuilder().build());
    CorpusException e = assertThrows(CorpusException.class,
        () -> Word2VecConfig.builder().dim(0).build());
    assertTrue(e.getMessage().contains("dim (--dim) must be in 1..4096 but was 0"), e.getMessage());
  }

  @Test
  void defaults_areWord2vecsUsualSettings_andRoundTripThroughACheckpointMap() {
    Word2VecConfig d = Word2VecConfig.defaults();
    assertEquals(100, d.dim());
    assertEquals(5, d.window());
    assertEquals(Word2VecConfig.Optimizer.ADAGRAD, d.optimizer());
    assertEquals(0.3f, d.alpha());
    assertEquals(4096, d.batchPairs());
    assertEquals(1024, d.negativePool());
    assertEquals(Word2VecConfig.DEFAULT_OPTIMIZER.spelling(),
        Word2VecConfig.DEFAULT_OPTIMIZER_SPELLING);
    assertEquals(d, Word2VecConfig.fromMap(d.toMap()));
    assertEquals("adagrad", d.toMap().get("optimizer")); // checkpoints keep the old spelling
    assertEquals(false, d.implicitSteps()); // Adagrad normalises its own steps
    assertEquals(false, d.countPass());
    assertEquals(false, d.sharedNegatives()); // a measured option (docs/design/0006)
    Word2VecConfig shared = d.toBuilder().sharedNegatives(true).build();
    assertEquals(shared, Word2VecConfig.fromMap(shared.toMap()));
  }

  @Test
  void implicitSteps_onWithSgd_andOldManifestsReadAsTheyTrained() {
    Word2VecConfig d = Word2VecConfig.defaults();
    Word2VecConfig sgd = new Word2VecConfig(d.dim(), d.window(), d.negative(), d.sample(),
        d.minCount(), d.epochs(), 0.025f, Word2VecConfig.Optimizer.SGD, d.batchPairs(), d.seed(),
        d.name(), d.negativePool());
    assertTrue(sgd.implicitSteps());
    Word2VecConfig both = new Word2VecConfig(d.dim(), d.window(), d.negative(), d.sample(),
        d.minCount(), d.epochs(), 0.025f, Word2VecConfig.Optimizer.SGD, d.batchPairs(), d.seed(),
        d.name(), d.negativePool(), false, true);
    assertEquals(both, Word2VecConfig.fromMap(both.toMap()));
    // a checkpoint written before these settings existed trained with summed steps and no pass
    java.util.Map<String, String> old = new java.util.LinkedHashMap<>(sgd.toMap());
    old.remove("implicit_steps");
    old.remove("count_pass");
    Word2VecConfig back = Word2VecConfig.fromMap(old);
    assertEquals(false, back.implicitSteps());
    assertEquals(false, back.countPass());
    old.put("count_pass", "yes");
    CorpusException e = assertThrows(CorpusException.class, () -> Word2VecConfig.fromMap(old));
    assertTrue(e.getMessage().contains("no valid word2vec settings"), e.getMessage());
  }

  @Test
  void badValues_areRefusedNamingParameterAndFlag() {
    CorpusException e = assertThrows(CorpusException.class,
        () -> Word2VecConfig.Optimizer.parse("adam"));
    assertTrue(e.getMessage().contains("optimizer (--optimizer) must be sgd or adagrad but was"
        + " 'adam'"), e.getMessage());
    Word2VecConfig d = Word2VecConfig.defaults();
    e = assertThrows(CorpusException.class, () -> new Word2VecConfig(d.dim(), d.window(),
        d.negative(), d.sample(), 0, d.epochs(), d.alpha(), d.optimizer(), d.batchPairs(),
        d.seed(), d.name(), d.negativePool()));
    assertTrue(e.getMessage().contains("minCount (--min-count) must be >= 1 but was 0"),
        e.getMessage());
  }
}
