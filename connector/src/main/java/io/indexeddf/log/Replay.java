package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * The replay of a table's log up to one version: the newest classic checkpoint at or before it
 * ({@code _last_checkpoint} names the newest one), then the JSON commits after it;
 * {@code add}/{@code remove} reconciled by path and deletion vector ({@code (path,
 * deletionVector.uniqueId)} is a file's key, PROTOCOL.md "Action Reconciliation": a commit that
 * gives a file a new DV removes the file with its old DV and adds it with the new one, in either
 * order), the latest {@code protocol} and {@code metaData} winning, each commit's index actions
 * applied to the index log ({@link IndexLog}).
 */
final class Replay {
    private final Path root;
    JsonNode protocol;
    JsonNode metadata;
    /** Live files by {@link #key}. */
    final LinkedHashMap<String, AddFile> adds = new LinkedHashMap<>();
    final Map<String, Long> tombstoneIds = new HashMap<>();
    final Map<Long, Long> tombstones = new HashMap<>();
    Map<String, IndexLog.Entry> indexes = new LinkedHashMap<>();

    private Replay(Path root) {
        this.root = root;
    }

    /** The snapshot of {@code target} (checked readable), replayed from {@code log}. */
    static Snapshot snapshot(LogListing log, long target) {
        return snapshot(log, target, false);
    }

    /**
     * The snapshot of {@code target}, replayed from {@code log}; with {@code unindexedOk} a Delta
     * table indexeddf has not indexed is no error (what {@code CONVERT TO INDEXEDDF} reads).
     */
    static Snapshot snapshot(LogListing log, long target, boolean unindexedOk) {
        Long start = null;
        Long hinted = log.lastCheckpointHint();
        if (hinted != null && hinted <= target && log.checkpoints.containsKey(hinted)) {
            start = hinted;
        }
        Long floor = log.checkpoints.floorKey(target);
        if (floor != null && (start == null || floor > start)) {
            start = floor;
        }
        Replay state = new Replay(log.root);
        long from = 0;
        if (start != null) {
            for (FileStatus part : log.checkpoints.get(start)) {
                CheckpointReader.read(part, log.fs.getConf(), state);
            }
            state.indexes = IndexLog.stateAt(log, start);
            if (state.indexes == null && state.metadata != null
                    && !state.metadata.path("configuration").has(DeltaLog.CONF_INDEX_COLUMNS)) {
                // Another engine's checkpoint of a table indexeddf had not indexed yet: there
                // were no indexes then, whatever commits a log clean-up removed since.
                state.indexes = new LinkedHashMap<>();
            }
            from = start + 1;
        }
        for (long v = from; v <= target; v++) {
            FileStatus st = log.commits.get(v);
            if (st == null) {
                throw new IndexedDFException("VersionNotFoundError",
                    log.root + ": commit " + v + " is missing from the log, so version " + target
                    + " cannot be reconstructed; pick a version at or after the oldest checkpoint");
            }
            for (String line : log.readLines(st.getPath())) {
                if (!line.trim().isEmpty()) {
                    state.apply(LogListing.parse(line, st.getPath()), false, st.getPath());
                }
            }
        }
        if (state.protocol == null || state.metadata == null) {
            // Named by the file the replay started from, which should have held them, as the
            // Python replay names it.
            Object first = start != null ? log.checkpoints.get(start).get(0).getPath() : log.commits.get(0L).getPath();
            throw IndexedDFException.corrupt(first, "version " + target
                + " has no protocol or metaData action (replayed from this file on)");
        }
        ProtocolCheck.checkReadable(log.root, state.protocol, state.metadata, unindexedOk);
        // A file re-vectored with its remove after its add (Delta writers may order them so)
        // is live, not removed: no tombstone for it.
        for (AddFile a : state.adds.values()) {
            Long id = state.tombstoneIds.remove(a.path);
            if (id != null) {
                state.tombstones.remove(id);
            }
        }
        return new Snapshot(log.root, target, state.protocol, state.metadata, new ArrayList<>(state.adds.values()),
            state.tombstones, state.indexes);
    }

    /** Applies one line's actions (a commit's, or a checkpoint row's). */
    void apply(JsonNode line, boolean fromCheckpoint, Path source) {
        Iterator<Map.Entry<String, JsonNode>> it = line.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode body = e.getValue();
            if (body == null || body.isNull()) {
                continue;
            }
            switch (e.getKey()) {
                case "protocol":
                    protocol = body;
                    // Refuse early: later actions may use what the feature changes.
                    ProtocolCheck.checkProtocol(body);
                    break;
                case "metaData":
                    ProtocolCheck.checkIndexedColumnsKept(root, metadata, body, indexes);
                    metadata = body;
                    break;
                case "add": {
                    AddFile a = addFile(body, root, source);
                    adds.put(key(a.path, a.deletionVector), a);
                    Long was = tombstoneIds.remove(a.path);
                    if (was != null) {
                        tombstones.remove(was);
                    }
                    break;
                }
                case "remove": {
                    String path = DeltaPaths.decode(body.path("path").asText(), source);
                    AddFile live = fromCheckpoint ? null
                        : adds.remove(key(path, DeletionVectorDescriptor.of(body, root, source)));
                    // A remove without our tags keeps the id the live file had.
                    long id = live != null ? live.fileId : FileIds.fileId(body.path("tags"), path, source);
                    long size = body.hasNonNull("size") ? body.path("size").asLong() : live != null ? live.size : 0;
                    tombstoneIds.put(path, id);
                    tombstones.put(id, size);
                    break;
                }
                case "commitInfo":
                    if (indexes != null && !fromCheckpoint) {
                        IndexLog.apply(indexes, body, source);
                    }
                    break;
                default:
                    break;  // txn, commitInfo, cdc, domainMetadata, ...: nothing a scan needs
            }
        }
    }

    /** The live file an {@code add} action of {@code source} (a commit or checkpoint of the table at {@code root}) names. */
    static AddFile addFile(JsonNode body, Path root, Path source) {
        String encoded = body.path("path").asText();
        String path = DeltaPaths.decode(encoded, source);
        JsonNode tags = body.path("tags");
        Integer bucket = null;
        JsonNode b = tags.get(DeltaLog.TAG_BUCKET);
        if (b != null && !b.isNull()) {
            try {
                bucket = Integer.parseInt(b.asText().trim());
            } catch (NumberFormatException ex) {
                throw IndexedDFException.corrupt(root,
                    source + ": tag " + DeltaLog.TAG_BUCKET + " must be a decimal string");
            }
        }
        DeletionVectorDescriptor dv = DeletionVectorDescriptor.of(body, root, source);
        return new AddFile(path, DeltaPaths.location(root, encoded, source), body.path("size").asLong(),
            body.path("modificationTime").asLong(), bucket, FileIds.fileId(tags, path, source),
            "true".equals(tags.path(DeltaLog.TAG_SORTED).asText(null)), dv,
            ProtocolCheck.partitionValues(body, root, source));
    }

    /** A file's key in the set of live files: its path, and its DV's unique id when it has one. */
    private static String key(String path, DeletionVectorDescriptor dv) {
        return dv == null ? path : path + "\u0000" + dv.uniqueId();
    }
}
