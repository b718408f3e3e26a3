package io.indexeddf.spark;

import io.indexeddf.log.Spec;
import io.indexeddf.spark.exec.IndexSegments;
import io.indexeddf.spark.exec.ParquetRows;
import io.indexeddf.spark.exec.PlanReport;
import io.indexeddf.spark.exec.RowCache;
import io.indexeddf.spark.exec.RowGroupReader;
import org.apache.spark.sql.Dataset;

/**
 * The connector's counters, for tests and benchmarks (called from Python through py4j:
 * {@code tests/connector_helpers.py}, {@code benchmarks/scenarios_connector.py}): the JVM
 * caches as the connector accounts them, a way to empty the row cache, the planner's choice
 * for a filter, and the constants shared with Python. Nothing in a query depends on them.
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

    /** Drops every segment and block the cache of index segments holds. */
    public static void clearSegmentCache() {
        IndexSegments.clear();
    }

    /**
     * Row groups of index files read so far in this JVM: {decoded straight from their pages,
     * read through Spark's Parquet reader} (the second for a layout index writers do not give).
     */
    public static long[] indexBlockReads() {
        return IndexSegments.readStats();
    }

    /**
     * Data row groups read for a point lookup's few rows so far in this JVM: {decoded straight
     * from their pages, read through Spark's Parquet reader after the page path declined them,
     * the page reads' wall time in ns, few-row reads through Spark's reader (declined, or not
     * tried: system property {@code indexeddf.dataPages.off} true), their wall time in ns}.
     */
    public static long[] dataGroupReads() {
        return RowGroupReader.fewRowReadStats();
    }

    /** The cache of Parquet footers (compact): {footers, bytes} held. */
    public static long[] footerCacheStats() {
        return ParquetRows.footerCacheStats();
    }

    /** Drops every footer the footer cache holds. */
    public static void clearFooterCache() {
        ParquetRows.clearFooters();
    }

    /**
     * The connector planner's choice for the filter {@code filtered} (over an indexeddf table), as
     * JSON ({@link PlanReport#filter}).
     */
    public static String planFilter(Dataset<?> filtered) {
        return PlanReport.filter(filtered);
    }

    /** The constants the connector shares with the Python side, as it read them ({@link Spec}). */
    public static String sharedConstants() {
        return Spec.json();
    }
}
