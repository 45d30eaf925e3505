package dev.dynembed.table.client;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * What the network-fault tests share: a client without resends (0.7 s deadline) whose calls must
 * fail while a fault cuts a shard off, so that a fault that does not bite (a harness gone wrong)
 * fails the test instead of passing it; and signals to shard processes (SIGSTOP, SIGCONT).
 */
final class FaultProbe implements AutoCloseable {
  private final TableClient client;
  private final EmbeddingTable table;
  private final int shards;

  /** Opens {@code table} at {@code spec} and checks that every shard answers it now. */
  FaultProbe(String spec, String table, int shards) {
    this.client = TableClients.open(spec, ClientOptions.builder().retryFor(Duration.ZERO)
        .deadline(Duration.ofMillis(700)).build());
    this.table = client.openTable(table);
    this.shards = shards;
    for (int i = 0; i < shards; i++) {
      table(i); // answered while the network is whole
    }
  }

  private void table(int shard) {
    table.find(new String[] {key(shard)});
  }

  /** A call to a key of {@code shard} fails; else an AssertionError naming {@code fault}. */
  void assertCut(int shard, String fault) {
    try {
      table(shard);
    } catch (RuntimeException e) {
      return; // the fault bites
    }
    throw new AssertionError(fault + " on shard " + shard + ": a call to it was answered");
  }

  /** A key that shard {@code shard} owns. */
  private String key(int shard) {
    for (int i = 0; ; i++) {
      if (dev.dynembed.table.common.KeyHashing.shardOf("probe" + i, shards) == shard) {
        return "probe" + i;
      }
    }
  }

  /** Sends {@code kill -SIG} to a process. */
  static void signal(String sig, long pid) throws Exception {
    Process p = new ProcessBuilder("kill", "-" + sig, String.valueOf(pid)).inheritIO().start();
    if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new AssertionError("kill -" + sig + " " + pid + " failed");
    }
  }

  @Override
  public void close() {
    client.close();
  }
}
