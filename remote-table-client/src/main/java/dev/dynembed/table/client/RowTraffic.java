package dev.dynembed.table.client;

/**
 * What a table's client moved to and from its shards, and what its row cache saved
 * (docs/design/0022-row-cache.md); {@link TableClients#traffic}. Counters since the table was
 * opened by this client.
 *
 * @param rowsRead rows read from the shards (distinct keys per shard call: lookups, draws,
 *     refreshes)
 * @param valuesRead float values those rows carried (rows, and optimizer slots where asked for)
 * @param rowsWritten gradient rows sent to the shards (distinct keys per call, flushes included)
 * @param valuesWritten float values those gradient rows carried
 * @param cacheHits keys answered by the row cache
 * @param cacheMisses keys the row cache could not answer (absent or older than the staleness bound)
 * @param cacheRefreshes cached rows replaced by a fresher read
 * @param localUpdates gradient rows applied to cached rows in this process
 * @param flushedRows pending gradient rows the cache sent (one per key per flush)
 * @param countedKeys keys whose cache-served reads were counted on the shards
 * @param flushes flushes of the cache
 * @param cacheEvictions rows the cache evicted
 * @param cachedRows rows in the cache now (estimate)
 * @param maxStaleness the cache's bound S in steps (0: no cache)
 * @param meanAge mean age in steps of the rows the cache served
 * @param maxAge the oldest row the cache served, in steps
 */
public record RowTraffic(
    long rowsRead, long valuesRead, long rowsWritten, long valuesWritten, long cacheHits, long
    cacheMisses, long cacheRefreshes, long localUpdates, long flushedRows, long countedKeys, long
    flushes, long cacheEvictions, long cachedRows, long maxStaleness, double meanAge, long maxAge) {
  public static Builder builder() {
    return new Builder();
  }

  /** Counters of two tables (or two clients) added; the cache's bound and ages are the larger. */
  public RowTraffic plus(RowTraffic o) {
    return new RowTraffic(rowsRead + o.rowsRead,
        valuesRead + o.valuesRead,
        rowsWritten + o.rowsWritten,
        valuesWritten + o.valuesWritten,
        cacheHits + o.cacheHits,
        cacheMisses + o.cacheMisses,
        cacheRefreshes + o.cacheRefreshes,
        localUpdates + o.localUpdates,
        flushedRows + o.flushedRows,
        countedKeys + o.countedKeys,
        flushes + o.flushes,
        cacheEvictions + o.cacheEvictions,
        cachedRows + o.cachedRows,
        Math.max(maxStaleness, o.maxStaleness),
        cacheHits + o.cacheHits == 0 ? 0
            : (meanAge * cacheHits + o.meanAge * o.cacheHits) / (cacheHits + o.cacheHits),
        Math.max(maxAge, o.maxAge));
  }

  /** The cache's hit rate: hits / (hits + misses); 0 without a cache. */
  public double hitRate() {
    long all = cacheHits + cacheMisses;
    return all == 0 ? 0 : (double) cacheHits / all;
  }

  /** Builds a {@link RowTraffic}; every counter starts at 0. */
  public static final class Builder {
    private long rowsRead;
    private long valuesRead;
    private long rowsWritten;
    private long valuesWritten;
    private long cacheHits;
    private long cacheMisses;
    private long cacheRefreshes;
    private long localUpdates;
    private long flushedRows;
    private long countedKeys;
    private long flushes;
    private long cacheEvictions;
    private long cachedRows;
    private long maxStaleness;
    private double meanAge;
    private long maxAge;

    public Builder rowsRead(long v) {
      rowsRead = v;
      return this;
    }

    public Builder valuesRead(long v) {
      valuesRead = v;
      return this;
    }

    public Builder rowsWritten(long v) {
      rowsWritten = v;
      return this;
    }

    public Builder valuesWritten(long v) {
      valuesWritten = v;
      return this;
    }

    public Builder cacheHits(long v) {
      cacheHits = v;
      return this;
    }

    public Builder cacheMisses(long v) {
      cacheMisses = v;
      return this;
    }

    public Builder cacheRefreshes(long v) {
      cacheRefreshes = v;
      return this;
    }

    public Builder localUpdates(long v) {
      localUpdates = v;
      return this;
    }

    public Builder flushedRows(long v) {
      flushedRows = v;
      return this;
    }

    public Builder countedKeys(long v) {
      countedKeys = v;
      return this;
    }

    public Builder flushes(long v) {
      flushes = v;
      return this;
    }

    public Builder cacheEvictions(long v) {
      cacheEvictions = v;
      return this;
    }

    public Builder cachedRows(long v) {
      cachedRows = v;
      return this;
    }

    public Builder maxStaleness(long v) {
      maxStaleness = v;
      return this;
    }

    public Builder meanAge(double v) {
      meanAge = v;
      return this;
    }

    public Builder maxAge(long v) {
      maxAge = v;
      return this;
    }

    public RowTraffic build() {
      return new RowTraffic(
          rowsRead, valuesRead, rowsWritten, valuesWritten, cacheHits, cacheMisses, cacheRefreshes,
          localUpdates, flushedRows, countedKeys, flushes, cacheEvictions, cachedRows, maxStaleness,
          meanAge, maxAge);
    }
  }
}
