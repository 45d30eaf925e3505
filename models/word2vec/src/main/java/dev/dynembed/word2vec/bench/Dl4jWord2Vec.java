package dev.dynembed.word2vec.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.deeplearning4j.models.word2vec.Word2Vec;
import org.deeplearning4j.text.sentenceiterator.CollectionSentenceIterator;
import org.deeplearning4j.text.tokenization.tokenizerfactory.DefaultTokenizerFactory;

/**
 * The benchmark's DL4J reference: Deeplearning4j's own Word2Vec ({@code deeplearning4j-nlp}),
 * skip-gram with negative sampling, on the same corpus and settings. The corpus is cut into
 * sentences of at most 1,000 words, as word2vec's C tool does.
 *
 * <p>Usage: {@code Dl4jWord2Vec CORPUS OUTPUT.bin DIM WINDOW NEGATIVE SAMPLE MINCOUNT EPOCHS THREADS}
 */
public final class Dl4jWord2Vec {
  public static void main(String[] a) throws IOException {
    Path corpus = Path.of(a[0]);
    Path output = Path.of(a[1]);
    String[] words = Files.readString(corpus, StandardCharsets.UTF_8).trim().split("\\s+");
    List<String> sentences = new ArrayList<>();
    for (int i = 0; i < words.length; i += 1000) {
      sentences.add(String.join(" ", java.util.Arrays.copyOfRange(words, i,
          Math.min(words.length, i + 1000))));
    }
    long start = System.nanoTime();
    Word2Vec w = new Word2Vec.Builder()
        .layerSize(Integer.parseInt(a[2]))
        .windowSize(Integer.parseInt(a[3]))
        .negativeSample(Integer.parseInt(a[4]))
        .useHierarchicSoftmax(false)
        .sampling(Double.parseDouble(a[5]))
        .minWordFrequency(Integer.parseInt(a[6]))
        .epochs(Integer.parseInt(a[7]))
        .iterations(1)
        .workers(Integer.parseInt(a[8]))
        .learningRate(0.025)
        .minLearningRate(0.0001)
        .seed(1)
        .iterate(new CollectionSentenceIterator(sentences))
        .tokenizerFactory(new DefaultTokenizerFactory())
        .build();
    w.fit();
    double seconds = (System.nanoTime() - start) / 1e9;
    // word2vec's binary format, most frequent first, through the same writer as this project's
    // export (DL4J's own writeWord2VecModel writes a zip)
    List<String> vocab = new ArrayList<>(w.getVocab().words());
    vocab.sort(java.util.Comparator.comparingDouble((String x) -> -w.getVocab().wordFrequency(x))
        .thenComparing(java.util.Comparator.naturalOrder()));
    int dim = w.getLayerSize();
    float[] v = new float[vocab.size() * dim];
    for (int i = 0; i < vocab.size(); i++) {
      double[] row = w.getWordVector(vocab.get(i));
      for (int j = 0; j < dim; j++) {
        v[i * dim + j] = (float) row[j];
      }
    }
    new dev.dynembed.word2vec.VectorSet(vocab, v, dim).write(output, true);
    System.out.printf(Locale.ROOT, "dl4j: %d words in vocabulary, training took %.1f s%n",
        w.getVocab().numWords(), seconds);
  }
}
