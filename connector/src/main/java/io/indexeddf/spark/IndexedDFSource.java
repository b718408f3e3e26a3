package io.indexeddf.spark;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.ChangeFeed;
import io.indexeddf.log.CommitActions;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import io.indexeddf.spark.exec.ChangeFeedRelation;
import io.indexeddf.spark.exec.ColumnMapping;
import io.indexeddf.spark.exec.TableRelation;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.streaming.Offset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * An indexeddf table read as a stream ({@code spark.readStream.format("indexeddf").load(path)},
 * {@code spark.readStream.table(name)}), modelled on delta-spark's {@code DeltaSource}: a V1
 * {@link Source} whose offsets ({@link IndexedDFSourceOffset}) name a position in the table's
 * log, and whose micro-batch is the connector's own Parquet relation
 * ({@link TableRelation#files}) over the files the commits after the last offset added:
 * deletion vectors applied, column mapping honoured, read as the table's schema.
 *
 * <p>Started without {@code startingVersion} / {@code startingTimestamp}, the stream first
 * reads the whole table at its newest version (the initial snapshot), then each commit after
 * it. The position it starts from is resolved once and kept next to the query's checkpoint
 * ({@code metadataPath}), so a batch replayed after a restart reads the same files. Admission
 * control ({@code maxFilesPerTrigger}, 1000 by default, and {@code maxBytesPerTrigger}) splits
 * the files into batches, a commit across batches if need be; {@code Trigger.AvailableNow}
 * reads what the log held when the query started, in batches of that size.
 *
 * <p>Commits that only add rows are read; files rewritten with {@code dataChange} false
 * (OPTIMIZE) are skipped; a commit that removes rows (DELETE, UPDATE, MERGE, an overwrite,
 * deletion vectors given) stops the stream with {@code SourceChangedError} unless
 * {@code skipChangeCommits} (skip such commits), {@code ignoreDeletes} (skip commits that only
 * remove files) or {@code ignoreChanges} (read the files they add again) says otherwise, as
 * Delta does. A schema change after the stream started stops it with
 * {@code SourceSchemaChangedError}: a restart reads on with the new schema.
 *
 * <p>With {@code readChangeFeed} (Delta's option) the stream is the table's change data feed
 * instead, as delta-spark's {@code DeltaSourceCDCSupport} reads it: each micro-batch is the
 * changes of its commits ({@link ChangeFeed#ofCommit}: the change data files, else the added
 * files as inserts and the removed ones as deletes) with {@code _change_type},
 * {@code _commit_version} and {@code _commit_timestamp} ({@link ChangeFeedRelation#plan}); the
 * initial snapshot's files are inserts of its version. Commits that remove rows are changes
 * like any other, and a commit at which the feed was off stops the stream with
 * {@code MissingChangeDataError} ({@code DELTA_MISSING_CHANGE_DATA}).
 */
public final class IndexedDFSource implements Source, SupportsTriggerAvailableNow {
    /** Delta's default number of files of a micro-batch. */
    static final int DEFAULT_MAX_FILES = 1000;
    private static final String START_FILE = "indexeddf-start.json";

    /** The options a stream read takes, and the catalog entry's (ignored: the log decides). */
    static final List<String> OPTIONS = List.of("path", "startingVersion", "startingTimestamp", "maxFilesPerTrigger",
        "maxBytesPerTrigger", "ignoreDeletes", "ignoreChanges", "skipChangeCommits", Spec.CHANGE_FEED_OPTION,
        Spec.CHANGE_FEED_OPTION_ALIAS,
        "versionAsOf", "timestampAsOf", "maxPartitionBytes", "indexColumns", "numBuckets", "name", "description",
        "tableProperties", "__partition_columns");

    private final org.apache.spark.sql.classic.SparkSession session;
    private final Configuration conf;
    private final Path root;
    private final String metadataPath;
    /** The table as the stream reads it: its newest version when the source was made. */
    private final Snapshot readSnapshot;
    private final StructType schema;
    private final String tableId;
    private final Options options;
    /** The sorted live files of the initial snapshot, by version (one at most). */
    private final Map<Long, List<ChangeFeed.Change>> snapshotFiles = new LinkedHashMap<>();
    /** Commits read lately (a batch's and the next offset's scans read the same ones). */
    private final LinkedHashMap<Long, CommitActions> commits = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, CommitActions> eldest) {
            return size() > 256;
        }
    };
    /** Whether the feed was on at a version (the stream of the change data feed checks each commit's). */
    private final Map<Long, Boolean> feedOn = new java.util.HashMap<>();
    private IndexedDFSourceOffset initial;
    /** Where {@code Trigger.AvailableNow} stops: the end of the log when the query started, else null. */
    private IndexedDFSourceOffset availableNowEnd;

    /** A stream read's options, checked. */
    static final class Options {
        final Long startingVersion;
        final boolean startLatest;
        final String startingTimestamp;
        final Integer maxFiles;
        final Long maxBytes;
        final boolean ignoreDeletes;
        final boolean ignoreChanges;
        final boolean skipChangeCommits;
        /** The stream is the change data feed ({@code readChangeFeed} or {@code readChangeData}). */
        final boolean changeFeed;

        Options(Map<String, String> opts) {
            for (String tt : List.of("versionAsOf", "timestampAsOf")) {
                if (present(opts.get(tt))) {
                    throw IndexedDFException.option("readStream.format('indexeddf') does not take " + tt
                        + " (a stream reads every version from where it starts): use option('startingVersion', n) "
                        + "or option('startingTimestamp', ts)");
                }
            }
            changeFeed = ChangeFeedRelation.requested(opts);
            String sv = opts.get("startingVersion");
            String st = opts.get("startingTimestamp");
            if (present(sv) && present(st)) {
                throw IndexedDFException.option("give startingVersion or startingTimestamp, not both");
            }
            Long version = null;
            boolean latest = false;
            if (present(sv)) {
                if (sv.trim().equalsIgnoreCase("latest")) {
                    latest = true;
                } else {
                    version = number(sv, "startingVersion", 0, "a version number or 'latest'");
                }
            }
            startingVersion = version;
            startLatest = latest;
            startingTimestamp = present(st) ? st.trim() : null;
            String mf = opts.get("maxFilesPerTrigger");
            String mb = opts.get("maxBytesPerTrigger");
            maxFiles = present(mf)
                ? (int) Math.min(Integer.MAX_VALUE, number(mf, "maxFilesPerTrigger", 1, "a number of files >= 1")) : null;
            maxBytes = present(mb) ? bytes(mb) : null;
            ignoreDeletes = bool(opts, "ignoreDeletes");
            ignoreChanges = bool(opts, "ignoreChanges");
            skipChangeCommits = bool(opts, "skipChangeCommits");
            if (skipChangeCommits && ignoreChanges) {
                throw IndexedDFException.option("give skipChangeCommits or ignoreChanges, not both: "
                    + "skipChangeCommits skips commits that change rows, ignoreChanges reads the files they add again");
            }
        }

        /** The read limit of a micro-batch (Delta's: 1000 files when neither limit is given). */
        ReadLimit limit() {
            if (maxFiles == null && maxBytes == null) {
                return ReadLimit.maxFiles(DEFAULT_MAX_FILES);
            }
            if (maxFiles != null && maxBytes != null) {
                return ReadLimit.compositeLimit(new ReadLimit[] {ReadLimit.maxFiles(maxFiles),
                    ReadLimit.maxBytes(maxBytes)});
            }
            return maxFiles != null ? ReadLimit.maxFiles(maxFiles) : ReadLimit.maxBytes(maxBytes);
        }

        private static boolean present(String s) {
            return s != null && !s.trim().isEmpty();
        }

        private static boolean bool(Map<String, String> opts, String name) {
            String v = opts.get(name);
            if (!present(v)) {
                return false;
            }
            String t = v.trim().toLowerCase(Locale.ROOT);
            if (!t.equals("true") && !t.equals("false")) {
                throw IndexedDFException.option("option " + name + " must be true or false, got '" + v + "'");
            }
            return t.equals("true");
        }

        private static long number(String v, String name, long min, String what) {
            try {
                long n = Long.parseLong(v.trim());
                if (n >= min) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // below
            }
            throw IndexedDFException.option("option " + name + " must be " + what + ", got '" + v + "'");
        }

        /** Bytes as Spark writes sizes: a number, or with a unit ({@code 10m}, {@code 1g}). */
        private static long bytes(String v) {
            try {
                long n = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(v.trim());
                if (n >= 1) {
                    return n;
                }
            } catch (RuntimeException e) {
                // below
            }
            throw IndexedDFException.option("option maxBytesPerTrigger must be a size >= 1 (bytes, or with a unit: "
                + "10m, 1g), got '" + v + "'");
        }
    }

    IndexedDFSource(org.apache.spark.sql.classic.SparkSession session, Path root, Configuration conf,
                    String metadataPath, Map<String, String> opts) {
        this.session = session;
        this.root = root;
        this.conf = conf;
        this.metadataPath = metadataPath;
        this.options = new Options(opts);
        this.readSnapshot = DeltaLog.open(root, conf).snapshot(null);
        this.schema = options.changeFeed ? ChangeFeedRelation.schemaOf(readSnapshot)
            : ColumnMapping.tableSchema(readSnapshot);
        this.tableId = readSnapshot.metadata.path("id").asText("");
    }

    /**
     * The schema a stream of the table's newest version reads (the provider's
     * {@code sourceSchema}): the table's, with the feed's columns for {@code changeFeed}.
     */
    static StructType schemaOf(Path root, Configuration conf, boolean changeFeed) {
        Snapshot newest = DeltaLog.open(root, conf).snapshot(null);
        return changeFeed ? ChangeFeedRelation.schemaOf(newest) : ColumnMapping.tableSchema(newest);
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Option<Offset> getOffset() {
        throw new IllegalStateException("the indexeddf source takes its offsets through latestOffset(start, limit)");
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.limit();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNowEnd = new IndexedDFSourceOffset(tableId, DeltaLog.open(root, conf).latestVersion() + 1, -1, false);
    }

    @Override
    public org.apache.spark.sql.connector.read.streaming.Offset latestOffset(
            org.apache.spark.sql.connector.read.streaming.Offset startOffset, ReadLimit limit) {
        IndexedDFSourceOffset start = startOffset == null ? initial() : parse(startOffset);
        long[] limits = limits(limit);
        Scan scan = scan(start, availableNowEnd, limits[0], limits[1], false);
        if (!scan.end.after(start)) {
            return startOffset == null ? null : startOffset;
        }
        return scan.end;
    }

    @Override
    public Dataset<Row> getBatch(Option<Offset> start, Offset end) {
        IndexedDFSourceOffset from = start.isDefined() ? parse(start.get()) : initial();
        IndexedDFSourceOffset to = parse(end);
        Scan scan = scan(from, to, Long.MAX_VALUE, Long.MAX_VALUE, true);
        if (options.changeFeed) {
            return org.apache.spark.sql.classic.Dataset.ofRows(session,
                ChangeFeedRelation.plan(session, readSnapshot, scan.files, true));
        }
        List<AddFile> files = new ArrayList<>(scan.files.size());
        for (ChangeFeed.Change c : scan.files) {
            files.add(c.file);
        }
        HadoopFsRelation relation = TableRelation.files(session, readSnapshot, files);
        return org.apache.spark.sql.classic.Dataset.ofRows(session, LogicalRelation$.MODULE$.apply(relation, true));
    }

    @Override
    public Offset deserializeOffset(String json) {
        return IndexedDFSourceOffset.parse(json, tableId, root.toString());
    }

    @Override
    public void commit(Offset end) {
        // Nothing to release: the log is read again for each batch.
    }

    @Override
    public void stop() {
        // Nothing held open.
    }

    @Override
    public String toString() {
        return "IndexedDFSource[" + root + "]";
    }

    private IndexedDFSourceOffset parse(org.apache.spark.sql.connector.read.streaming.Offset o) {
        return o instanceof IndexedDFSourceOffset ? (IndexedDFSourceOffset) o
            : IndexedDFSourceOffset.parse(o.json(), tableId, root.toString());
    }

    /** {max files, max bytes} of a read limit (Long.MAX_VALUE: no limit). */
    private static long[] limits(ReadLimit limit) {
        long[] out = {Long.MAX_VALUE, Long.MAX_VALUE};
        List<ReadLimit> all = new ArrayList<>();
        if (limit instanceof CompositeReadLimit) {
            all.addAll(List.of(((CompositeReadLimit) limit).getReadLimits()));
        } else if (limit != null) {
            all.add(limit);
        }
        for (ReadLimit l : all) {
            if (l instanceof ReadMaxFiles) {
                out[0] = Math.min(out[0], ((ReadMaxFiles) l).maxFiles());
            } else if (l instanceof ReadMaxBytes) {
                out[1] = Math.min(out[1], ((ReadMaxBytes) l).maxBytes());
            } else if (!(l instanceof ReadAllAvailable)) {
                throw new IllegalStateException("the indexeddf source does not take the read limit " + l);
            }
        }
        return out;
    }

    // -- where the stream starts ------------------------------------------------------------

    /**
     * The position before the stream's first file: resolved from the options the first time,
     * then kept in the query's checkpoint ({@code metadataPath}) so that a restart, whose
     * first batch may be one Spark replays, starts from the same one whatever was committed since.
     */
    private synchronized IndexedDFSourceOffset initial() {
        if (initial != null) {
            return initial;
        }
        Path kept = metadataPath == null ? null : new Path(metadataPath, START_FILE);
        try {
            if (kept != null) {
                FileSystem fs = kept.getFileSystem(conf);
                if (fs.exists(kept)) {
                    try (InputStream in = fs.open(kept)) {
                        initial = IndexedDFSourceOffset.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8),
                            tableId, root.toString());
                    }
                    return initial;
                }
                IndexedDFSourceOffset resolved = resolveStart();
                try (OutputStream out = fs.create(kept, false)) {
                    out.write(resolved.json().getBytes(StandardCharsets.UTF_8));
                } catch (FileAlreadyExistsException raced) {
                    initial = null;
                    return initial();
                }
                initial = resolved;
                return initial;
            }
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot keep where the stream reading " + root
                + " starts in its checkpoint (" + kept + "): " + e, e);
        }
        initial = resolveStart();
        return initial;
    }

    private IndexedDFSourceOffset resolveStart() {
        DeltaLog log = DeltaLog.open(root, conf);
        long latest = log.latestVersion();
        if (options.startLatest) {
            return new IndexedDFSourceOffset(tableId, latest + 1, -1, false);
        }
        if (options.startingTimestamp != null) {
            return new IndexedDFSourceOffset(tableId, log.versionFrom(options.startingTimestamp), -1, false);
        }
        if (options.startingVersion != null) {
            long v = options.startingVersion;
            if (v > latest) {
                throw new IndexedDFException("VersionNotFoundError", root + " has versions up to " + latest
                    + "; startingVersion " + v + " does not exist (use 'latest' to read only what is committed "
                    + "from now on)");
            }
            if (v < log.oldestCommit()) {
                throw new IndexedDFException("VersionNotFoundError", root + ": the log holds commits from version "
                    + log.oldestCommit() + " on (older ones were cleaned up); startingVersion " + v
                    + " cannot be read: start at or after " + log.oldestCommit());
            }
            return new IndexedDFSourceOffset(tableId, v, -1, false);
        }
        return new IndexedDFSourceOffset(tableId, latest, -1, true);
    }

    // -- which files a range of positions holds ---------------------------------------------

    /** The files after one position, up to another, and the position of the last one. */
    private static final class Scan {
        /** The files, each with what its rows are (read as the feed's changes with {@code readChangeFeed}). */
        final List<ChangeFeed.Change> files = new ArrayList<>();
        IndexedDFSourceOffset end;
        long bytes;
    }

    /**
     * Takes the files of version {@code v} after position {@code after} into {@code scan} while it
     * has room ({@code maxFiles}, {@code maxBytes}) and stays at or before {@code until}, then moves
     * its end past the version; false when it stopped first (the batch is complete).
     */
    private boolean take(Scan scan, List<ChangeFeed.Change> files, long v, long after, boolean starting,
                         IndexedDFSourceOffset until, long maxFiles, long maxBytes) {
        for (int i = (int) after + 1; i < files.size(); i++) {
            IndexedDFSourceOffset pos = new IndexedDFSourceOffset(tableId, v, i, starting);
            if (until != null && pos.after(until) || scan.files.size() >= maxFiles || scan.bytes >= maxBytes) {
                return false;
            }
            scan.files.add(files.get(i));
            scan.bytes += files.get(i).file.size;
            scan.end = pos;
        }
        IndexedDFSourceOffset next = new IndexedDFSourceOffset(tableId, v + 1, -1, false);
        if (until != null && next.after(until)) {
            return false;
        }
        scan.end = next;
        return true;
    }

    /**
     * The files after {@code from}, up to {@code until} (inclusive; null: the newest version),
     * at most {@code maxFiles} of them and at most the first to reach {@code maxBytes} (at least
     * one). The end is normalised: when a version's last file is taken, or a version has none to
     * take, the end moves to ({@code v + 1}, -1), so one position has one spelling.
     * {@code admittedBefore}: the range is one an earlier offset admitted (a batch's, see
     * {@link #admitted}).
     */
    private Scan scan(IndexedDFSourceOffset from, IndexedDFSourceOffset until, long maxFiles, long maxBytes,
                      boolean admittedBefore) {
        DeltaLog log = DeltaLog.open(root, conf);
        long latest = log.latestVersion();
        Scan scan = new Scan();
        scan.end = from;
        long v = from.reservoirVersion;
        long after = from.index;
        if (from.isStartingVersion) {
            if (!take(scan, snapshotFiles(log, v), v, after, true, until, maxFiles, maxBytes)) {
                return scan;
            }
            v++;
            after = -1;
        }
        for (; v <= latest; v++, after = -1) {
            // The version's first file still to read; past the end, its commit is not read at all.
            if (until != null && new IndexedDFSourceOffset(tableId, v, after + 1, false).after(until)) {
                return scan;
            }
            if (scan.files.size() >= maxFiles || scan.bytes >= maxBytes) {
                return scan;  // full: the next commit is the next batch's to read (or to refuse)
            }
            List<ChangeFeed.Change> adds;
            try {
                adds = admitted(log, commit(log, v), admittedBefore);
            } catch (IndexedDFException refused) {
                if (scan.end.after(from)) {
                    return scan;  // the rows before the commit first; the next offset refuses it
                }
                throw refused;
            }
            if (!take(scan, adds, v, after, false, until, maxFiles, maxBytes)) {
                return scan;
            }
        }
        return scan;
    }

    /**
     * The live files of version {@code v}, the initial snapshot, by modification time and path
     * (Delta's order); as the feed reads them, inserts of version {@code v}.
     */
    private List<ChangeFeed.Change> snapshotFiles(DeltaLog log, long v) {
        synchronized (snapshotFiles) {
            List<ChangeFeed.Change> files = snapshotFiles.get(v);
            if (files == null) {
                List<AddFile> live = new ArrayList<>(log.snapshot(v).files);
                live.sort(Comparator.<AddFile>comparingLong(a -> a.modificationTime).thenComparing(a -> a.path));
                long time = options.changeFeed ? commitTime(log, v) : 0L;
                files = new ArrayList<>(live.size());
                for (AddFile a : live) {
                    files.add(new ChangeFeed.Change(a, ChangeFeed.INSERT, v, time));
                }
                snapshotFiles.clear();
                snapshotFiles.put(v, files);
            }
            return files;
        }
    }

    /** When version {@code v} was committed (its checkpoint's file time when its commit is gone). */
    private static long commitTime(DeltaLog log, long v) {
        return log.commitVersions().contains(v) ? log.commitTime(v) : log.fileModificationTime(v);
    }

    /** Whether the change data feed was on at version {@code v} (its metadata, or the last one before it). */
    private boolean feedOn(DeltaLog log, long v) {
        synchronized (feedOn) {
            Boolean on = feedOn.get(v);
            if (on == null) {
                CommitActions c = commit(log, v);
                if (c.metadata != null) {
                    on = ChangeFeed.enabled(c.metadata);
                } else if (feedOn.containsKey(v - 1)) {
                    on = feedOn.get(v - 1);
                } else {
                    on = ChangeFeed.enabled(log.snapshot(v).metadata);
                }
                if (feedOn.size() > 1024) {
                    feedOn.clear();
                }
                feedOn.put(v, on);
            }
            return on;
        }
    }

    private CommitActions commit(DeltaLog log, long v) {
        synchronized (commits) {
            CommitActions c = commits.get(v);
            if (c == null) {
                c = log.commitActions(v);
                commits.put(v, c);
            }
            return c;
        }
    }

    /**
     * The files of a commit the stream reads: its added files, unless it removed rows (see the
     * class). A commit that removed rows inside a range an offset already admitted (Spark asks
     * for the last committed batch again when a query restarts, and replays an uncommitted one)
     * was skipped or read by an option of the run that admitted it; when the options no longer
     * say which, it is skipped rather than refused: the error is for commits no offset covers yet.
     */
    private List<ChangeFeed.Change> admitted(DeltaLog log, CommitActions c, boolean admittedBefore) {
        if (c.metadata != null) {
            checkSchema(c);
        }
        if (options.changeFeed) {
            if (!feedOn(log, c.version)) {
                throw ChangeFeed.notRecorded(c.version, c.version, log.latestVersion());
            }
            return ChangeFeed.ofCommit(log, c);
        }
        if (!c.removesRows()) {
            return inserts(c);
        }
        if (options.skipChangeCommits) {
            return List.of();
        }
        if (options.ignoreChanges) {
            return inserts(c);
        }
        if (admittedBefore || c.adds.isEmpty() && options.ignoreDeletes) {
            return List.of();
        }
        if (c.adds.isEmpty()) {
            throw new IndexedDFException("SourceChangedError", "[DELTA_SOURCE_IGNORE_DELETE] Detected deleted data "
                + "(for example " + c.firstRemoved + ") from streaming source at version " + c.version + ". This is "
                + "not supported. If you'd like to ignore deletes, set the option 'ignoreDeletes' to 'true' (or "
                + "'skipChangeCommits' to skip every commit that changes rows). The source table can be found at "
                + "path " + root + ".");
        }
        throw new IndexedDFException("SourceChangedError", "[DELTA_SOURCE_TABLE_IGNORE_CHANGES] Detected a data "
            + "update (for example " + c.firstRemoved + ") in the source table at version " + c.version + ". This is "
            + "not supported. If this is going to happen regularly and you are okay to skip changes, set the option "
            + "'skipChangeCommits' to 'true'. If you would like the data update to be reflected, restart this query "
            + "with a fresh checkpoint location (it then reads the table as it is now, and the changes after it). "
            + "The source table can be found at path " + root + ".");
    }

    /** A commit's added files, as the files a stream of the table (not of its feed) reads. */
    private static List<ChangeFeed.Change> inserts(CommitActions c) {
        List<ChangeFeed.Change> out = new ArrayList<>(c.adds.size());
        for (AddFile a : c.adds) {
            out.add(new ChangeFeed.Change(a, ChangeFeed.INSERT, c.version, c.timestamp));
        }
        return out;
    }

    /**
     * A commit's {@code metaData} against the schema the stream reads: the same schema, or an
     * older one the stream's schema only adds nullable columns to (a restart after an added
     * column reads the older files with the new schema), else {@code SourceSchemaChangedError}.
     */
    private void checkSchema(CommitActions c) {
        JsonNode now = readSnapshot.metadata;
        String before = now.path("schemaString").asText("");
        String after = c.metadata.path("schemaString").asText("");
        boolean samePartitions = now.path("partitionColumns").equals(c.metadata.path("partitionColumns"));
        if (samePartitions && (before.equals(after) || readsAs((StructType) DataType.fromJson(after),
                (StructType) DataType.fromJson(before)))) {
            return;
        }
        throw new IndexedDFException("SourceSchemaChangedError", "[DELTA_SCHEMA_CHANGED] Detected schema change in "
            + "version " + c.version + " of " + root + ":\nstreaming source schema: "
            + ((StructType) DataType.fromJson(before)).simpleString() + "\n\ndata file schema: "
            + ((StructType) DataType.fromJson(after)).simpleString() + "\n\nPlease try restarting the query: it then "
            + "reads on with the new schema. If this issue repeats across query restarts without making progress, "
            + "you have made an incompatible schema change and need to start your query from scratch using a new "
            + "checkpoint directory.");
    }

    /** Whether rows of {@code older} read as {@code newer}: each of its columns kept, same type and mapping. */
    private static boolean readsAs(StructType older, StructType newer) {
        for (StructField f : older.fields()) {
            scala.Option<Object> idx = newer.getFieldIndex(f.name());
            if (idx.isEmpty()) {
                return false;
            }
            StructField g = newer.fields()[(Integer) idx.get()];
            if (!g.dataType().equals(f.dataType()) || !g.metadata().equals(f.metadata())) {
                return false;
            }
        }
        return true;
    }
}
