package dev.dynembed.word2vec;

import dev.dynembed.layers.Trainer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

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
    Properties p = Trainer.readManifest(modelDir.resolve(Word2Vec.CHECKPOINT));
    Map<String, String> extra = new LinkedHashMap<>();
    for (String k : p.stringPropertyNames()) {
      if (k.startsWith("extra.")) {
        extra.put(k.substring(6), p.getProperty(k));
      }
    }
    return extra;
  }

  static Word2VecConfig config(Path modelDir) {
    return Word2VecConfig.fromMap(extras(modelDir));
  }
}
