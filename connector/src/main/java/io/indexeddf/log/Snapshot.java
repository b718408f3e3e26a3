package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.apache.hadoop.fs.Path;

/**
 * One version of a table, as {@link DeltaLog#snapshot} replays it: its protocol, metadata, live
 * files (in log order), the sizes of removed files, and the indexes at that version.
 */
public final class Snapshot {
    public final Path root;
    public final long version;
    public final JsonNode protocol;
    public final JsonNode metadata;
    public final List<AddFile> files;
    /** Bytes of each removed file (tombstone), by file id. */
    public final Map<Long, Long> tombstoneSizes;
    /** The indexes at this version by name, or null when the log does not say (see {@link DeltaLog#snapshot}). */
    public final Map<String, IndexLog.Entry> indexes;
    /** The indexes at the newest version when this one is older (computed on first use), else null. */
    Supplier<Map<String, IndexLog.Entry>> newestIndexes;
    /**
     * The table and version with the modification time and length of the log file that holds
     * the version: equal only for the same version of the same table (not one deleted and
     * created again at the same path).
     */
    String identity;

    Snapshot(Path root, long version, JsonNode protocol, JsonNode metadata, List<AddFile> files,
             Map<Long, Long> tombstoneSizes, Map<String, IndexLog.Entry> indexes) {
        this.root = root;
        this.version = version;
        this.protocol = protocol;
        this.metadata = metadata;
        this.files = files;
        this.tombstoneSizes = tombstoneSizes;
        this.indexes = indexes;
    }

    /**
     * The indexes at the newest version (replayed on first call), when this snapshot is of an
     * older version: a newer state of an index may serve it (PROTOCOL.md 4.5.4); else null.
     */
    public Supplier<Map<String, IndexLog.Entry>> newestIndexes() {
        return newestIndexes;
    }

    /** What tells this version of this table apart from any other (see the field). */
    public String identity() {
        return identity;
    }

    /** {@code metaData.partitionColumns}, in the log's order (empty: unpartitioned). */
    public List<String> partitionColumns() {
        List<String> out = new ArrayList<>();
        for (JsonNode n : metadata.path("partitionColumns")) {
            out.add(n.asText());
        }
        return out;
    }

    /** {@code metaData.schemaString}. */
    public String schemaString() {
        return metadata.path("schemaString").asText();
    }

    /** A {@code metaData.configuration} value, or null. */
    public String configuration(String key) {
        JsonNode v = metadata.path("configuration").get(key);
        return v == null || v.isNull() ? null : v.asText();
    }

    /** The index (bucketing) columns. */
    public List<String> indexColumns() {
        List<String> out = new ArrayList<>();
        try {
            for (JsonNode n : DeltaLog.JSON.readTree(configuration(DeltaLog.CONF_INDEX_COLUMNS))) {
                out.add(n.asText());
            }
        } catch (IOException e) {
            throw IndexedDFException.corrupt(root, DeltaLog.CONF_INDEX_COLUMNS + " is not a JSON array");
        }
        return out;
    }

    /** The bucket count. */
    public int numBuckets() {
        return Integer.parseInt(configuration(DeltaLog.CONF_NUM_BUCKETS).trim());
    }
}
