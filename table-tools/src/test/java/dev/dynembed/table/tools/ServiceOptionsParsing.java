package dev.dynembed.table.tools;

import dev.dynembed.table.tools.cli.TableServiceOptions;
import picocli.CommandLine;

/** {@link TableServiceOptions} parsed from a command line as the CLIs mix them in. */
final class ServiceOptionsParsing {
  private ServiceOptionsParsing() {}

  /** The options of {@code args}, with 256m shard heaps by default. */
  static TableServiceOptions parse(String... args) {
    TableServiceOptions o = new TableServiceOptions("256m");
    new CommandLine(CommandLine.Model.CommandSpec.create().addMixin("service",
        CommandLine.Model.CommandSpec.forAnnotatedObject(o))).parseArgs(args);
    return o;
  }
}
