package io.indexeddf.spark;

import io.indexeddf.spark.exec.IndexSegments;
import io.indexeddf.spark.exec.RowCache;

/**
 * The connector's counters, for tests and benchmarks (called from Python through py4j:
 * {@code tests/connector_helpers.py}, {@code benchmarks/scenarios_connector.py}): the JVM
 * caches as the connector accounts them, and a way to empty the row cache. Nothing in a
 * query depends on them.
 */
public final class Diagnostics {
    private Diagnostics() {
    }

    /** The row cache ({@code spark.indexeddf.rowCache.maxBytes}): {row groups, rows, bytes} held. */
    public static long[] rowCacheStats() {
        return RowCache.cacheStats();
    }

    /** Drops every row group the row cache holds. */
    public static void clearRowCache() {
        RowCache.clear();
    }

    /** The cache of index segments: {segments, entries, bytes} held. */
    public static long[] segmentCacheStats() {
        return IndexSegments.cacheStats();
    }
}
