package dev.dynembed.table.bench;

import picocli.CommandLine.Option;

/**
 * The table and the batches of the benchmarks that train one Zipf-keyed table (the disk tier's,
 * live resharding's): its keys, its row width, keys per call. Options of each subcommand that
 * extends it (picocli reads a superclass's annotated fields).
 */
abstract class TableShapeOptions {
  @Option(names = "--keys", defaultValue = "1000000",
      description = "keys in the table (default ${DEFAULT-VALUE})") int numKeys;
  @Option(names = "--dim", defaultValue = "64",
      description = "values per row (default ${DEFAULT-VALUE})") int dim;
  @Option(names = "--batch", defaultValue = "4096",
      description = "keys per call (default ${DEFAULT-VALUE})") int batch;
}
