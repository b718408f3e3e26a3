package io.indexeddf.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.Type;

/**
 * Replays a table's Delta log ({@code _delta_log/}) into a {@link Snapshot}: the newest
 * classic checkpoint at or before the target version ({@code _last_checkpoint} names the
 * newest one), then the JSON commits after it; {@code add}/{@code remove} are reconciled by
 * path, the latest {@code protocol} and {@code metaData} win. Time travel by version, or by
 * timestamp (the newest version committed at or before it; a commit's time is its
 * {@code commitInfo.timestamp}, else its file's modification time).
 *
 * <p>What the Python reader refuses is refused here too, with the same error names: reader
 * features it does not implement, deletion vectors, column mapping, partition columns,
 * nested columns, Delta tables indexeddf has not indexed.
 */
public final class DeltaLog {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String CONF_INDEX_COLUMNS = "indexeddf.indexColumns";
    static final String CONF_NUM_BUCKETS = "indexeddf.numBuckets";
    static final String TAG_BUCKET = "indexeddf.bucket";
    static final String TAG_SORTED = "indexeddf.sorted";
    static final Set<String> READ_FEATURES =
        new HashSet<>(Arrays.asList("timestampNtz", "vacuumProtocolCheck", "appendOnly", "invariants"));

    private static final Pattern COMMIT = Pattern.compile("^(\\d{20})\\.json$");
    private static final Pattern CHECKPOINT = Pattern.compile("^(\\d{20})\\.checkpoint\\.parquet$");
    private static final Pattern STATE = Pattern.compile("^(\\d{20})\\.json$");
    private static final Pattern CHECKPOINT_PART =
        Pattern.compile("^(\\d{20})\\.checkpoint\\.(\\d{10})\\.(\\d{10})\\.parquet$");

    /** A live data file of a snapshot. */
    public static final class AddFile {
        /** Decoded relative path (or absolute URI) as the log names it. */
        public final String path;
        /** Where Hadoop reads it. */
        public final Path location;
        public final long size;
        public final long modificationTime;
        /** The file's bucket ({@code indexeddf.bucket} tag), or null for files other Delta writers added. */
        public final Integer bucket;
        /** The file id index entries name it by ({@code indexeddf.fileId} tag, else derived from the path). */
        public final long fileId;
        /** The rows are in index-column order ({@code indexeddf.sorted} tag "true"). */
        public final boolean sorted;

        AddFile(String path, Path location, long size, long modificationTime, Integer bucket, long fileId,
                boolean sorted) {
            this.path = path;
            this.location = location;
            this.size = size;
            this.modificationTime = modificationTime;
            this.bucket = bucket;
            this.fileId = fileId;
            this.sorted = sorted;
        }
    }

    /** One version of a table: its protocol, metadata and live files (in log order). */
    public static final class Snapshot {
        public final Path root;
        public final long version;
        public final JsonNode protocol;
        public final JsonNode metadata;
        public final List<AddFile> files;
        /** Bytes of each removed file (tombstone), by file id. */
        public final Map<Long, Long> tombstoneSizes;
        /** The indexes at this version by name, or null when the log does not say (see {@link #snapshot}). */
        public final Map<String, IndexLog.Entry> indexes;
        /** The indexes at the newest version when this one is older (computed on first use), else null. */
        java.util.function.Supplier<Map<String, IndexLog.Entry>> newestIndexes;
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
                for (JsonNode n : JSON.readTree(configuration(CONF_INDEX_COLUMNS))) {
                    out.add(n.asText());
                }
            } catch (IOException e) {
                throw corrupt(root, CONF_INDEX_COLUMNS + " is not a JSON array");
            }
            return out;
        }

        /** The bucket count. */
        public int numBuckets() {
            return Integer.parseInt(configuration(CONF_NUM_BUCKETS).trim());
        }
    }

    private final Path root;
    private final Path logDir;
    private final FileSystem fs;
    private final TreeMap<Long, FileStatus> commits = new TreeMap<>();
    private final TreeMap<Long, List<FileStatus>> checkpoints = new TreeMap<>();

    private DeltaLog(Path root, Configuration conf) throws IOException {
        this.root = root;
        this.logDir = new Path(root, "_delta_log");
        this.fs = root.getFileSystem(conf);
        FileStatus[] listed;
        try {
            listed = fs.listStatus(logDir);
        } catch (FileNotFoundException e) {
            listed = new FileStatus[0];
        }
        Map<Long, List<FileStatus>> parts = new TreeMap<>();
        Map<Long, Integer> partCounts = new TreeMap<>();
        for (FileStatus st : listed) {
            String name = st.getPath().getName();
            Matcher m = COMMIT.matcher(name);
            if (m.matches()) {
                commits.put(Long.parseLong(m.group(1)), st);
                continue;
            }
            m = CHECKPOINT.matcher(name);
            if (m.matches()) {
                checkpoints.put(Long.parseLong(m.group(1)), new ArrayList<>(List.of(st)));
                continue;
            }
            m = CHECKPOINT_PART.matcher(name);
            if (m.matches()) {
                long v = Long.parseLong(m.group(1));
                parts.computeIfAbsent(v, k -> new ArrayList<>()).add(st);
                partCounts.put(v, Integer.parseInt(m.group(3)));
            }
        }
        for (Map.Entry<Long, List<FileStatus>> e : parts.entrySet()) {
            // A multi-part checkpoint counts only when every part is there.
            if (!checkpoints.containsKey(e.getKey()) && e.getValue().size() == partCounts.get(e.getKey())) {
                e.getValue().sort((a, b) -> a.getPath().getName().compareTo(b.getPath().getName()));
                checkpoints.put(e.getKey(), e.getValue());
            }
        }
        if (commits.isEmpty() && checkpoints.isEmpty()) {
            throw new IndexedDFException("TableNotFoundError",
                "no indexeddf table at " + root + " (no _delta_log/ commits); create one with "
                + "IndexedTable.create or df.write.format('indexeddf').option('indexColumns', ...)");
        }
    }

    /** Opens the log of the table at {@code root} (lists {@code _delta_log/} once). */
    public static DeltaLog open(Path root, Configuration conf) {
        try {
            return new DeltaLog(root, conf);
        } catch (IOException e) {
            throw new IndexedDFException("CorruptLogError", "cannot list " + root + "/_delta_log: " + e, e);
        }
    }

    /** The newest version in the log. */
    public long latestVersion() {
        long c = commits.isEmpty() ? -1 : commits.lastKey();
        long k = checkpoints.isEmpty() ? -1 : checkpoints.lastKey();
        return Math.max(c, k);
    }

    /** Most snapshots, and most live files in all of them, that {@link #SNAPSHOTS} keeps. */
    private static final int MAX_SNAPSHOTS = 16;
    private static final long MAX_SNAPSHOT_FILES = 1_000_000;

    /**
     * Snapshots replayed in this JVM, least recently used first out. A version never changes
     * (commits and checkpoints are written once, put-if-absent), so a query of the newest
     * version, each query of a catalog table, lists the log and replays nothing when no one
     * committed since. Keyed by table, version, newest version (which decides the index states
     * that may serve an older version), and the modification time and length of the log files
     * of both versions: a table deleted and created again at the same path has new ones.
     */
    private static final LinkedHashMap<String, Snapshot> SNAPSHOTS = new LinkedHashMap<>(16, 0.75f, true);
    private static long snapshotFiles;

    /** The snapshot at {@code version} (null: the newest), from this JVM's cache or replayed now. */
    public Snapshot snapshot(Long version) {
        long latest = latestVersion();
        long target = version == null ? latest : version;
        if (target > latest || target < 0) {
            throw new IndexedDFException("VersionNotFoundError",
                root + " has no version " + target + "; its newest version is " + latest);
        }
        String key = root + "|" + stamp(target) + "|" + stamp(latest);
        synchronized (SNAPSHOTS) {
            Snapshot cached = SNAPSHOTS.get(key);
            if (cached != null) {
                return cached;
            }
        }
        Snapshot snap = replay(target, latest);
        snap.identity = root + "|" + stamp(target);
        synchronized (SNAPSHOTS) {
            if (SNAPSHOTS.put(key, snap) == null) {
                snapshotFiles += snap.files.size();
            }
            java.util.Iterator<Snapshot> it = SNAPSHOTS.values().iterator();
            while ((SNAPSHOTS.size() > MAX_SNAPSHOTS || snapshotFiles > MAX_SNAPSHOT_FILES) && it.hasNext()) {
                Snapshot eldest = it.next();
                if (eldest != snap) {
                    snapshotFiles -= eldest.files.size();
                    it.remove();
                }
            }
        }
        return snap;
    }

    /** Version {@code v} with the modification time and length of the log file that holds it. */
    private String stamp(long v) {
        FileStatus st = commits.containsKey(v) ? commits.get(v) : checkpoints.get(v).get(0);
        return v + "@" + st.getModificationTime() + "+" + st.getLen();
    }

    private Snapshot replay(long target, long latest) {
        Long start = null;
        Long hinted = lastCheckpointHint();
        if (hinted != null && hinted <= target && checkpoints.containsKey(hinted)) {
            start = hinted;
        }
        Long floor = checkpoints.floorKey(target);
        if (floor != null && (start == null || floor > start)) {
            start = floor;
        }
        Replay state = new Replay();
        long from = 0;
        if (start != null) {
            for (FileStatus part : checkpoints.get(start)) {
                readCheckpoint(part, state);
            }
            state.indexes = indexStateAt(start);
            from = start + 1;
        }
        for (long v = from; v <= target; v++) {
            FileStatus st = commits.get(v);
            if (st == null) {
                throw new IndexedDFException("VersionNotFoundError",
                    root + ": commit " + v + " is missing from the log, so version " + target
                    + " cannot be reconstructed; pick a version at or after the oldest checkpoint");
            }
            for (String line : readLines(st.getPath())) {
                if (!line.trim().isEmpty()) {
                    state.apply(parse(line, st.getPath()), false, st.getPath());
                }
            }
        }
        if (state.protocol == null || state.metadata == null) {
            throw corrupt(root, "version " + target + " has no protocol or metaData action");
        }
        checkReadable(state.protocol, state.metadata);
        List<AddFile> files = new ArrayList<>(state.adds.values());
        Snapshot snap = new Snapshot(root, target, state.protocol, state.metadata, files, state.tombstones,
            state.indexes);
        if (target < latest) {
            // A newer state of an index may serve this version (PROTOCOL.md 4.5.4): replayed once,
            // only when a lookup asks.
            Map<String, IndexLog.Entry>[] memo = new Map[1];
            snap.newestIndexes = () -> {
                if (memo[0] == null) {
                    Map<String, IndexLog.Entry> newest = snapshot(latest).indexes;
                    memo[0] = newest == null ? new LinkedHashMap<>() : newest;
                }
                return memo[0];
            };
        }
        return snap;
    }

    /** The newest version committed at or before {@code timestamp} (Delta's rule). */
    public long versionAt(String timestamp) {
        long ms = toMillis(timestamp);
        List<Long> versions = new ArrayList<>(commits.keySet());
        if (versions.isEmpty()) {
            throw new IndexedDFException("VersionNotFoundError", root + " has no commits");
        }
        if (commitTime(versions.get(0)) > ms) {
            throw new IndexedDFException("VersionNotFoundError",
                root + " did not exist at " + timestamp + "; its oldest version (" + versions.get(0)
                + ") was committed at " + Instant.ofEpochMilli(commitTime(versions.get(0))));
        }
        int lo = 0;
        int hi = versions.size() - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (commitTime(versions.get(mid)) <= ms) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return versions.get(lo);
    }

    /** A commit's time: {@code commitInfo.timestamp} (or inCommitTimestamp), else the file's modification time. */
    long commitTime(long version) {
        FileStatus st = commits.get(version);
        for (String line : readLines(st.getPath())) {
            if (line.trim().isEmpty()) {
                continue;
            }
            JsonNode info = parse(line, st.getPath()).get("commitInfo");
            if (info != null) {
                JsonNode ts = info.get("inCommitTimestamp");
                if (ts == null || !ts.isNumber()) {
                    ts = info.get("timestamp");
                }
                if (ts != null && ts.isNumber()) {
                    return ts.asLong();
                }
            }
        }
        return st.getModificationTime();
    }

    /** Milliseconds since the epoch of an ISO 8601 timestamp (no zone: UTC) or a number of ms. */
    static long toMillis(String text) {
        String t = text.trim();
        if (t.matches("-?\\d+")) {
            return Long.parseLong(t);
        }
        String iso = t.replace(' ', 'T');
        try {
            return OffsetDateTime.parse(iso.endsWith("Z") ? iso.substring(0, iso.length() - 1) + "+00:00" : iso)
                .toInstant().toEpochMilli();
        } catch (DateTimeParseException ignored) {
            // no zone: below
        }
        try {
            return LocalDateTime.parse(iso).toInstant(ZoneOffset.UTC).toEpochMilli();
        } catch (DateTimeParseException ignored) {
            // a date: below
        }
        try {
            return LocalDate.parse(iso).atStartOfDay().toInstant(ZoneOffset.UTC).toEpochMilli();
        } catch (DateTimeParseException e) {
            throw IndexedDFException.option("timestamp '" + text + "' is not ISO 8601 (e.g. "
                + "'2026-11-21T10:00:00Z' or '2026-11-21 10:00:00')");
        }
    }

    // -- replay -----------------------------------------------------------------------------
    private final class Replay {
        JsonNode protocol;
        JsonNode metadata;
        final LinkedHashMap<String, AddFile> adds = new LinkedHashMap<>();
        final Map<String, Long> tombstoneIds = new java.util.HashMap<>();
        final Map<Long, Long> tombstones = new java.util.HashMap<>();
        Map<String, IndexLog.Entry> indexes = new LinkedHashMap<>();

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
                        checkProtocol(body);
                        break;
                    case "metaData":
                        metadata = body;
                        break;
                    case "add": {
                        refuseFileFeatures(body);
                        String encoded = body.path("path").asText();
                        String path = decodePath(encoded, source);
                        JsonNode tags = body.path("tags");
                        Integer bucket = null;
                        JsonNode b = tags.get(TAG_BUCKET);
                        if (b != null && !b.isNull()) {
                            try {
                                bucket = Integer.parseInt(b.asText().trim());
                            } catch (NumberFormatException ex) {
                                throw corrupt(root, source + ": tag " + TAG_BUCKET + " must be a decimal string");
                            }
                        }
                        adds.put(path, new AddFile(path, location(encoded, source), body.path("size").asLong(),
                            body.path("modificationTime").asLong(), bucket, fileId(tags, path, source),
                            "true".equals(tags.path(TAG_SORTED).asText(null))));
                        Long was = tombstoneIds.remove(path);
                        if (was != null) {
                            tombstones.remove(was);
                        }
                        break;
                    }
                    case "remove": {
                        refuseFileFeatures(body);
                        String path = decodePath(body.path("path").asText(), source);
                        AddFile live = fromCheckpoint ? null : adds.remove(path);
                        // A remove without our tags keeps the id the live file had.
                        long id = live != null ? live.fileId : fileId(body.path("tags"), path, source);
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
    }

    /** The {@code indexeddf.fileId} tag, or the id derived from the path (PROTOCOL.md 5). */
    static long fileId(JsonNode tags, String path, Path source) {
        JsonNode t = tags == null ? null : tags.get("indexeddf.fileId");
        if (t != null && !t.isNull()) {
            try {
                return Long.parseLong(t.asText().trim());
            } catch (NumberFormatException e) {
                throw corrupt(source, "tag indexeddf.fileId must be a decimal string, got " + t);
            }
        }
        return pathFileId(path);
    }

    /** {@code int.from_bytes(sha256(path)[0:8], "big") & (2^63 - 1)}. */
    static long pathFileId(String path) {
        try {
            byte[] d = java.security.MessageDigest.getInstance("SHA-256").digest(path.getBytes(StandardCharsets.UTF_8));
            long v = 0;
            for (int i = 0; i < 8; i++) {
                v = (v << 8) | (d[i] & 0xFF);
            }
            return v & Long.MAX_VALUE;
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The indexes at the checkpoint {@code version}: its state file when indexeddf wrote the
     * checkpoint, else (another engine's checkpoint) replayed from the commits since the newest
     * state file before it. Null when commits a log clean-up removed leave them unknown: readers
     * then scan, which is always right (the Python reader warns and does the same).
     */
    private Map<String, IndexLog.Entry> indexStateAt(long version) {
        Map<String, IndexLog.Entry> state = readIndexState(version);
        if (state != null) {
            return state;
        }
        long from = 0;
        Map<String, IndexLog.Entry> indexes = new LinkedHashMap<>();
        try {
            long best = -1;
            for (FileStatus st : fs.listStatus(new Path(root, "_indexes/_state"))) {
                Matcher m = STATE.matcher(st.getPath().getName());
                if (m.matches() && Long.parseLong(m.group(1)) < version) {
                    best = Math.max(best, Long.parseLong(m.group(1)));
                }
            }
            if (best >= 0) {
                indexes = new LinkedHashMap<>(readIndexState(best));
                from = best + 1;
            }
        } catch (FileNotFoundException e) {
            // no state files at all: replay from version 0
        } catch (IOException e) {
            throw corrupt(root, "cannot list _indexes/_state: " + e);
        }
        for (long v = from; v <= version; v++) {
            FileStatus st = commits.get(v);
            if (st == null) {
                return null;
            }
            for (String line : readLines(st.getPath())) {
                if (!line.trim().isEmpty()) {
                    JsonNode info = parse(line, st.getPath()).get("commitInfo");
                    if (info != null && !info.isNull()) {
                        IndexLog.apply(indexes, info, st.getPath());
                    }
                }
            }
        }
        return indexes;
    }

    /** The index state beside the checkpoint of {@code version}, or null when there is none. */
    private Map<String, IndexLog.Entry> readIndexState(long version) {
        Path p = new Path(root, String.format("_indexes/_state/%020d.json", version));
        try (FSDataInputStream in = fs.open(p)) {
            return IndexLog.fromState(JSON.readTree(in), p);
        } catch (FileNotFoundException e) {
            return null;
        } catch (IOException e) {
            throw corrupt(p, "cannot be read: " + e);
        }
    }

    private static void refuseFileFeatures(JsonNode body) {
        JsonNode dv = body.get("deletionVector");
        if (dv != null && !dv.isNull()) {
            throw IndexedDFException.unsupportedFeature("deletionVectors");
        }
        JsonNode pv = body.get("partitionValues");
        if (pv != null && pv.size() > 0) {
            throw IndexedDFException.unsupportedFeature("partitionColumns");
        }
    }

    private static String decodePath(String encoded, Path source) {
        try {
            URI uri = new URI(encoded);
            return uri.isAbsolute() ? uri.toString() : uri.getPath();
        } catch (URISyntaxException e) {
            throw corrupt(source, "add/remove path " + encoded + " is not a URI: " + e.getMessage());
        }
    }

    /** Where Hadoop reads a file the log names by {@code encoded} (a relative URI, or an absolute one). */
    private Path location(String encoded, Path source) {
        try {
            URI uri = new URI(encoded);
            if (uri.isAbsolute()) {
                return new Path(uri);
            }
            return new Path(root, new Path(null, null, uri.getPath()));
        } catch (URISyntaxException e) {
            throw corrupt(source, "file path " + encoded + " is not a URI: " + e.getMessage());
        }
    }

    static void checkProtocol(JsonNode p) {
        int reader = p.path("minReaderVersion").asInt(1);
        if (reader <= 1) {
            return;
        }
        if (reader == 2) {
            throw IndexedDFException.unsupportedFeature("columnMapping");
        }
        if (reader == 3) {
            for (JsonNode f : p.path("readerFeatures")) {
                if (!READ_FEATURES.contains(f.asText())) {
                    throw IndexedDFException.unsupportedFeature(f.asText());
                }
            }
            return;
        }
        throw new IndexedDFException("UnsupportedProtocolError",
            "the table needs Delta reader version " + reader + "; indexeddf reads versions 1 and 3 "
            + "(with the features it implements). Read it with a newer Delta engine.");
    }

    private void checkReadable(JsonNode protocol, JsonNode metadata) {
        checkProtocol(protocol);
        JsonNode conf = metadata.path("configuration");
        String mode = conf.path("delta.columnMapping.mode").asText("none");
        if (!"none".equals(mode)) {
            throw IndexedDFException.unsupportedFeature("columnMapping");
        }
        JsonNode parts = metadata.get("partitionColumns");
        if (parts != null && parts.size() > 0) {
            throw IndexedDFException.unsupportedFeature("partitionColumns");
        }
        String provider = metadata.path("format").path("provider").asText("parquet");
        if (!"parquet".equals(provider)) {
            throw corrupt(root, "data files in format '" + provider + "'; Delta tables hold Parquet");
        }
        JsonNode schema;
        try {
            schema = JSON.readTree(metadata.path("schemaString").asText());
        } catch (IOException e) {
            throw corrupt(root, "schemaString is not valid JSON");
        }
        for (JsonNode f : schema.path("fields")) {
            if (!f.path("type").isTextual()) {
                throw IndexedDFException.unsupportedFeature(
                    "nested column '" + f.path("name").asText() + "'");
            }
            Iterator<String> keys = f.path("metadata").fieldNames();
            while (keys.hasNext()) {
                String key = keys.next();
                if (key.startsWith("delta.columnMapping") || key.startsWith("delta.generationExpression")
                        || key.startsWith("delta.identity") || key.equals("delta.invariants")) {
                    throw IndexedDFException.unsupportedFeature(key + " on column '" + f.path("name").asText() + "'");
                }
            }
        }
        if (!conf.has(CONF_INDEX_COLUMNS) || !conf.has(CONF_NUM_BUCKETS)) {
            throw new IndexedDFException("NotIndexedError",
                root + ": a Delta table that indexeddf has not indexed; index it with "
                + "IndexedTable.convert(path, index_columns=[...], num_buckets=N)");
        }
    }

    static IndexedDFException corrupt(Object where, String what) {
        return new IndexedDFException("CorruptLogError", where + ": " + what);
    }

    // -- files ------------------------------------------------------------------------------
    private Long lastCheckpointHint() {
        Path p = new Path(logDir, "_last_checkpoint");
        try (FSDataInputStream in = fs.open(p)) {
            JsonNode hint = JSON.readTree(in);
            JsonNode v = hint.get("version");
            return v != null && v.canConvertToLong() ? v.asLong() : null;
        } catch (IOException e) {
            return null;  // absent or unreadable: the listing names the checkpoints
        }
    }

    private List<String> readLines(Path p) {
        List<String> lines = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(fs.open(p), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                lines.add(line);
            }
        } catch (IOException e) {
            throw corrupt(p, "cannot be read: " + e);
        }
        return lines;
    }

    private static JsonNode parse(String line, Path source) {
        try {
            JsonNode n = JSON.readTree(line);
            if (n == null || !n.isObject()) {
                throw corrupt(source, "a line must be a JSON object holding one action");
            }
            return n;
        } catch (IOException e) {
            throw corrupt(source, "not valid JSON (" + e.getMessage() + ")");
        }
    }

    private void readCheckpoint(FileStatus st, Replay state) {
        Configuration conf = fs.getConf();
        try (ParquetReader<Group> reader = ParquetReader.builder(new GroupReadSupport(), st.getPath())
                .withConf(conf).build()) {
            Group row;
            List<ObjectNode> adds = new ArrayList<>();
            while ((row = reader.read()) != null) {
                ObjectNode obj = groupToJson(row);
                // Apply protocol and metaData first, then every add (removes are tombstones).
                if (obj.has("add")) {
                    adds.add(obj);
                } else {
                    state.apply(obj, true, st.getPath());
                }
            }
            for (ObjectNode a : adds) {
                state.apply(a, true, st.getPath());
            }
        } catch (IOException | RuntimeException e) {
            if (e instanceof IndexedDFException) {
                throw (IndexedDFException) e;
            }
            throw corrupt(st.getPath(), "not a readable checkpoint (" + e + "); delete it to replay from JSON");
        }
    }

    /** A Parquet record as JSON: structs as objects, MAPs as objects, LISTs as arrays. */
    static ObjectNode groupToJson(Group g) {
        ObjectNode out = JsonNodeFactory.instance.objectNode();
        GroupType type = g.getType();
        for (int i = 0; i < type.getFieldCount(); i++) {
            if (g.getFieldRepetitionCount(i) == 0) {
                continue;
            }
            out.set(type.getFieldName(i), value(g, i, 0, type.getType(i)));
        }
        return out;
    }

    private static JsonNode value(Group g, int field, int index, Type t) {
        JsonNodeFactory f = JsonNodeFactory.instance;
        if (t.isPrimitive()) {
            switch (t.asPrimitiveType().getPrimitiveTypeName()) {
                case BINARY:
                case FIXED_LEN_BYTE_ARRAY:
                    return f.textNode(g.getString(field, index));
                case INT32:
                    return f.numberNode(g.getInteger(field, index));
                case INT64:
                    return f.numberNode(g.getLong(field, index));
                case BOOLEAN:
                    return f.booleanNode(g.getBoolean(field, index));
                case DOUBLE:
                    return f.numberNode(g.getDouble(field, index));
                case FLOAT:
                    return f.numberNode(g.getFloat(field, index));
                default:
                    return f.nullNode();
            }
        }
        Group sub = g.getGroup(field, index);
        GroupType gt = t.asGroupType();
        LogicalTypeAnnotation ann = gt.getLogicalTypeAnnotation();
        boolean isMap = ann instanceof LogicalTypeAnnotation.MapLogicalTypeAnnotation
            || ann instanceof LogicalTypeAnnotation.MapKeyValueTypeAnnotation;
        boolean isList = ann instanceof LogicalTypeAnnotation.ListLogicalTypeAnnotation;
        if (isMap && gt.getFieldCount() == 1) {
            ObjectNode m = f.objectNode();
            int n = sub.getFieldRepetitionCount(0);
            for (int j = 0; j < n; j++) {
                Group kv = sub.getGroup(0, j);
                String key = kv.getString(0, 0);
                GroupType kvt = kv.getType();
                if (kvt.getFieldCount() > 1 && kv.getFieldRepetitionCount(1) > 0) {
                    m.set(key, value(kv, 1, 0, kvt.getType(1)));
                } else {
                    m.set(key, f.nullNode());
                }
            }
            return m;
        }
        if (isList && gt.getFieldCount() == 1) {
            ArrayNode arr = f.arrayNode();
            Type rep = gt.getType(0);
            int n = sub.getFieldRepetitionCount(0);
            for (int j = 0; j < n; j++) {
                if (!rep.isPrimitive() && rep.asGroupType().getFieldCount() == 1) {
                    Group el = sub.getGroup(0, j);
                    arr.add(el.getFieldRepetitionCount(0) > 0 ? value(el, 0, 0, rep.asGroupType().getType(0))
                        : f.nullNode());
                } else {
                    arr.add(value(sub, 0, j, rep));
                }
            }
            return arr;
        }
        return groupToJson(sub);
    }
}
