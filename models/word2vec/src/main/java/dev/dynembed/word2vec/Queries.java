package dev.dynembed.word2vec;

import dev.dynembed.ops.DynEmbed;
import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Nearest-neighbour and analogy queries on a trained model, through the {@code topK} op over the
 * model's input table (cosine similarity), restored into an in-process table.
 */
public final class Queries implements AutoCloseable {
  /** A neighbour and its cosine similarity. */
  public record Hit(String word, float score) {}

  private final Word2VecConfig cfg;
  private final TableClient client;
  private final EmbeddingTable in;
  private final int searchBreadth;

  public Queries(Path modelDir) {
    this(modelDir, 0);
  }

  /**
   * @param searchBreadth 0: exact queries; &gt; 0: queries answered by an approximate index
   *     (cosine, HNSW; docs/design/0016-approximate-top-k.md) built once the model is loaded,
   *     exploring this many candidates per query
   */
  public Queries(Path modelDir, int searchBreadth) {
    this(modelDir, searchBreadth, null);
  }

  /**
   * @param endpoints null: the model's checkpoint restored into an in-process table; else the
   *     shards (or serving replicas, {@code table-server --serve-from}) that hold the model's
   *     tables now, asked directly: the answers follow a training that goes on (the model
   *     directory gives the settings only)
   */
  public Queries(Path modelDir, int searchBreadth, String endpoints) {
    if (searchBreadth < 0 || searchBreadth > 100_000) {
      throw new CorpusException("--search-breadth must be in [0, 100000] (0: exact) but was "
          + searchBreadth);
    }
    this.cfg = ModelDir.config(modelDir);
    this.searchBreadth = searchBreadth;
    if (endpoints == null) {
      this.client = TableClients.inProcess(modelDir);
      this.in = client.createTable(Word2Vec.inConfig(cfg));
      in.restore(ModelDir.tables(modelDir));
    } else {
      this.client = TableClients.open(endpoints, dev.dynembed.table.client.ClientOptions
          .builder().build());
      this.in = client.openTable(cfg.inTable());
    }
    if (searchBreadth > 0) {
      in.buildIndex(dev.dynembed.table.v1.Metric.COSINE, false, 0, 0, true);
    }
  }

  /** The word's vector; a clear error for a word the model has no vector of. */
  public float[] vector(String word) {
    if (word.isEmpty() || word.getBytes(java.nio.charset.StandardCharsets.UTF_8).length
        > Word2Vec.MAX_WORD_BYTES) {
      throw new CorpusException("'" + word + "' is not a word this model can hold (1.."
          + Word2Vec.MAX_WORD_BYTES + " UTF-8 bytes)");
    }
    FindResult f = in.find(word);
    if (!f.found()[0]) {
      throw new CorpusException("'" + word + "' is not in the model: it never occurred in the"
          + " training text, or fewer than --min-count " + cfg.minCount() + " times");
    }
    return f.rows();
  }

  /** The k words most similar to {@code word} (itself excluded). */
  public List<Hit> nearest(String word, int k) {
    return top(unit(vector(word)), k, Set.of(word));
  }

  /** "a is to b as c is to ?": the k words nearest to b - a + c (unit vectors), a, b, c excluded. */
  public List<Hit> analogy(String a, String b, String c, int k) {
    float[] va = unit(vector(a));
    float[] vb = unit(vector(b));
    float[] vc = unit(vector(c));
    float[] q = new float[cfg.dim()];
    for (int j = 0; j < q.length; j++) {
      q[j] = vb[j] - va[j] + vc[j];
    }
    return top(q, k, Set.of(a, b, c));
  }

  private List<Hit> top(float[] query, int k, Set<String> exclude) {
    if (k < 1 || k > 1000) {
      throw new CorpusException("-k must be in 1..1000 but was " + k);
    }
    SameDiff sd = SameDiff.create();
    SDVariable q = sd.placeHolder("q", DataType.FLOAT, 1, cfg.dim());
    SDVariable[] out = new DynEmbed(sd).topK("nn", q, in, k + exclude.size(), false, true,
        searchBreadth);
    java.util.Map<String, INDArray> r = sd.output(java.util.Map.of("q",
        Nd4j.create(query, new long[] {1, cfg.dim()}, 'c')), out[0].name(), out[1].name());
    INDArray keys = r.get(out[0].name());
    INDArray scores = r.get(out[1].name());
    List<Hit> hits = new ArrayList<>();
    for (int i = 0; i < keys.length() && hits.size() < k; i++) {
      String w = keys.getString(i);
      if (!w.isEmpty() && !exclude.contains(w)) {
        hits.add(new Hit(w, scores.getFloat(0, i)));
      }
    }
    return hits;
  }

  static float[] unit(float[] v) {
    double s = 0;
    for (float x : v) {
      s += (double) x * x;
    }
    float inv = s > 0 ? (float) (1 / Math.sqrt(s)) : 0f;
    float[] u = new float[v.length];
    for (int j = 0; j < v.length; j++) {
      u[j] = v[j] * inv;
    }
    return u;
  }

  @Override
  public void close() {
    client.close();
  }
}
