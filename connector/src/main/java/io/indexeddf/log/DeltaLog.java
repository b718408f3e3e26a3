package io.indexeddf.log;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A table's Delta log ({@code _delta_log/}), listed once ({@link LogListing}), and the entry to
 * its versions: {@link #snapshot} replays one ({@link Replay}: the newest checkpoint at or before
 * it, read by {@link CheckpointReader}, then the commits after it) and keeps it in this JVM's
 * cache of snapshots; {@link #versionAt} is time travel by timestamp ({@link TimeTravel}). What
 * indexeddf does not read is refused with the Python reader's error names ({@link ProtocolCheck}).
 *
 * <p>No Spark here: the package {@code io.indexeddf.log} reads the log with Hadoop's file
 * systems, Parquet and Jackson only, so it can be run and tested without a Spark session
 * ({@link LogDump}).
 */
public final class DeltaLog {
    /** The JSON reader of log lines and state files. */
    public static final ObjectMapper JSON = new ObjectMapper();
    public static final String CONF_INDEX_COLUMNS = Spec.CONF_INDEX_COLUMNS;
    public static final String CONF_NUM_BUCKETS = Spec.CONF_NUM_BUCKETS;
    static final String TAG_BUCKET = Spec.TAG_BUCKET;
    static final String TAG_SORTED = Spec.TAG_SORTED;

    private final LogListing listing;

    private DeltaLog(LogListing listing) {
        this.listing = listing;
    }

    /** Opens the log of the table at {@code root} (lists {@code _delta_log/} once). */
    public static DeltaLog open(Path root, Configuration conf) {
        try {
            return new DeltaLog(new LogListing(root, conf));
        } catch (IOException e) {
            throw new IndexedDFException("CorruptLogError", "cannot list " + root + "/_delta_log: " + e, e);
        }
    }

    /** The table's root. */
    public Path root() {
        return listing.root;
    }

    /** The newest version in the log. */
    public long latestVersion() {
        return listing.latestVersion();
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
        Path root = listing.root;
        if (target > latest || target < 0) {
            throw new IndexedDFException("VersionNotFoundError",
                root + " has versions up to " + latest + "; version " + target + " does not exist");
        }
        String key = root + "|" + listing.stamp(target) + "|" + listing.stamp(latest);
        synchronized (SNAPSHOTS) {
            Snapshot cached = SNAPSHOTS.get(key);
            if (cached != null) {
                return cached;
            }
        }
        Snapshot snap = replay(target, latest);
        snap.identity = root + "|" + listing.stamp(target);
        synchronized (SNAPSHOTS) {
            if (SNAPSHOTS.put(key, snap) == null) {
                snapshotFiles += snap.files.size();
            }
            Iterator<Snapshot> it = SNAPSHOTS.values().iterator();
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

    /**
     * Version {@code version} of a Delta table that may not be indexed yet (replayed now, not
     * cached): the files {@code CONVERT TO INDEXEDDF} indexes.
     */
    public Snapshot unindexedSnapshot(long version) {
        if (version > latestVersion() || version < 0) {
            throw new IndexedDFException("VersionNotFoundError",
                listing.root + " has versions up to " + latestVersion() + "; version " + version + " does not exist");
        }
        return Replay.snapshot(listing, version, true);
    }

    private Snapshot replay(long target, long latest) {
        Snapshot snap = Replay.snapshot(listing, target);
        if (target < latest) {
            // A newer state of an index may serve this version (PROTOCOL.md 4.5.4): replayed once,
            // only when a lookup asks.
            @SuppressWarnings("unchecked")
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

    /** The versions that have a JSON commit in the log, oldest first (what a history lists). */
    public java.util.List<Long> commitVersions() {
        return new java.util.ArrayList<>(listing.commits.keySet());
    }

    /**
     * The {@code commitInfo} action of commit {@code version}, or null when the commit has
     * none (a writer may omit it) or the log no longer holds the commit file.
     */
    public com.fasterxml.jackson.databind.JsonNode commitInfo(long version) {
        org.apache.hadoop.fs.FileStatus st = listing.commits.get(version);
        if (st == null) {
            return null;
        }
        for (String line : listing.readLines(st.getPath())) {
            if (!line.trim().isEmpty()) {
                com.fasterxml.jackson.databind.JsonNode info = LogListing.parse(line, st.getPath()).get("commitInfo");
                if (info != null) {
                    return info;
                }
            }
        }
        return null;
    }

    /**
     * When commit {@code version} was made, in ms since the epoch: its
     * {@code commitInfo.inCommitTimestamp} or {@code timestamp}, else its file's modification
     * time (the time time travel by timestamp uses).
     */
    public long commitTime(long version) {
        return TimeTravel.commitTime(listing, version);
    }

    /** The modification time of the log file of {@code version} (its commit, or its checkpoint). */
    public long fileModificationTime(long version) {
        org.apache.hadoop.fs.FileStatus st = listing.commits.containsKey(version)
            ? listing.commits.get(version) : listing.checkpoints.get(version).get(0);
        return st.getModificationTime();
    }

    /** The newest version committed at or before {@code timestamp} (Delta's rule). */
    public long versionAt(String timestamp) {
        return TimeTravel.versionAt(listing, timestamp);
    }

    /** What commit {@code version} added and removed (a streaming read's unit, {@link CommitActions}). */
    public CommitActions commitActions(long version) {
        return CommitActions.read(listing, version);
    }

    /** The oldest version whose JSON commit the log still holds, or -1 when it holds none. */
    public long oldestCommit() {
        return listing.commits.isEmpty() ? -1 : listing.commits.firstKey();
    }

    /** The oldest version committed at or after {@code timestamp}, or the newest plus one (a stream's start). */
    public long versionFrom(String timestamp) {
        return TimeTravel.versionFrom(listing, timestamp);
    }
}
