package dev.dynembed.table.client;

/**
 * Candidates of one sample call: positives first, then the drawn keys (with replacement).
 *
 * @param keys UTF8 [p + s]
 * @param positive BOOL [p + s]
 * @param probability FLOAT64 [p + s]: probability of drawing the key in one draw over the whole
 *     table (0 for a positive the sampler cannot draw, e.g. a key with no row); the expected count
 *     of a key among s draws is s times this
 * @param numPositives p
 */
public record SampleResult(String[] keys, boolean[] positive, double[] probability,
    int numPositives) {}
