package dev.dynembed.table.bench;

import dev.dynembed.table.client.EmbeddingTable;
import dev.dynembed.table.client.Resharding;
import dev.dynembed.table.client.TableClient;
import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.spi.Shard;
import dev.dynembed.table.client.spi.ShardedTableClient;
import dev.dynembed.table.common.SlotMap;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.tools.LocalShardProcesses;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What a live slot move costs (docs/design/0021-slot-moves-proposal.md): a table of N keys
 * (Adagrad) on 2 loopback shard processes, with a third started beside them, goes 2 -> 3 -> 2
 * shards while a trainer thread runs lookup+update steps of Zipf batches. Prints the rows moved
 * per second, the longest cutover pause, and the trainer's rows/s before, during and after each
 * move (per 250 ms window: median and lowest).
 */
@Command(name = "table-bench reshard", mixinStandardHelpOptions = true)
public final class ReshardBench extends TableShapeOptions implements Callable<Integer> {
  @Option(names = "--settle-seconds", defaultValue = "5",
      description = "seconds of training before and after each move (default ${DEFAULT-VALUE})")
  int settle;
  @Option(names = "--disk-tier-max-keys", defaultValue = "0", description = "keep at most this"
      + " many rows in memory (over all shards) and the rest in a disk tier (0: memory only)")
  long diskTierMaxKeys;
  @Option(names = "--redis-tier-max-keys", defaultValue = "0", description = "keep at most this"
      + " many rows in memory (over all shards) and the rest in a Redis tier (needs --redis; 0:"
      + " no Redis tier)")
  long redisTierMaxKeys;
  @Option(names = "--redis", description = "host:port of a throw-away Redis server for"
      + " --redis-tier-max-keys (bin/table-bench reshard starts one)")
  String redis;
  @Option(names = "--base-port", defaultValue = "17600",
      description = "first port of the shard processes (default ${DEFAULT-VALUE})") int basePort;
  @Option(names = "--fsync", defaultValue = "everysec",
      description = "the shards' --fsync policy (always, everysec, off)")
  String fsync;

  public static void main(String[] args) {
    System.exit(new CommandLine(new ReshardBench()).execute(args));
  }

  /** Trainer steps' rows per 250 ms window, stamped with the window's end (ns). */
  private final List<long[]> windows = java.util.Collections.synchronizedList(new ArrayList<>());

  private Thread trainer(TableClient c, AtomicBoolean stop, AtomicReference<Throwable> err) {
    return new Thread(() -> {
      try {
        EmbeddingTable t = c.openTable("rs");
        SplittableRandom rnd = new SplittableRandom(5);
        Zipf z = new Zipf(numKeys, 1.0);
        String[] keys = new String[batch];
        float[] g = new float[batch * dim];
        Arrays.fill(g, 0.01f);
        long step = 0;
        long windowStart = System.nanoTime();
        long rows = 0;
        while (!stop.get()) {
          for (int i = 0; i < batch; i++) {
            keys[i] = "key:" + z.next(rnd);
          }
          t.findOrInsert(keys);
          t.applyGradients(keys, g, 0f, ++step);
          rows += batch;
          long now = System.nanoTime();
          if (now - windowStart >= 250_000_000L) {
            windows.add(new long[] {now, rows * 1_000_000_000L / (now - windowStart)});
            windowStart = now;
            rows = 0;
          }
        }
      } catch (Throwable e) {
        err.set(e);
      }
    }, "trainer");
  }

  /** Median and lowest rows/s of the windows ending in [from, to). */
  private String rate(long from, long to) {
    List<Long> r = new ArrayList<>();
    synchronized (windows) {
      for (long[] w : windows) {
        if (w[0] >= from && w[0] < to) {
          r.add(w[1]);
        }
      }
    }
    if (r.isEmpty()) {
      return "n/a";
    }
    r.sort(null);
    return String.format(Locale.ROOT, "%,d (lowest %,d)", r.get(r.size() / 2), r.get(0));
  }

  @Override
  public Integer call() throws Exception {
    System.out.printf(Locale.ROOT, "live resharding of a table of %,d keys, dim %d, Adagrad, while"
        + " a trainer runs lookup+update batches of %,d Zipf keys; shards --fsync %s; JDK %s,"
        + " %d cores%n", numKeys, dim, batch, fsync, System.getProperty("java.version"),
        Runtime.getRuntime().availableProcessors());
    if (redisTierMaxKeys > 0 && (redis == null || diskTierMaxKeys > 0)) {
      throw new CommandLine.ParameterException(new CommandLine(this), "--redis-tier-max-keys"
          + " needs --redis host:port and no --disk-tier-max-keys");
    }
    List<String> shardArgs = new ArrayList<>(List.of("--fsync", fsync));
    if (redisTierMaxKeys > 0) {
      shardArgs.addAll(List.of("--redis-tier", "redis://" + redis));
    }
    Path dir = Files.createTempDirectory("reshard-bench");
    try (LocalShardProcesses p = new LocalShardProcesses(3, basePort, dir, "4g", "", List.of(),
        shardArgs);
        TableClient admin = TableClients.connect(p.endpoints());
        TableClient train = TableClients.connect(p.endpoints())) {
      // a cluster of 2 shards (their implicit map) with a third shard beside it owning nothing
      SlotMap two = SlotMap.implicit(2).extended(3, 1);
      for (Shard s : ((ShardedTableClient) admin).shards()) {
        Shard.await(s.installSlotMap(two.toProto()));
      }
      var config = TableConfigs.builder("rs", dim)
          .setOptimizer(TableConfigs.adagrad(0.1f, 0.1f, 1e-8f));
      if (diskTierMaxKeys > 0) {
        config.setMaxKeys(diskTierMaxKeys).setDiskTier(true);
        System.out.printf(Locale.ROOT, "disk tier: at most %,d rows in memory over the shards%n",
            diskTierMaxKeys);
      }
      if (redisTierMaxKeys > 0) {
        config.setMaxKeys(redisTierMaxKeys).setRedisTier(true);
        System.out.printf(Locale.ROOT, "redis tier (%s): at most %,d rows in memory over the"
            + " shards, every row written behind%n", redis, redisTierMaxKeys);
      }
      EmbeddingTable t = admin.createTable(config.build());
      long l0 = System.nanoTime();
      for (int i = 0; i < numKeys; i += 65536) {
        String[] part = new String[Math.min(65536, numKeys - i)];
        for (int j = 0; j < part.length; j++) {
          part[j] = "key:" + (i + j);
        }
        t.findOrInsert(part);
      }
      System.out.printf(Locale.ROOT, "loaded %,d keys on 2 shards in %.1f s%n", numKeys,
          (System.nanoTime() - l0) / 1e9);
      AtomicBoolean stop = new AtomicBoolean();
      AtomicReference<Throwable> err = new AtomicReference<>();
      Thread tr = trainer(train, stop, err);
      tr.start();
      System.out.println("| move | rows moved | seconds | rows/s moved | longest pause |"
          + " trainer rows/s before | during | after |");
      System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|");
      for (int target : new int[] {3, 2}) {
        Thread.sleep(settle * 1000L);
        long before = System.nanoTime() - settle * 1_000_000_000L;
        long m0 = System.nanoTime();
        List<String> steps = new ArrayList<>();
        Resharding.Result r = Resharding.rebalance(admin, target, steps::add);
        long m1 = System.nanoTime();
        Thread.sleep(settle * 1000L);
        double secs = (m1 - m0) / 1e9;
        System.out.printf(Locale.ROOT, "| %s | %,d | %.2f | %,.0f | %.0f ms | %s | %s | %s |%n",
            target == 3 ? "2 -> 3" : "3 -> 2", r.rowsMoved(), secs, r.rowsMoved() / secs,
            r.longestPauseMillis(), rate(before, m0), rate(m0, m1),
            rate(m1, System.nanoTime()));
        steps.forEach(line -> System.out.println("    " + line));
      }
      stop.set(true);
      tr.join();
      if (err.get() != null) {
        throw new AssertionError("the trainer failed during the moves", err.get());
      }
      long keys = t.describe().getCounters().getKeys();
      System.out.printf(Locale.ROOT, "keys after the moves: %,d (loaded %,d; the trainer's Zipf"
          + " keys are among them)%n", keys, numKeys);
    }
    return 0;
  }
}
