package dev.dynembed.table.client;

/**
 * A kind of table storage reached by a URI scheme other than our shards' {@code host:port} lists
 * (for example {@code redis://}), found by {@link java.util.ServiceLoader} when its module is on
 * the class path: {@link TableClients#open} picks the provider of the URI's scheme.
 */
public interface TableClientProvider {
  /** The URI schemes served, without "://", e.g. {@code redis}. */
  java.util.List<String> schemes();

  /** A client of the tables at {@code uri}; refuses a malformed URI naming the problem. */
  TableClient open(String uri, ClientOptions options);
}
