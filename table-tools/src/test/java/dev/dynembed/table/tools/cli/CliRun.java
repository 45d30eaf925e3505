package dev.dynembed.table.tools.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import picocli.CommandLine;

/** One {@code table-cli} run in this JVM: its exit code and what it printed to each stream. */
record CliRun(int exit, String out, String err) {
  static CliRun of(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = System.out;
    PrintStream e = System.err;
    System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      int exit = new CommandLine(new TableCli()).execute(args);
      return new CliRun(exit, out.toString(StandardCharsets.UTF_8),
          err.toString(StandardCharsets.UTF_8));
    } finally {
      System.setOut(o);
      System.setErr(e);
    }
  }
}
