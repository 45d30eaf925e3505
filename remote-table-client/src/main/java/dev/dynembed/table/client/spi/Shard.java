package dev.dynembed.table.client.spi;

import dev.dynembed.table.common.KeyBags;
import dev.dynembed.table.common.PackedKeys;
import dev.dynembed.table.v1.CheckpointFile;
import dev.dynembed.table.v1.Metric;
import dev.dynembed.table.v1.SamplerKind;
import dev.dynembed.table.v1.StatsResponse;
import dev.dynembed.table.v1.TableConfig;
import dev.dynembed.table.v1.TableInfo;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * One shard as the client sees it: in-process (the {@code table-embedded} module's), remote
 * ({@link GrpcShard}), or another store (the {@code redis-table} module's).
 * Futures fail with {@link dev.dynembed.table.common.TableException}s that already name the
 * table, shard and call.
 *
 * <p>The data path is {@link #read} and {@link #write}: several items, for any tables of the
 * shard, in one call (one RPC for a remote shard). Items run in order.
 */
public interface Shard extends AutoCloseable {
  int index();

  /**
   * Whether a single shard of this kind takes a batch as the caller gave it, duplicates and all
   * (the in-process engine de-duplicates and counts them itself): the client then skips its own
   * de-duplication.
   */
  default boolean takesBatchesUnchanged() {
    return false;
  }

  /** One read of a {@link #read} call. */
  sealed interface Read permits Find, FindOrInsert, Sample, Pooled, Partners {
    String table();
  }

  /** Rows of existing keys; replied with a {@link RowsReply}. */
  record Find(String table, PackedKeys keys) implements Read {}

  /**
   * Rows of keys, creating admitted ones; replied with a {@link RowsReply}.
   *
   * @param occurrences per-key counts, or null for 1 each
   */
  record FindOrInsert(String table, PackedKeys keys, int[] occurrences, InsertMode mode)
      implements Read {}

  /**
   * Candidate draws from this shard; replied with a {@link SampleReply}.
   *
   * @param distinct drawn keys once each, with their rows
   * @param noneIfEmpty a shard without any key of sampling weight draws nothing (mass 0)
   * @param withSlots with distinct draws: also the drawn keys' optimizer slots and update counts
   * @param omitRows with distinct draws: the drawn keys and draw indexes only, no rows (a client
   *     row cache reads the rows it lacks itself)
   */
  record Sample(String table, PackedKeys positives, int numSampled, SamplerKind sampler,
      float alpha, long seed, boolean distinct, boolean noneIfEmpty, boolean withSlots,
      boolean omitRows) implements Read {
    public Sample(String table, PackedKeys positives, int numSampled, SamplerKind sampler,
        float alpha, long seed, boolean distinct, boolean noneIfEmpty, boolean withSlots) {
      this(table, positives, numSampled, sampler, alpha, seed, distinct, noneIfEmpty, withSlots,
          false);
    }
  }

  /**
   * Rows of the keys pooled on the shard into one vector per bag; replied with a {@link
   * PooledReply}.
   *
   * @param insert create admitted keys (findOrInsert); false: a find, missing keys pool as zeros
   * @param count with insert: count each key once per bag entry that uses it
   */
  record Pooled(String table, PackedKeys keys, KeyBags bags, boolean insert, boolean count)
      implements Read {}

  /**
   * Draws of each anchor's partners from its co-occurrence counts (the table's cooccurrence);
   * replied with a {@link PartnersReply}.
   */
  record Partners(String table, PackedKeys anchors, int numDraws,
      dev.dynembed.table.v1.PartnerWeight weight, long seed) implements Read {}

  /**
   * Reply of a partners read: anchor i's draws are keys [sum(counts[&lt;i]), + counts[i]), each
   * with its probability among that anchor's partners.
   */
  record PartnersReply(PackedKeys keys, float[] probability, int[] counts) {}

  /** The call an item stands for, in error messages. */
  static String callName(Read r) {
    if (r instanceof FindOrInsert f) {
      return f.mode().rows() ? "findOrInsert" : "count";
    }
    if (r instanceof Pooled p) {
      return p.insert() ? "pooled findOrInsert" : "pooled find";
    }
    if (r instanceof Partners) {
      return "partners";
    }
    return r instanceof Find ? "find" : "sample";
  }

  /** Answers a read call's items in order, each with the handler of its kind. */
  static List<Object> answer(List<Read> items,
      java.util.function.Function<Find, Object> find,
      java.util.function.Function<FindOrInsert, Object> findOrInsert,
      java.util.function.Function<Pooled, Object> pooled,
      java.util.function.Function<Sample, Object> sample) {
    List<Object> out = new java.util.ArrayList<>(items.size());
    for (Read r : items) {
      if (r instanceof Find f) {
        out.add(find.apply(f));
      } else if (r instanceof FindOrInsert f) {
        out.add(findOrInsert.apply(f));
      } else if (r instanceof Pooled p) {
        out.add(pooled.apply(p));
      } else if (r instanceof Partners p) {
        throw dev.dynembed.table.common.TableException.invalid("table '%s': this backend keeps"
            + " no co-occurrence counts (partners)", p.table());
      } else {
        out.add(sample.apply((Sample) r));
      }
    }
    return out;
  }

  /** Reply of a pooled read: FLOAT [bags, dim], and the keys' found/admitted bitmap. */
  record PooledReply(ReplyRows pooled, byte[] found) {}

  /**
   * What a findOrInsert does besides creating admitted keys.
   *
   * @param count add occurrences to frequencies and admission counts
   * @param rows return the rows
   * @param frequencies return each key's count after the call
   * @param slots return each key's optimizer slots and update count
   */
  record InsertMode(boolean count, boolean rows, boolean frequencies, boolean slots) {
    public InsertMode(boolean count, boolean rows, boolean frequencies) {
      this(count, rows, frequencies, false);
    }
  }

  /**
   * Reply of a find/findOrInsert: the rows (null when omitted), the found/admitted bitmap (null:
   * all found), the frequencies (null unless asked), and the optimizer slots (rows of slots x dim)
   * and update counts (null unless asked; slots also null for an optimizer without slots).
   */
  record RowsReply(ReplyRows rows, byte[] found, long[] frequencies, ReplyRows slots,
      long[] updateCounts) {
    public RowsReply(ReplyRows rows, byte[] found, long[] frequencies) {
      this(rows, found, frequencies, null, null);
    }

    public boolean found(int i) {
      return found == null || (found[i >>> 3] & (1 << (i & 7))) != 0;
    }
  }

  /**
   * Reply of a sample: positives then drawn keys (or, with distinct draws, the distinct drawn
   * keys, their rows and each draw's index among them), each with its probability under this
   * shard's distribution.
   */
  record SampleReply(PackedKeys keys, boolean[] positive, double[] probability, double mass,
      int numKeys, ReplyRows rows, int[] drawIndex, ReplyRows slots, long[] updateCounts) {}

  /**
   * One gradient batch of a {@link #write} call, keys distinct, gradients summed per key; or with
   * {@code bags}, one gradient row per bag, spread over the bags' keys by the shard.
   */
  record Write(String table, PackedKeys keys, float[] gradients, float learningRate, long step,
      KeyBags bags, Assign assign, Pairs pairs) {
    public Write(String table, PackedKeys keys, float[] gradients, float learningRate, long step,
        KeyBags bags, Assign assign) {
      this(table, keys, gradients, learningRate, step, bags, assign, null);
    }

    public Write(String table, PackedKeys keys, float[] gradients, float learningRate, long step) {
      this(table, keys, gradients, learningRate, step, null, null);
    }

    public Write(String table, PackedKeys keys, float[] gradients, float learningRate, long step,
        KeyBags bags) {
      this(table, keys, gradients, learningRate, step, bags, null);
    }

    /**
     * An assign ({@code EmbeddingTable.assign}): {@code values} are the distinct keys' new rows.
     *
     * @param frequencies each key's new frequency, or null to leave counts
     */
    public static Write assign(String table, PackedKeys keys, float[] values, long[] frequencies,
        long step) {
      return new Write(table, keys, values, 0f, step, null, new Assign(frequencies));
    }

    /**
     * A report of co-occurring pairs ({@code EmbeddingTable.reportPairs}): {@code anchors[i]}
     * occurred with {@code partners[i]} {@code counts[i]} times.
     *
     * @param counts each pair's count, or null for 1 each
     */
    public static Write pairs(String table, PackedKeys anchors, PackedKeys partners,
        int[] counts, long step) {
      return new Write(table, anchors, new float[0], 0f, step, null, null,
          new Pairs(partners, counts));
    }

    /** This item as the shards' protocol carries it (and as a shard logs it). */
    public dev.dynembed.table.v1.ApplyGradientsRequest toProto() {
      dev.dynembed.table.v1.ApplyGradientsRequest.Builder item =
          dev.dynembed.table.v1.ApplyGradientsRequest.newBuilder().setTable(table)
              .setKeys(keys.toProto()).setLearningRate(learningRate).setStep(step);
      if (pairs != null) {
        dev.dynembed.table.v1.PairReport.Builder p = dev.dynembed.table.v1.PairReport.newBuilder()
            .setPartners(pairs.partners().toProto());
        for (int i = 0; pairs.counts() != null && i < pairs.counts().length; i++) {
          p.addCounts(pairs.counts()[i]);
        }
        return item.setPairs(p).build();
      }
      if (assign != null) {
        item.setAssignValues(dev.dynembed.table.common.Rows.encode(gradients));
        long[] f = assign.frequencies();
        for (int i = 0; f != null && i < f.length; i++) {
          item.addAssignFrequencies(f[i]);
        }
        return item.build();
      }
      item.setGradients(dev.dynembed.table.common.Rows.encode(gradients));
      if (bags != null) {
        item.setPool(bags.toProto());
      }
      return item.build();
    }
  }

  /**
   * Marks a {@link Write} as an assign: its gradients are the keys' new rows.
   *
   * @param frequencies each key's new frequency, or null to leave counts
   */
  record Assign(long[] frequencies) {}

  /**
   * Marks a {@link Write} as a pair report: its keys are the anchors, these their partners.
   *
   * @param counts each pair's count, or null for 1 each
   */
  record Pairs(PackedKeys partners, int[] counts) {}

  /**
   * Runs the reads in order; the reply list answers them in order ({@link RowsReply} or {@link
   * SampleReply}).
   */
  CompletableFuture<List<Object>> read(List<Read> items);

  /**
   * As {@link #read(List)}, for items routed by slot map epoch {@code mapEpoch}: a shard that
   * routes by another refuses the call whole ({@link
   * dev.dynembed.table.common.TableException#isMoved}). A shard without slot maps (in process,
   * Redis) ignores the epoch.
   */
  default CompletableFuture<List<Object>> read(List<Read> items, long mapEpoch) {
    return read(items);
  }

  /** Applies the gradient batches (all checked before any is applied); rows updated per item. */
  CompletableFuture<int[]> write(List<Write> items);

  /** As {@link #write(List)}, for items routed by slot map epoch {@code mapEpoch}. */
  default CompletableFuture<int[]> write(List<Write> items, long mapEpoch) {
    return write(items);
  }

  /**
   * The slot map this shard routes by, or null for a shard without one (in process, Redis: the
   * implicit map of the shard count).
   */
  default CompletableFuture<dev.dynembed.table.v1.SlotMap> slotMap() {
    return CompletableFuture.completedFuture(null);
  }

  /** A slot move's export from this shard (admin; see the ExportSlots RPC). */
  default CompletableFuture<dev.dynembed.table.v1.ExportSlotsResponse> exportSlots(
      dev.dynembed.table.v1.ExportSlotsRequest req) {
    return unsupported("move slots");
  }

  /** A slot move's import into this shard (admin; see the ImportSlots RPC). */
  default CompletableFuture<dev.dynembed.table.v1.ImportSlotsResponse> importSlots(
      dev.dynembed.table.v1.ImportSlotsRequest req) {
    return unsupported("move slots");
  }

  /** A slot move's commit on this shard (admin; see the CommitSlots RPC). */
  default CompletableFuture<dev.dynembed.table.v1.CommitSlotsResponse> commitSlots(
      dev.dynembed.table.v1.CommitSlotsRequest req) {
    return unsupported("move slots");
  }

  /** Removes the rows this shard's map does not give it (admin; see the DropUnowned RPC). */
  default CompletableFuture<Long> dropUnowned() {
    return unsupported("move slots");
  }

  private <T> CompletableFuture<T> unsupported(String what) {
    return CompletableFuture.failedFuture(dev.dynembed.table.common.TableException.invalid(
        "this shard (%s) cannot %s", getClass().getSimpleName(), what));
  }

  /** Installs a slot map on this shard (admin; see the SetSlotMap RPC). */
  default CompletableFuture<dev.dynembed.table.v1.SlotMap> installSlotMap(
      dev.dynembed.table.v1.SlotMap map) {
    return CompletableFuture.failedFuture(dev.dynembed.table.common.TableException.invalid(
        "this shard (%s) has no slot map", getClass().getSimpleName()));
  }

  CompletableFuture<TableInfo> create(TableConfig config);

  CompletableFuture<TableInfo> describe(String table);

  CompletableFuture<Void> drop(String table);

  /** Widens every row of a table on this shard to {@code dim} (admin; the GrowTable RPC). */
  default CompletableFuture<TableInfo> grow(dev.dynembed.table.v1.GrowTableRequest req) {
    return CompletableFuture.failedFuture(dev.dynembed.table.common.TableException.precondition(
        "table '%s': this backend (%s) cannot grow a table's dim", req.getTable(),
        getClass().getSimpleName()));
  }

  /** The exact top-k of the shard's rows. */
  CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries, int k,
      boolean biasLastDim, Metric metric, PackedKeys exclude);

  /**
   * Top-k with {@code searchBreadth} > 0: from the shard's approximate index where it has one
   * (design 0016). A backend without indexes answers exactly.
   */
  default CompletableFuture<TopKHitsReply> topK(String table, float[] queries, int numQueries,
      int k, boolean biasLastDim, Metric metric, PackedKeys exclude, int searchBreadth) {
    return topK(table, queries, numQueries, k, biasLastDim, metric, exclude);
  }

  /** Builds a table's approximate index on this shard ({@code BuildIndexRequest}). */
  default CompletableFuture<dev.dynembed.table.v1.IndexInfo> buildIndex(
      dev.dynembed.table.v1.BuildIndexRequest request) {
    return CompletableFuture.failedFuture(dev.dynembed.table.common.TableException.invalid(
        "table '%s': this backend (%s) has no approximate index; top-k stays exact",
        request.getTable(), getClass().getSimpleName()));
  }

  /**
   * Top-k hits of a batch of queries on one shard: query i owns {@code counts[i]} consecutive
   * entries of keys/scores, by descending score; {@code approximate} when an index found them.
   */
  record TopKHitsReply(PackedKeys keys, float[] scores, int[] counts, boolean approximate) {
    public TopKHitsReply(PackedKeys keys, float[] scores, int[] counts) {
      this(keys, scores, counts, false);
    }
  }

  CompletableFuture<CheckpointFile> save(String table, String directory, long step);

  CompletableFuture<Long> restore(String table, String directory, List<CheckpointFile> files);

  CompletableFuture<StatsResponse> stats();

  /**
   * One page of a scan of a table on this shard: keys, rows (FLOAT [keys, dim]), frequencies,
   * last-update steps, the next cursor (0: done) and the store's generation.
   */
  record ScanReply(PackedKeys keys, ReplyRows rows, long[] frequencies, long[] steps, long next,
      long generation) {}

  /** A page of a scan ({@code ScanRequest}); generation 0 for the first page. */
  CompletableFuture<ScanReply> scan(String table, long cursor, int limit, long generation);

  /** Evicts rows of a table on this shard ({@code EvictRequest}). */
  CompletableFuture<dev.dynembed.table.v1.EvictResponse> evict(
      dev.dynembed.table.v1.EvictRequest request);

  @Override
  void close();

  /**
   * Waits for a shard call's answer (the admin calls above return futures): its value, or its
   * failure rethrown as the {@link dev.dynembed.table.common.TableException} it carries.
   */
  static <T> T await(CompletableFuture<T> call) {
    return dev.dynembed.table.client.internal.Futures.await(call);
  }
}
