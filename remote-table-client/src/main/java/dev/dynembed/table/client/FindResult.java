package dev.dynembed.table.client;

/**
 * @param rows FLOAT [n, dim] row-major; zeros where not found
 * @param found BOOL [n]
 */
public record FindResult(float[] rows, boolean[] found) {}
