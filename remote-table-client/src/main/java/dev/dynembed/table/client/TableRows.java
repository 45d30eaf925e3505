package dev.dynembed.table.client;

/**
 * Rows of a lookup with each key's optimizer state, from {@link TableReads#lookup}.
 *
 * @param rows FLOAT [n, dim], zeros where not found
 * @param found BOOL [n]: the key has a row (for a counting lookup with admission: is admitted)
 * @param slots FLOAT [n, slots x dim]: each key's optimizer slots (slot 0, then slot 1; zeros
 *     where not found), or null when not asked for or the optimizer keeps none
 * @param updateCounts LONG [n]: each key's update count, or null when not asked for
 */
public record TableRows(float[] rows, boolean[] found, float[] slots, long[] updateCounts) {}
