package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * The index log that rides in the Delta log (docs/PROTOCOL.md 4.5): each commit's
 * {@code commitInfo.indexeddf.indexes} changes indexes, and {@code _indexes/_state/<v>.json}
 * holds the state at a checkpoint. Replay keeps, per name, the latest action's fields and
 * reconciles the file set as the Python reader does ({@code format/snapshot.py merge_index}).
 * {@link #stateAt} is the state at a checkpoint, where a replay starts.
 */
public final class IndexLog {
    /** States in which an index answers reads (PROTOCOL.md 4.5.3). */
    public static final Set<String> READABLE_STATES = Spec.READABLE_STATES;

    private static final Pattern STATE = Pattern.compile("^(\\d{20})\\.json$");

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
        /** The table version whose live files the index covers ({@code coveredVersion}; -1 when not given). */
        public final long coveredVersion;

        Entry(String name, List<String> columns, String kind, String state, int numBuckets, List<IndexFile> files,
              long coveredVersion) {
            this.name = name;
            this.columns = columns;
            this.kind = kind;
            this.state = state;
            this.numBuckets = numBuckets;
            this.files = files;
            this.coveredVersion = coveredVersion;
        }

        /** Whether readers may use it. */
        public boolean readable() {
            return READABLE_STATES.contains(state);
        }

        /** {@link #coveredIds}, built once: every lookup of the version asks for it. */
        private volatile Set<Long> covered;

        /** Ids of the data files it covers (empty unless readable; not to be changed). */
        public Set<Long> coveredIds() {
            Set<Long> out = covered;
            if (out == null) {
                Set<Long> ids = new HashSet<>();
                if (readable()) {
                    for (IndexFile f : files) {
                        for (long id : f.fileIds) {
                            ids.add(id);
                        }
                    }
                }
                out = java.util.Collections.unmodifiableSet(ids);
                covered = out;
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
            throw IndexedDFException.corrupt(source, "index action " + name + " has no integer numBuckets");
        }
        return new Entry(name, Collections.unmodifiableList(columns), text(change, "kind", source),
            text(change, "state", source), nb.asInt(), Collections.unmodifiableList(files),
            change.path("coveredVersion").asLong(-1));
    }

    /** The indexes of a state file ({@code _indexes/_state/<v>.json}). */
    static Map<String, Entry> fromState(JsonNode state, Object source) {
        Map<String, Entry> out = new LinkedHashMap<>();
        JsonNode indexes = state.get("indexes");
        if (indexes == null || !indexes.isArray()) {
            throw IndexedDFException.corrupt(source, "an index state file needs an 'indexes' array");
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

    /**
     * The indexes at the checkpoint {@code version}: its state file when indexeddf wrote the
     * checkpoint, else (another engine's checkpoint) replayed from the commits since the newest
     * state file before it. Null when commits a log clean-up removed leave them unknown: readers
     * then scan, which is always right (the Python reader warns and does the same).
     */
    static Map<String, Entry> stateAt(LogListing log, long version) {
        Map<String, Entry> state = readState(log, version);
        if (state != null) {
            return state;
        }
        long from = 0;
        Map<String, Entry> indexes = new LinkedHashMap<>();
        try {
            long best = -1;
            for (FileStatus st : log.fs.listStatus(new Path(log.root, "_indexes/_state"))) {
                Matcher m = STATE.matcher(st.getPath().getName());
                if (m.matches() && Long.parseLong(m.group(1)) < version) {
                    best = Math.max(best, Long.parseLong(m.group(1)));
                }
            }
            if (best >= 0) {
                indexes = new LinkedHashMap<>(readState(log, best));
                from = best + 1;
            }
        } catch (FileNotFoundException e) {
            // no state files at all: replay from version 0
        } catch (IOException e) {
            throw IndexedDFException.corrupt(log.root, "cannot list _indexes/_state: " + e);
        }
        for (long v = from; v <= version; v++) {
            FileStatus st = log.commits.get(v);
            if (st == null) {
                return null;
            }
            for (String line : log.readLines(st.getPath())) {
                if (!line.trim().isEmpty()) {
                    JsonNode info = LogListing.parse(line, st.getPath()).get("commitInfo");
                    if (info != null && !info.isNull()) {
                        apply(indexes, info, st.getPath());
                    }
                }
            }
        }
        return indexes;
    }

    /** The index state beside the checkpoint of {@code version}, or null when there is none. */
    private static Map<String, Entry> readState(LogListing log, long version) {
        Path p = new Path(log.root, String.format("_indexes/_state/%020d.json", version));
        try (FSDataInputStream in = log.fs.open(p)) {
            return fromState(DeltaLog.JSON.readTree(in), p);
        } catch (FileNotFoundException e) {
            return null;
        } catch (IOException e) {
            throw IndexedDFException.corrupt(p, "cannot be read: " + e);
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
            throw IndexedDFException.corrupt(source, "index action without the string field '" + field + "'");
        }
        return v.asText();
    }
}
