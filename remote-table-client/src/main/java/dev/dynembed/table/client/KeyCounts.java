package dev.dynembed.table.client;

/**
 * The reply of {@link EmbeddingTable#count}.
 *
 * @param admitted BOOL [n]: the key has a row
 * @param frequencies LONG [n]: its frequency, or for a key not yet admitted its admission count
 */
public record KeyCounts(boolean[] admitted, long[] frequencies) {}
