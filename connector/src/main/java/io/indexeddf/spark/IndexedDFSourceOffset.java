package io.indexeddf.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import org.apache.spark.sql.execution.streaming.Offset;

/**
 * Where a stream over an indexeddf table stands (Delta's {@code DeltaSourceOffset}): every file
 * at or before position ({@code reservoirVersion}, {@code index}) has been read. With
 * {@code isStartingVersion} the version's files are its snapshot's live files (the initial
 * snapshot of a stream started without {@code startingVersion}), sorted by modification time
 * and path; otherwise they are the files commit {@code reservoirVersion} added, in the commit's
 * order. {@code index} -1 stands before the version's first file: ({@code v}, -1, false) is
 * "every version before {@code v} read, nothing of {@code v}". {@code reservoirId} is the
 * table's {@code metaData.id}: a checkpoint is never resumed on another table.
 */
public final class IndexedDFSourceOffset extends Offset {
    /** The version of this offset's JSON form. */
    static final int SOURCE_VERSION = 1;

    /** The table's {@code metaData.id}. */
    public final String reservoirId;
    /** The version the position is in. */
    public final long reservoirVersion;
    /** The position of the last file read in the version, -1 before its first. */
    public final long index;
    /** Whether the version's files are its snapshot's (the initial snapshot) rather than its commit's. */
    public final boolean isStartingVersion;

    IndexedDFSourceOffset(String reservoirId, long reservoirVersion, long index, boolean isStartingVersion) {
        this.reservoirId = reservoirId;
        this.reservoirVersion = reservoirVersion;
        this.index = index;
        this.isStartingVersion = isStartingVersion;
    }

    /** The offset a checkpoint holds ({@link #json()}), checked to be of the table {@code tableId}. */
    static IndexedDFSourceOffset parse(String json, String tableId, String table) {
        JsonNode n;
        try {
            n = DeltaLog.JSON.readTree(json);
        } catch (IOException e) {
            throw offsetError(json, table, "it is not JSON");
        }
        if (n == null || !n.hasNonNull("reservoirVersion") || !n.hasNonNull("index")) {
            throw offsetError(json, table, "it is no offset of an indexeddf table");
        }
        if (n.path("sourceVersion").asInt(SOURCE_VERSION) > SOURCE_VERSION) {
            throw offsetError(json, table, "a newer indexeddf wrote it");
        }
        String id = n.path("reservoirId").asText("");
        if (tableId != null && !id.isEmpty() && !id.equals(tableId)) {
            throw new IndexedDFException("InvalidOptionError", "the checkpoint of this stream was made reading "
                + "the table with id " + id + ", but " + table + " has id " + tableId + " (another table, or the "
                + "table deleted and created again at that path): start the query with a new checkpoint location");
        }
        return new IndexedDFSourceOffset(id, n.path("reservoirVersion").asLong(), n.path("index").asLong(),
            n.path("isStartingVersion").asBoolean(false));
    }

    private static IndexedDFException offsetError(String json, String table, String why) {
        return new IndexedDFException("InvalidOptionError", "the checkpoint of the stream reading " + table
            + " holds the offset " + json + ", which indexeddf cannot resume from (" + why + "): start the "
            + "query with a new checkpoint location");
    }

    /** Whether the position of {@code this} is after that of {@code other}. */
    boolean after(IndexedDFSourceOffset other) {
        return reservoirVersion != other.reservoirVersion ? reservoirVersion > other.reservoirVersion
            : index > other.index;
    }

    @Override
    public String json() {
        ObjectNode n = DeltaLog.JSON.createObjectNode();
        n.put("sourceVersion", SOURCE_VERSION);
        n.put("reservoirId", reservoirId);
        n.put("reservoirVersion", reservoirVersion);
        n.put("index", index);
        n.put("isStartingVersion", isStartingVersion);
        return n.toString();
    }
}
