package dev.dynembed.table.bench;

import picocli.CommandLine.Option;

/**
 * The HNSW graph's shape, for the benchmarks that build one (the table's index, and the same
 * graph built by other libraries for comparison): options of each subcommand that extends it.
 */
abstract class HnswOptions {
  @Option(names = "--max-conn", defaultValue = "16",
      description = "the HNSW graph's degree (M) (default ${DEFAULT-VALUE})") int maxConn;
  @Option(names = "--beam-width", defaultValue = "100",
      description = "the HNSW graph's construction beam width (default ${DEFAULT-VALUE})")
  int beamWidth;
}
