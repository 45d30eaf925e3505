package dev.dynembed.word2vec;

import dev.dynembed.layers.Trainer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/** The model directory: {@code checkpoint/} (tables + manifest), {@code loss.csv}, {@code loss-curve.png}. */
final class ModelDir {
  private ModelDir() {}

  /** The manifest's extra entries (settings, position, counters). */
  static Map<String, String> extras(Path modelDir) {
    Path m = modelDir.resolve(Word2Vec.CHECKPOINT).resolve("MANIFEST.properties");
    if (!Files.exists(m)) {
      throw new CorpusException(modelDir + " is not a word2vec model directory (no " + m
          + "); train one with: word2vec train --input FILE --model " + modelDir);
    }
    return Trainer.readExtras(modelDir.resolve(Word2Vec.CHECKPOINT));
  }

  static Word2VecConfig config(Path modelDir) {
    return Word2VecConfig.fromMap(extras(modelDir));
  }
}
