package dev.dynembed.table.client;

import dev.dynembed.table.v1.Metric;
import java.util.List;

/**
 * @param biasLastDim the "[c, 1]" option: rows' last column is a bias and queries have dim - 1
 *     columns, scored as [query, 1] . row
 * @param metric DOT or COSINE
 * @param exclude keys never returned
 * @param searchBreadth 0: the exact scan; &gt; 0: answer from the table's approximate index
 *     ({@link EmbeddingTable#buildIndex}) where a shard has one for this metric and bias option,
 *     exploring this many candidates per query (more: slower, closer to the exact answer); the
 *     candidates are scored exactly on their current rows (docs/design/0016-approximate-top-k.md)
 */
public record TopKOptions(boolean biasLastDim, Metric metric, List<String> exclude,
    int searchBreadth) {
  public static final TopKOptions DOT = new TopKOptions(false, Metric.DOT, List.of());
  public static final TopKOptions COSINE = new TopKOptions(false, Metric.COSINE, List.of());

  public TopKOptions {
    exclude = List.copyOf(exclude);
    if (metric == null || metric == Metric.METRIC_UNSPECIFIED) {
      metric = Metric.DOT;
    }
    if (searchBreadth < 0) {
      throw new IllegalArgumentException("searchBreadth must be >= 0 (0: exact) but was "
          + searchBreadth);
    }
  }

  /** Exact options. */
  public TopKOptions(boolean biasLastDim, Metric metric, List<String> exclude) {
    this(biasLastDim, metric, exclude, 0);
  }

  public TopKOptions excluding(List<String> keys) {
    return new TopKOptions(biasLastDim, metric, keys, searchBreadth);
  }

  /** These options answered from the approximate index with this search breadth (0: exact). */
  public TopKOptions approximate(int breadth) {
    return new TopKOptions(biasLastDim, metric, exclude, breadth);
  }
}
