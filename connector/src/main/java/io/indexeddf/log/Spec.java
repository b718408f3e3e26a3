package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.InputStream;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The constants the connector shares with the Python reader and planner (hash seeds, the key
 * cap, staleness defaults, readable states and features, log key names), read when this class
 * loads from {@code io/indexeddf/log/spec.json} in the jar. The build writes that document from
 * {@code indexeddf/spec/} ({@code indexeddf/spec/shared.py}), where each value is defined once:
 * no Java source repeats one, so the two languages cannot disagree. Without the document the
 * class fails to load (a jar not built by {@code indexeddf.spark.connector.build_jar}).
 */
public final class Spec {
    /** Where the document is on the class path. */
    public static final String RESOURCE = "io/indexeddf/log/spec.json";

    private static final JsonNode DOC = load();

    /** Seed of Spark's {@code hash()}, with which data files and index files are bucketed (PROTOCOL.md 10). */
    public static final int BUCKET_SEED = DOC.path("bucketSeed").asInt();
    /** Seed of the index entries' key hash (PROTOCOL.md 10.5). */
    public static final int KEY_HASH_SEED = (int) DOC.path("keyHashSeed").asLong();
    /**
     * Share of an index file's blocks (row groups, each a key hash range) past which a probe reads
     * the whole file instead of the blocks holding its hashes.
     */
    public static final double INDEX_BLOCK_SHARE = DOC.path("indexBlockShare").asDouble();
    /** The most keys one index lookup takes; a filter fixing more is answered by a scan. */
    public static final int MAX_INDEX_KEYS = DOC.path("maxIndexKeys").asInt();
    /** States in which an index answers reads (PROTOCOL.md 4.5.3). */
    public static final Set<String> READABLE_STATES = strings("readableStates");
    /** The reader features (protocol 3) indexeddf reads. */
    public static final Set<String> READER_FEATURES = strings("readerFeatures");
    /** The {@code kind} of a table's primary index, which planners try first. */
    public static final String PRIMARY_KIND = text("primaryKind");
    /** {@code metaData.configuration} key of the index (bucketing) columns, a JSON array. */
    public static final String CONF_INDEX_COLUMNS = text("confIndexColumns");
    /** {@code metaData.configuration} key of the bucket count. */
    public static final String CONF_NUM_BUCKETS = text("confNumBuckets");
    /** {@code add.tags} key of a file's bucket. */
    public static final String TAG_BUCKET = text("tagBucket");
    /** {@code add.tags} key of a file's id. */
    public static final String TAG_FILE_ID = text("tagFileId");
    /** {@code add.tags} key that says a file's rows are in index-column order. */
    public static final String TAG_SORTED = text("tagSorted");
    /** Delta's session conf of an idempotent change's {@code txn} app id. */
    public static final String CONF_TXN_APP_ID = text("confTxnAppId");
    /** Delta's session conf of an idempotent change's {@code txn} version. */
    public static final String CONF_TXN_VERSION = text("confTxnVersion");
    /** The magic number of a deletion vector in Delta's portable layout. */
    public static final int DV_MAGIC = (int) DOC.path("dvMagicNumber").asLong();
    /** The magic number of the native layout, which Delta does not define for files. */
    public static final int DV_NATIVE_MAGIC = (int) DOC.path("dvNativeMagicNumber").asLong();
    /** {@code metaData.configuration} key prefix of a CHECK constraint: {@code delta.constraints.<name>}. */
    public static final String CONSTRAINT_PREFIX = text("constraintPrefix");
    /** Delta's error class of a written row that breaks a CHECK constraint. */
    public static final String CONSTRAINT_VIOLATION = text("constraintViolation");
    /** Delta's error class of {@code ADD CONSTRAINT} on a table whose rows break it. */
    public static final String NEW_CONSTRAINT_VIOLATION = text("newConstraintViolation");
    /** The Python writer's option naming the constraints Spark's plan checked (JSON, name to SQL). */
    public static final String CHECKED_CONSTRAINTS_OPTION = text("checkedConstraintsOption");
    /** The table property that turns Delta's change data feed on ({@code delta.enableChangeDataFeed}). */
    public static final String CHANGE_FEED_PROPERTY = text("changeFeedProperty");
    /** The change data feed's column saying what happened to a row ({@code insert}, {@code delete}, ...). */
    public static final String CHANGE_TYPE_COLUMN = text("changeTypeColumn");
    /** The change data feed's column of the version of the commit that made a change. */
    public static final String COMMIT_VERSION_COLUMN = text("commitVersionColumn");
    /** The change data feed's column of when that commit was made. */
    public static final String COMMIT_TIMESTAMP_COLUMN = text("commitTimestampColumn");
    /** The read option asking for the change data feed ({@code readChangeFeed}, Delta's name). */
    public static final String CHANGE_FEED_OPTION = text("changeFeedOption");
    /** Delta's older name of {@link #CHANGE_FEED_OPTION} ({@code readChangeData}). */
    public static final String CHANGE_FEED_OPTION_ALIAS = text("changeFeedOptionAlias");

    private Spec() {
    }

    /** The default of a table property the connector reads (as stored: a string). */
    public static String propertyDefault(String name) {
        JsonNode v = DOC.path("propertyDefaults").get(name);
        if (v == null) {
            throw new IllegalArgumentException("no shared default for table property " + name);
        }
        return v.asText();
    }

    /** The whole document, as read (for diagnostics and the test that compares it with Python). */
    public static String json() {
        return DOC.toString();
    }

    private static JsonNode load() {
        try (InputStream in = Spec.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(RESOURCE + " is not on the class path: build the connector's jar "
                    + "with python -m indexeddf.spark.connector, which writes it from indexeddf/spec/");
            }
            return new ObjectMapper().readTree(in);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + RESOURCE + ": " + e, e);
        }
    }

    private static String text(String key) {
        JsonNode v = DOC.get(key);
        if (v == null || !v.isTextual()) {
            throw new IllegalStateException(RESOURCE + " has no text " + key);
        }
        return v.asText();
    }

    private static Set<String> strings(String key) {
        Set<String> out = new LinkedHashSet<>();
        for (JsonNode n : DOC.path(key)) {
            out.add(n.asText());
        }
        if (out.isEmpty()) {
            throw new IllegalStateException(RESOURCE + " has no " + key);
        }
        return Collections.unmodifiableSet(out);
    }
}
