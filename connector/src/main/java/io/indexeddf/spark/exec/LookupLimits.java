package io.indexeddf.spark.exec;

import org.apache.spark.sql.SparkSession;

/**
 * How much one lookup may do on the driver, and whether it may run at all there or as tasks
 * ({@code spark.indexeddf.driverLookup.*}, {@code spark.indexeddf.lookup.maxReadFraction},
 * docs/spark.md): read once a query by the planning rules, handed to the planner and readers.
 */
public final class LookupLimits {
    /** The prefix of the driver lookup's settings. */
    public static final String CONF = "spark.indexeddf.driverLookup.";

    public final long maxKeys;
    public final int maxRowGroups;
    public final long maxRows;
    public final long maxScanBytes;
    public final long cacheMaxBytes;
    public final boolean driver;
    public final boolean tasks;
    public final double maxReadFraction;
    /** Whether decoded row groups are cached ({@code spark.indexeddf.rowCache.maxBytes} > 0). */
    public final boolean rowCache;

    public LookupLimits(SparkSession session) {
        driver = Boolean.parseBoolean(session.conf().get(CONF + "enabled", "true"));
        tasks = Boolean.parseBoolean(session.conf().get("spark.indexeddf.lookupTasks.enabled", "true"));
        maxReadFraction = Double.parseDouble(session.conf().get("spark.indexeddf.lookup.maxReadFraction", "0.5"));
        rowCache = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(
            session.conf().get(RowGroupReader.ROW_CACHE_CONF, "0")) > 0;
        maxKeys = Long.parseLong(session.conf().get(CONF + "maxKeys", "1000"));
        maxRowGroups = Integer.parseInt(session.conf().get(CONF + "maxRowGroups", "256"));
        maxRows = Long.parseLong(session.conf().get(CONF + "maxRows", "100000"));
        maxScanBytes = Long.parseLong(session.conf().get(CONF + "maxScanBytes", String.valueOf(32L << 20)));
        cacheMaxBytes = Long.parseLong(session.conf().get("spark.indexeddf.cache.maxBytes",
            String.valueOf(IndexSegments.DEFAULT_MAX_BYTES)));
    }
}
