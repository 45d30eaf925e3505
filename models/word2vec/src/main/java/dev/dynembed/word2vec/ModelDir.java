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
    Path ckpt = modelDir.resolve(Word2Vec.CHECKPOINT);
    if (!Files.isDirectory(ckpt) || !Trainer.hasCheckpoint(ckpt)) {
      throw new CorpusException(modelDir + " is not a word2vec model directory (no checkpoint"
          + " in " + ckpt + "); train one with: word2vec train --input FILE --model " + modelDir);
    }
    return Trainer.readExtras(ckpt);
  }

  /** The tables' checkpoint of the model's latest checkpoint. */
  static Path tables(Path modelDir) {
    return Trainer.latest(modelDir.resolve(Word2Vec.CHECKPOINT)).resolve("tables");
  }

  static Word2VecConfig config(Path modelDir) {
    return Word2VecConfig.fromMap(extras(modelDir));
  }
}
