package dev.dynembed.table.tools.cli;

import dev.dynembed.table.client.ClientOptions;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * How a command reaches shards: its credentials towards shards that require them
 * (docs/design/0009-security.md) and the transport of the data calls
 * (docs/design/0015-data-plane.md); shared by {@code bin/table-cli} and {@code bin/word2vec}.
 */
public final class ConnectionOptions {
  @Option(names = "--tls-ca", description = "PEM CA that signs the shards' certificates: connect"
      + " with TLS")
  Path ca;

  @Option(names = "--tls-cert", description = "PEM certificate chain of this client (mutual TLS)")
  Path cert;

  @Option(names = "--tls-key", description = "PEM (PKCS#8) key of --tls-cert")
  Path key;

  @Option(names = "--token-file", description = "file holding a bearer token sent with every"
      + " call (kept out of the command line and the process list)")
  Path tokenFile;

  @Option(names = "--data-plane", description = "transport of the training step's Read and"
      + " Write calls to shards: native (binary frames on the shard's data-plane port) or grpc"
      + " (default: native, or the system property dynembed.dataPlane)")
  String dataPlane;

  @Option(names = "--row-cache-mb", defaultValue = "0", description = "trainer-side cache of"
      + " each table's hot rows, MiB of rows and optimizer slots per table (0 = none): reads"
      + " of a cached row and this process's gradients stay here and are sent every"
      + " --max-staleness steps, one row per word (docs/design/0022-row-cache.md; default"
      + " ${DEFAULT-VALUE})")
  long rowCacheMb;

  /** The default of {@code --max-staleness}: chosen from measurements (docs/benchmarks.md). */
  public static final int DEFAULT_MAX_STALENESS = 32;

  @Option(names = "--max-staleness", defaultValue = "" + DEFAULT_MAX_STALENESS, description = "with --row-cache-mb:"
      + " steps (gradient batches of a table, all threads) a cached row is served for before"
      + " it is read again, and between two sends of the cached rows' gradients (0 = no cache;"
      + " default ${DEFAULT-VALUE})")
  int maxStaleness;

  /** Adds the options to {@code b}; a clear IllegalArgumentException for bad values or files. */
  public ClientOptions.Builder apply(ClientOptions.Builder b) {
    if (rowCacheMb < 0 || rowCacheMb > (1L << 30) || maxStaleness < 0) {
      throw new IllegalArgumentException("--row-cache-mb must be in [0, 2^30] and"
          + " --max-staleness >= 0 but were " + rowCacheMb + " and " + maxStaleness);
    }
    b.rowCache(new ClientOptions.RowCaching(rowCacheMb << 20, maxStaleness));
    if (dataPlane != null) {
      try {
        b.dataPlane(ClientOptions.DataPlane.valueOf(
            dataPlane.toUpperCase(java.util.Locale.ROOT)));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--data-plane must be native or grpc but was '"
            + dataPlane + "'");
      }
    }
    if (ca == null && (cert != null || key != null)) {
      throw new IllegalArgumentException("--tls-cert and --tls-key need --tls-ca");
    }
    if (ca != null) {
      b.tls(new ClientOptions.Tls(ca, cert, key));
    }
    if (tokenFile != null) {
      try {
        b.bearerToken(Files.readString(tokenFile, StandardCharsets.UTF_8).strip());
      } catch (IOException e) {
        throw new IllegalArgumentException("--token-file: cannot read " + tokenFile);
      }
    }
    return b;
  }
}
