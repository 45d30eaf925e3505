package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.TopKResult;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import dev.dynembed.table.client.spi.Shard;

/**
 * The global top k of each query from every shard's top k: n·k candidates per query, ordered by
 * descending score, ties by key (so the answer does not depend on the shard count).
 */
final class TopKMerge {
  private TopKMerge() {}

  private record Hit(String key, float score) {}

  private static final Comparator<Hit> ORDER =
      Comparator.comparingDouble((Hit h) -> -h.score()).thenComparing(Hit::key);

  static TopKResult merge(List<Shard.TopKHitsReply> replies, int numQueries, int k) {
    String[][] keys = new String[numQueries][];
    float[][] scores = new float[numQueries][];
    int[] cursor = new int[replies.size()];
    for (int q = 0; q < numQueries; q++) {
      List<Hit> all = new ArrayList<>();
      for (int s = 0; s < replies.size(); s++) {
        Shard.TopKHitsReply r = replies.get(s);
        int c = r.counts()[q];
        for (int j = 0; j < c; j++) {
          all.add(new Hit(r.keys().key(cursor[s] + j), r.scores()[cursor[s] + j]));
        }
        cursor[s] += c;
      }
      all.sort(ORDER);
      // a key answered by two shards (a slot move's source between the destination's merge and
      // its own drop) counts once
      List<Hit> distinct = new ArrayList<>(Math.min(k, all.size()));
      java.util.Set<String> seen = new java.util.HashSet<>();
      for (int j = 0; j < all.size() && distinct.size() < k; j++) {
        if (seen.add(all.get(j).key())) {
          distinct.add(all.get(j));
        }
      }
      int m = distinct.size();
      keys[q] = new String[m];
      scores[q] = new float[m];
      for (int j = 0; j < m; j++) {
        keys[q][j] = distinct.get(j).key();
        scores[q][j] = distinct.get(j).score();
      }
    }
    int approximate = 0;
    for (Shard.TopKHitsReply r : replies) {
      approximate += r.approximate() ? 1 : 0;
    }
    return new TopKResult(keys, scores, approximate);
  }
}
