package dev.dynembed.table.client;

import java.nio.file.Path;
import dev.dynembed.table.tools.LocalShardProcesses;

/** Test helper: a process that starts one local shard, prints its PID, then waits to be killed. */
public final class ShardParentMain {
  private ShardParentMain() {}

  public static void main(String[] args) throws Exception {
    LocalShardProcesses procs = new LocalShardProcesses(1, 0, Path.of(args[0]), "128m", "");
    for (ProcessHandle h : ProcessHandle.current().children().toList()) {
      System.out.println("shard pid " + h.pid());
    }
    System.out.println("ready " + procs.endpoints().get(0));
    System.out.flush();
    Thread.sleep(600_000);
  }
}
