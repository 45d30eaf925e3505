package dev.dynembed.table.client.internal;

import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.common.SlotMap;

/**
 * Anchors (repeats kept, in order) split by their owner under a slot map, with what goes with
 * each anchor (a pair's partner and count): a pair report and a partners read go to the shards
 * that own their anchors, and the replies of a partners read are joined back in the anchors'
 * order. Unlike {@link Routing} nothing is de-duplicated: each pair is counted as reported, and
 * each occurrence of an anchor draws its own partners.
 */
final class PairSplit {
  final int[] owner; // per anchor
  final PackedKeys[] anchors; // per owner, in the anchors' order
  private final int[][] index; // per owner: the anchors' positions in the batch

  private PairSplit(int[] owner, PackedKeys[] anchors, int[][] index) {
    this.owner = owner;
    this.anchors = anchors;
    this.index = index;
  }

  static PairSplit of(PackedKeys anchors, SlotMap map, int n) {
    int k = anchors.size();
    int[] owner = new int[k];
    int[] count = new int[n];
    for (int i = 0; i < k; i++) {
      owner[i] = n == 1 ? 0 : map.ownerOf(anchors.hash(i));
      count[owner[i]]++;
    }
    int[][] index = new int[n][];
    PackedKeys.Builder[] b = new PackedKeys.Builder[n];
    for (int o = 0; o < n; o++) {
      index[o] = new int[count[o]];
      b[o] = new PackedKeys.Builder(count[o]);
      count[o] = 0;
    }
    for (int i = 0; i < k; i++) {
      int o = owner[i];
      index[o][count[o]++] = i;
      b[o].add(anchors, i);
    }
    PackedKeys[] out = new PackedKeys[n];
    for (int o = 0; o < n; o++) {
      out[o] = b[o].build();
    }
    return new PairSplit(owner, out, index);
  }

  /** Owner {@code o}'s share of one key per anchor (partners). */
  PackedKeys keys(PackedKeys perAnchor, int o) {
    PackedKeys.Builder b = new PackedKeys.Builder(index[o].length);
    for (int i : index[o]) {
      b.add(perAnchor, i);
    }
    return b.build();
  }

  /** Owner {@code o}'s share of one value per anchor (null stays null). */
  int[] values(int[] perAnchor, int o) {
    if (perAnchor == null) {
      return null;
    }
    int[] out = new int[index[o].length];
    for (int j = 0; j < out.length; j++) {
      out[j] = perAnchor[index[o][j]];
    }
    return out;
  }

  /** Owner {@code o}'s part of a pair report, or null when it owns none of the anchors. */
  Shard.Write pairs(String table, PackedKeys partners, int[] counts, long step, int o) {
    return index[o].length == 0 ? null
        : Shard.Write.pairs(table, anchors[o], keys(partners, o), values(counts, o), step);
  }

  /** Owner {@code o}'s part of a partners read, or null when it owns none of the anchors. */
  Shard.Read partners(Shard.Partners p, int o) {
    return index[o].length == 0 ? null
        : new Shard.Partners(p.table(), anchors[o], p.numDraws(), p.weight(), p.seed());
  }

  /** The owners' partners replies joined in the anchors' order. */
  Shard.PartnersReply join(Object[] replies) {
    int k = owner.length;
    int[] counts = new int[k];
    int[] from = new int[k]; // anchor i's first draw in its owner's reply
    int total = 0;
    for (int o = 0; o < replies.length; o++) {
      if (index[o].length == 0) {
        continue;
      }
      int[] c = ((Shard.PartnersReply) replies[o]).counts();
      int at = 0;
      for (int j = 0; j < index[o].length; j++) {
        from[index[o][j]] = at;
        counts[index[o][j]] = c[j];
        at += c[j];
      }
      total += at;
    }
    PackedKeys.Builder keys = new PackedKeys.Builder(total);
    float[] prob = new float[total];
    int at = 0;
    for (int i = 0; i < k; i++) {
      Shard.PartnersReply r = (Shard.PartnersReply) replies[owner[i]];
      for (int d = 0; d < counts[i]; d++) {
        keys.add(r.keys(), from[i] + d);
        prob[at++] = r.probability()[from[i] + d];
      }
    }
    return new Shard.PartnersReply(keys.build(), prob, counts);
  }
}
