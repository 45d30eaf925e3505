package dev.dynembed.word2vec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class Word2VecConfigTest {
  @Test
  void defaults_areWord2vecsUsualSettings_andRoundTripThroughACheckpointMap() {
    Word2VecConfig d = Word2VecConfig.defaults();
    assertEquals(100, d.dim());
    assertEquals(5, d.window());
    assertEquals(Word2VecConfig.Optimizer.ADAGRAD, d.optimizer());
    assertEquals(0.3f, d.alpha());
    assertEquals(2048, d.negativePool());
    assertEquals(Word2VecConfig.DEFAULT_OPTIMIZER.spelling(),
        Word2VecConfig.DEFAULT_OPTIMIZER_SPELLING);
    assertEquals(d, Word2VecConfig.fromMap(d.toMap()));
    assertEquals("adagrad", d.toMap().get("optimizer")); // checkpoints keep the old spelling
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
