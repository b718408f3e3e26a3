package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * What one JSON commit changed, as a streaming read sees it (Delta's {@code DeltaSource}): the
 * files it added with {@code dataChange} true, in the order the commit lists them; whether it
 * removed files with {@code dataChange} true (a DELETE, UPDATE, MERGE or overwrite; a deletion
 * vector given to a file is such a remove of the file with its old vector); and its
 * {@code metaData} / {@code protocol} actions. Files rewritten with {@code dataChange} false
 * (OPTIMIZE) are neither: their rows are already in the table.
 *
 * <p>For a read of the change data feed ({@link ChangeFeed}) it also keeps the files removed
 * with {@code dataChange} true (each with the deletion vector it had), the commit's change
 * data files ({@code cdc} actions, under {@code _change_data/}) and when the commit was made.
 */
public final class CommitActions {
    /** The commit's version. */
    public final long version;
    /** The files added with {@code dataChange} true, in the commit's order. */
    public final List<AddFile> adds;
    /** The path of the first file removed with {@code dataChange} true, or null when none was. */
    public final String firstRemoved;
    /** The files removed with {@code dataChange} true, in the commit's order (see {@link #removedSizeKnown}). */
    public final List<AddFile> removes;
    /**
     * Whether every remove names its file's size and partition values
     * ({@code extendedFileMetadata}); when not, {@link ChangeFeed} takes them from the
     * previous version's add of the file.
     */
    public final boolean removedSizeKnown;
    /** The commit's change data files ({@code cdc} actions), in the commit's order. */
    public final List<AddFile> changeFiles;
    /** When the commit was made, in ms since the epoch (time travel's rule: {@code DeltaLog.commitTime}). */
    public final long timestamp;
    /** The commit's {@code metaData} action, or null. */
    public final JsonNode metadata;
    /** The commit's {@code protocol} action, or null. */
    public final JsonNode protocol;

    private CommitActions(long version, List<AddFile> adds, String firstRemoved, List<AddFile> removes,
                          boolean removedSizeKnown, List<AddFile> changeFiles, long timestamp, JsonNode metadata,
                          JsonNode protocol) {
        this.version = version;
        this.adds = Collections.unmodifiableList(adds);
        this.firstRemoved = firstRemoved;
        this.removes = Collections.unmodifiableList(removes);
        this.removedSizeKnown = removedSizeKnown;
        this.changeFiles = Collections.unmodifiableList(changeFiles);
        this.timestamp = timestamp;
        this.metadata = metadata;
        this.protocol = protocol;
    }

    /** Whether the commit removed rows (a file removed with {@code dataChange} true). */
    public boolean removesRows() {
        return firstRemoved != null;
    }

    /** Reads commit {@code version} of {@code log}; a version whose commit is gone is {@code VersionNotFoundError}. */
    static CommitActions read(LogListing log, long version) {
        FileStatus st = log.commits.get(version);
        if (st == null) {
            throw new IndexedDFException("VersionNotFoundError", log.root + ": commit " + version
                + " is not in the log (a log clean-up removed it, or it was never written); a stream that "
                + "has not read it yet cannot go on from where it stopped: start it again with a new "
                + "checkpoint location (and startingVersion at or after the oldest commit)");
        }
        Path source = st.getPath();
        List<AddFile> adds = new ArrayList<>();
        String removed = null;
        List<AddFile> removes = new ArrayList<>();
        boolean sizes = true;
        List<AddFile> changeFiles = new ArrayList<>();
        JsonNode info = null;
        JsonNode metadata = null;
        JsonNode protocol = null;
        for (String line : log.readLines(source)) {
            if (line.trim().isEmpty()) {
                continue;
            }
            JsonNode action = LogListing.parse(line, source);
            JsonNode add = action.get("add");
            if (add != null && !add.isNull()) {
                if (dataChange(add)) {
                    adds.add(Replay.addFile(add, log.root, source));
                }
                continue;
            }
            JsonNode remove = action.get("remove");
            if (remove != null && !remove.isNull()) {
                if (dataChange(remove)) {
                    if (removed == null) {
                        removed = DeltaPaths.decode(remove.path("path").asText(), source);
                    }
                    removes.add(Replay.addFile(remove, log.root, source));
                    sizes &= remove.path("size").isNumber() && remove.has("partitionValues");
                }
                continue;
            }
            JsonNode cdc = action.get("cdc");
            if (cdc != null && !cdc.isNull()) {
                changeFiles.add(Replay.addFile(cdc, log.root, source));
                continue;
            }
            JsonNode ci = action.get("commitInfo");
            if (ci != null && !ci.isNull()) {
                info = ci;
                continue;
            }
            JsonNode m = action.get("metaData");
            if (m != null && !m.isNull()) {
                metadata = m;
            }
            JsonNode p = action.get("protocol");
            if (p != null && !p.isNull()) {
                ProtocolCheck.checkProtocol(p);
                protocol = p;
            }
        }
        return new CommitActions(version, adds, removed, removes, sizes, changeFiles,
            TimeTravel.commitTime(info, st), metadata, protocol);
    }

    private static boolean dataChange(JsonNode action) {
        JsonNode d = action.get("dataChange");
        return d == null || d.isNull() || d.asBoolean(true);
    }
}
