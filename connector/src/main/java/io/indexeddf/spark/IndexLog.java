package io.indexeddf.spark;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The index log that rides in the Delta log (docs/PROTOCOL.md 4.5): each commit's
 * {@code commitInfo.indexeddf.indexes} changes indexes, and {@code _indexes/_state/<v>.json}
 * holds the state at a checkpoint. Replay keeps, per name, the latest action's fields and
 * reconciles the file set as the Python reader does ({@code format/snapshot.py merge_index}).
 */
public final class IndexLog {
    /** States in which an index answers reads (PROTOCOL.md 4.5.3). */
    public static final Set<String> READABLE_STATES =
        Collections.unmodifiableSet(new HashSet<>(Arrays.asList("ACTIVE", "REFRESHING", "OPTIMIZING")));

    private IndexLog() {
    }

    /** One index file: the entries of one index bucket for some data files. */
    public static final class IndexFile {
        public final String path;
        public final long size;
        public final int bucket;
        public final long numEntries;
        /** Ids of the data files this index file has entries for. */
        public final long[] fileIds;

        IndexFile(String path, long size, int bucket, long numEntries, long[] fileIds) {
            this.path = path;
            this.size = size;
            this.bucket = bucket;
            this.numEntries = numEntries;
            this.fileIds = fileIds;
        }
    }

    /** One index at one version. */
    public static final class Entry {
        public final String name;
        public final List<String> columns;
        public final String kind;
        public final String state;
        public final int numBuckets;
        public final List<IndexFile> files;

        Entry(String name, List<String> columns, String kind, String state, int numBuckets, List<IndexFile> files) {
            this.name = name;
            this.columns = columns;
            this.kind = kind;
            this.state = state;
            this.numBuckets = numBuckets;
            this.files = files;
        }

        /** Whether readers may use it. */
        public boolean readable() {
            return READABLE_STATES.contains(state);
        }

        /** Ids of the data files it covers (empty unless readable). */
        public Set<Long> coveredIds() {
            Set<Long> out = new HashSet<>();
            if (readable()) {
                for (IndexFile f : files) {
                    for (long id : f.fileIds) {
                        out.add(id);
                    }
                }
            }
            return out;
        }
    }

    /** The index after the action {@code change}: its fields, and the reconciled file set. */
    static Entry merge(Entry before, JsonNode change, Object source) {
        String name = text(change, "name", source);
        List<String> columns = new ArrayList<>();
        for (JsonNode c : change.path("columns")) {
            columns.add(c.asText());
        }
        List<IndexFile> added = new ArrayList<>();
        Set<String> drop = new HashSet<>();
        for (JsonNode f : change.path("files")) {
            IndexFile file = file(f, source);
            added.add(file);
            drop.add(file.path);
        }
        for (JsonNode r : change.path("removedFiles")) {
            drop.add(r.asText());
        }
        List<IndexFile> files = new ArrayList<>();
        if (before != null) {
            for (IndexFile f : before.files) {
                if (!drop.contains(f.path)) {
                    files.add(f);
                }
            }
        }
        files.addAll(added);
        JsonNode nb = change.get("numBuckets");
        if (nb == null || !nb.canConvertToInt()) {
            throw DeltaLog.corrupt(source, "index action " + name + " has no integer numBuckets");
        }
        return new Entry(name, Collections.unmodifiableList(columns), text(change, "kind", source),
            text(change, "state", source), nb.asInt(), Collections.unmodifiableList(files));
    }

    /** The indexes of a state file ({@code _indexes/_state/<v>.json}). */
    static Map<String, Entry> fromState(JsonNode state, Object source) {
        Map<String, Entry> out = new LinkedHashMap<>();
        JsonNode indexes = state.get("indexes");
        if (indexes == null || !indexes.isArray()) {
            throw DeltaLog.corrupt(source, "an index state file needs an 'indexes' array");
        }
        for (JsonNode e : indexes) {
            Entry entry = merge(null, e, source);
            out.put(entry.name, entry);
        }
        return out;
    }

    /** Apply a commit's {@code commitInfo.indexeddf.indexes} to {@code indexes}. */
    static void apply(Map<String, Entry> indexes, JsonNode commitInfo, Object source) {
        JsonNode actions = commitInfo.path("indexeddf").path("indexes");
        for (JsonNode a : actions) {
            String name = text(a, "name", source);
            indexes.put(name, merge(indexes.get(name), a, source));
        }
    }

    private static IndexFile file(JsonNode f, Object source) {
        JsonNode ids = f.path("fileIds");
        long[] fileIds = new long[ids.size()];
        for (int i = 0; i < fileIds.length; i++) {
            fileIds[i] = ids.get(i).asLong();
        }
        return new IndexFile(text(f, "path", source), f.path("size").asLong(), f.path("bucket").asInt(),
            f.path("numEntries").asLong(), fileIds);
    }

    private static String text(JsonNode n, String field, Object source) {
        JsonNode v = n.get(field);
        if (v == null || !v.isTextual()) {
            throw DeltaLog.corrupt(source, "index action without the string field '" + field + "'");
        }
        return v.asText();
    }
}
