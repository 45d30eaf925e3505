package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.FindResult;
import dev.dynembed.table.client.SampleResult;
import dev.dynembed.table.client.TopKOptions;
import dev.dynembed.table.client.TopKResult;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.v1.CheckpointManifest;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

/**
 * A test table: rows that can be nudged (new keys get seeded random rows), every gradient row it
 * receives summed per key, and a fixed list of "sampled" keys with fixed probabilities, so finite
 * differences see the same candidates on every evaluation.
 */
final class ProbeTable implements EmbeddingTable {
  final String name;
  final int dim;
  final Map<String, float[]> rows = new HashMap<>();
  final Map<String, double[]> received = new HashMap<>();
  String[] sampled = new String[0];
  Map<String, Double> probability = new HashMap<>();
  SamplerKind lastSampler;
  float lastAlpha;

  ProbeTable(String name, int dim) {
    this.name = name;
    this.dim = dim;
  }

  float[] row(String key) {
    return rows.computeIfAbsent(key, k -> {
      Random r = new Random(k.hashCode());
      float[] v = new float[dim];
      for (int j = 0; j < dim; j++) {
        v[j] = (float) (r.nextGaussian() * 0.5);
      }
      return v;
    });
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public int dim() {
    return dim;
  }

  @Override
  public TableConfig config() {
    return TableConfigs.builder(name, dim).build();
  }

  @Override
  public float[] findOrInsert(String... keys) {
    float[] out = new float[keys.length * dim];
    for (int i = 0; i < keys.length; i++) {
      System.arraycopy(row(keys[i]), 0, out, i * dim, dim);
    }
    return out;
  }

  @Override
  public float[] findOrInsert(String[] keys, boolean count) {
    return findOrInsert(keys);
  }

  @Override
  public dev.dynembed.table.client.KeyCounts count(String[] keys, boolean count) {
    boolean[] admitted = new boolean[keys.length];
    java.util.Arrays.fill(admitted, true);
    return new dev.dynembed.table.client.KeyCounts(admitted, new long[keys.length]);
  }

  @Override
  public FindResult find(String... keys) {
    boolean[] found = new boolean[keys.length]; // every key has a (generated) row
    java.util.Arrays.fill(found, true);
    return new FindResult(findOrInsert(keys), found);
  }

  @Override
  public int applyGradients(String[] keys, float[] g, float lr, long step) {
    for (int i = 0; i < keys.length; i++) {
      double[] acc = received.computeIfAbsent(keys[i], k -> new double[dim]);
      for (int j = 0; j < dim; j++) {
        acc[j] += g[i * dim + j];
      }
    }
    return keys.length;
  }

  @Override
  public SampleResult sample(String[] positives, int n, SamplerKind sampler, float alpha,
      long seed) {
    lastSampler = sampler;
    lastAlpha = alpha;
    String[] keys = new String[positives.length + n];
    boolean[] pos = new boolean[keys.length];
    double[] prob = new double[keys.length];
    for (int i = 0; i < positives.length; i++) {
      keys[i] = positives[i];
      pos[i] = true;
      prob[i] = probability.getOrDefault(positives[i], 0.0);
    }
    for (int k = 0; k < n; k++) {
      keys[positives.length + k] = sampled[k % sampled.length];
      prob[positives.length + k] = probability.getOrDefault(keys[positives.length + k], 0.0);
    }
    return new SampleResult(keys, pos, prob, positives.length);
  }

  @Override
  public dev.dynembed.table.client.SampledRows sampleDistinct(String[] positives, int n,
      SamplerKind sampler, float alpha, long seed) {
    SampleResult r = sample(positives, n, sampler, alpha, seed);
    java.util.LinkedHashMap<String, Integer> distinct = new java.util.LinkedHashMap<>();
    int[] drawIndex = new int[n];
    for (int j = 0; j < n; j++) {
      drawIndex[j] = distinct.computeIfAbsent(r.keys()[positives.length + j],
          k -> distinct.size());
    }
    String[] keys = distinct.keySet().toArray(new String[0]);
    double[] prob = new double[keys.length];
    for (int i = 0; i < keys.length; i++) {
      prob[i] = probability.getOrDefault(keys[i], 0.0);
    }
    return new dev.dynembed.table.client.SampledRows(
        java.util.Arrays.copyOf(r.probability(), positives.length), keys, findOrInsert(keys), prob,
        drawIndex);
  }

  @Override
  public TopKResult topK(float[] q, int n, int k, TopKOptions o) {
    throw new UnsupportedOperationException();
  }

  @Override
  public CheckpointManifest save(Path d, long step) {
    throw new UnsupportedOperationException();
  }

  @Override
  public long restore(Path d) {
    throw new UnsupportedOperationException();
  }

  @Override
  public TableInfo describe() {
    throw new UnsupportedOperationException();
  }
}
