package dev.dynembed.table.client;

import dev.dynembed.table.v1.Metric;
import java.util.List;

/**
 * @param biasLastDim the "[c, 1]" option: rows' last column is a bias and queries have dim - 1
 *     columns, scored as [query, 1] . row
 * @param metric DOT or COSINE
 * @param exclude keys never returned
 */
public record TopKOptions(boolean biasLastDim, Metric metric, List<String> exclude) {
  public static final TopKOptions DOT = new TopKOptions(false, Metric.DOT, List.of());
  public static final TopKOptions COSINE = new TopKOptions(false, Metric.COSINE, List.of());

  public TopKOptions {
    exclude = List.copyOf(exclude);
    if (metric == null || metric == Metric.METRIC_UNSPECIFIED) {
      metric = Metric.DOT;
    }
  }

  public TopKOptions excluding(List<String> keys) {
    return new TopKOptions(biasLastDim, metric, keys);
  }
}
