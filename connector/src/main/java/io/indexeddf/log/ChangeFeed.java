package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Delta's change data feed of a range of versions, as delta-spark's {@code CDCReader} reads it:
 * which files hold the changed rows, and what each file's rows are. Per commit: its change data
 * files ({@code cdc} actions, whose rows carry {@code _change_type} themselves) when it has any;
 * otherwise its files added with {@code dataChange} true (their rows are inserts) and its files
 * removed with {@code dataChange} true (their rows, less the deletion vector the file had, are
 * deletes). A file removed and added again in one commit with another deletion vector (a
 * DELETE, UPDATE or MERGE that marks rows deleted instead of rewriting the file) is Delta's
 * pair: the rows its new vector deletes and its old one did not are deletes, the rows its old
 * vector deleted and its new one does not are inserts, the other rows did not change. A commit
 * that changed no data (OPTIMIZE, metadata) gives nothing. Every row also gets the commit's
 * version and time.
 *
 * <p>The range is checked as Delta checks it: a start is required, the end may not be before
 * it, the start may not be after the newest version (an end after it is the newest), and the
 * feed must have been on ({@code delta.enableChangeDataFeed}) at every version of the range;
 * each failure is an {@link IndexedDFException} with Delta's error class in its message.
 * Nothing here reads a data file: the Spark side reads the files in its tasks.
 */
public final class ChangeFeed {
    /** The change type of the rows of a file a commit added (Delta's value). */
    public static final String INSERT = "insert";
    /** The change type of the rows of a file a commit removed (Delta's value). */
    public static final String DELETE = "delete";

    /** One file of the feed and what its rows are. */
    public static final class Change {
        /** The file (with the deletion vector it had, for an add or a remove). */
        public final AddFile file;
        /** {@link #INSERT} or {@link #DELETE}; null for a change data file, whose rows carry their type. */
        public final String changeType;
        /** The version of the commit that made the change. */
        public final long version;
        /** When that commit was made, in ms since the epoch. */
        public final long timestamp;
        /**
         * A deletion vector whose rows are the only ones of the file this change reads, or null
         * (every row but those of the file's own deletion vector).
         */
        public final DeletionVectorDescriptor selected;

        /** A change of all of {@code file}'s rows (but those of its deletion vector). */
        public Change(AddFile file, String changeType, long version, long timestamp) {
            this(file, changeType, version, timestamp, null);
        }

        /** A change of the rows of {@code file} that {@code selected} holds (all when null). */
        public Change(AddFile file, String changeType, long version, long timestamp,
                      DeletionVectorDescriptor selected) {
            this.file = file;
            this.changeType = changeType;
            this.version = version;
            this.timestamp = timestamp;
            this.selected = selected;
        }

        /** Whether the file is a change data file (its rows carry {@code _change_type}). */
        public boolean isChangeData() {
            return changeType == null;
        }
    }

    /** The first version of the range. */
    public final long start;
    /** The last version of the range (inclusive). */
    public final long end;
    /** The files of the range, commit by commit. */
    public final List<Change> changes;
    /** The table at {@link #end}: the schema the feed is read with. */
    public final Snapshot snapshot;

    private ChangeFeed(long start, long end, List<Change> changes, Snapshot snapshot) {
        this.start = start;
        this.end = end;
        this.changes = Collections.unmodifiableList(changes);
        this.snapshot = snapshot;
    }

    /** Whether a {@code metaData} action turns the feed on ({@code delta.enableChangeDataFeed} = true). */
    public static boolean enabled(JsonNode metadata) {
        JsonNode v = metadata == null ? null : metadata.path("configuration").get(Spec.CHANGE_FEED_PROPERTY);
        return v != null && "true".equalsIgnoreCase(v.asText().trim());
    }

    /**
     * The feed of {@code log} between the bounds a read gives (Delta's options: each bound a
     * version or a timestamp, null when not given; timestamps in ISO 8601, UTC without a zone,
     * or ms since the epoch). The start is required; without an end the feed runs to the
     * newest version.
     */
    public static ChangeFeed read(DeltaLog log, String startingVersion, String startingTimestamp,
                                  String endingVersion, String endingTimestamp) {
        boolean sv = present(startingVersion);
        boolean st = present(startingTimestamp);
        boolean ev = present(endingVersion);
        boolean et = present(endingTimestamp);
        if (!sv && !st) {
            throw IndexedDFException.option("[DELTA_NO_START_FOR_CDC_READ] No startingVersion or startingTimestamp "
                + "provided for CDC read: give option('startingVersion', n) or option('startingTimestamp', ts)");
        }
        if (sv && st || ev && et) {
            String which = sv && st ? "starting" : "ending";
            throw IndexedDFException.option("[DELTA_MULTIPLE_CDC_BOUNDARY] Multiple " + which + " arguments provided "
                + "for CDC read. Please provide one of either " + which + "Timestamp or " + which + "Version.");
        }
        long latest = log.latestVersion();
        long start;
        if (sv) {
            start = version(startingVersion, "startingVersion");
        } else {
            start = log.versionFrom(startingTimestamp);
            if (start > latest) {
                throw new IndexedDFException("VersionNotFoundError", "[DELTA_TIMESTAMP_GREATER_THAN_COMMIT] The "
                    + "provided timestamp (" + startingTimestamp.trim() + ") is after the latest version available to "
                    + "this table (" + log.latestVersion() + ", at " + log.root() + "). Please use a timestamp before "
                    + "or at " + Instant.ofEpochMilli(log.commitTime(latest)) + ".");
            }
        }
        long end = ev ? version(endingVersion, "endingVersion") : et ? log.versionAt(endingTimestamp) : latest;
        if (start > latest) {
            throw new IndexedDFException("VersionNotFoundError", "[DELTA_INVALID_CDC_RANGE] Provided Start version("
                + start + ") for reading change data is invalid. Start version cannot be greater than the latest "
                + "version of the table(" + latest + ").");
        }
        end = Math.min(end, latest);
        if (end < start) {
            throw IndexedDFException.option("[DELTA_INVALID_CDC_RANGE] CDC range from start " + start + " to end "
                + end + " was invalid. End cannot be before start.");
        }
        if (start < log.oldestCommit()) {
            throw new IndexedDFException("VersionNotFoundError", log.root() + ": the log holds commits from version "
                + log.oldestCommit() + " on (older ones were cleaned up); the change data of version " + start
                + " cannot be read: start at or after " + log.oldestCommit());
        }
        Snapshot first = log.snapshot(start);
        if (!enabled(first.metadata)) {
            throw notRecorded(start, start, end);
        }
        List<Change> out = new ArrayList<>();
        for (long v = start; v <= end; v++) {
            CommitActions c = log.commitActions(v);
            if (c.metadata != null && !enabled(c.metadata)) {
                throw notRecorded(v, start, end);
            }
            out.addAll(ofCommit(log, c));
        }
        return new ChangeFeed(start, end, out, end == start ? first : log.snapshot(end));
    }

    /** Delta's error for a version of the range whose metadata had the feed off. */
    public static IndexedDFException notRecorded(long version, long start, long end) {
        return new IndexedDFException("MissingChangeDataError", "[DELTA_MISSING_CHANGE_DATA] Error getting "
            + "change data for range [" + start + " , " + end + "] as change data was not recorded for version ["
            + version + "]. If you've enabled change data feed on this table, use `DESCRIBE HISTORY` to see when it "
            + "was first enabled. Otherwise, to start recording change data, use `ALTER TABLE table_name SET "
            + "TBLPROPERTIES (" + Spec.CHANGE_FEED_PROPERTY + "=true)`.");
    }

    /**
     * The files of one commit's changes: its change data files when it has any, else its
     * {@code dataChange} adds (inserts) then its {@code dataChange} removes (deletes), a file
     * removed and added again with another deletion vector read as the rows the vectors differ
     * by (see the class).
     */
    public static List<Change> ofCommit(DeltaLog log, CommitActions c) {
        List<Change> out = new ArrayList<>();
        if (!c.changeFiles.isEmpty()) {
            for (AddFile f : c.changeFiles) {
                out.add(new Change(f, null, c.version, c.timestamp));
            }
            return out;
        }
        Map<String, AddFile> readded = new HashMap<>();
        for (AddFile f : c.removes) {
            readded.put(f.path, null);
        }
        for (AddFile f : c.adds) {
            if (readded.containsKey(f.path)) {
                readded.put(f.path, f);
            } else {
                out.add(new Change(f, INSERT, c.version, c.timestamp));
            }
        }
        Map<String, AddFile> before = c.removedSizeKnown || c.removes.isEmpty() ? null : liveBefore(log, c.version);
        for (AddFile f : c.removes) {
            AddFile file = f;
            if (before != null) {
                AddFile was = before.get(f.path);
                if (was == null) {
                    throw IndexedDFException.corrupt(log.root(), "commit " + c.version + " removes " + f.path
                        + ", which version " + (c.version - 1) + " does not hold");
                }
                // The remove names the deletion vector the file had; the add its size and partition values.
                file = new AddFile(was.path, was.location, was.size, was.modificationTime, was.bucket, was.fileId,
                    was.sorted, f.deletionVector, was.partitionValues);
            }
            AddFile again = readded.get(f.path);
            if (again == null) {
                out.add(new Change(file, DELETE, c.version, c.timestamp));
                continue;
            }
            DeletionVectorDescriptor was = f.deletionVector;
            DeletionVectorDescriptor now = again.deletionVector;
            if (was != null && now != null && was.uniqueId().equals(now.uniqueId())) {
                continue;  // the same rows: no change
            }
            if (now != null) {  // deleted now: in the new vector, not in the old one
                out.add(new Change(withVector(again, was), DELETE, c.version, c.timestamp, now));
            }
            if (was != null) {  // back again: in the old vector, not in the new one
                out.add(new Change(again, INSERT, c.version, c.timestamp, was));
            }
        }
        return out;
    }

    private static AddFile withVector(AddFile a, DeletionVectorDescriptor dv) {
        return new AddFile(a.path, a.location, a.size, a.modificationTime, a.bucket, a.fileId, a.sorted, dv,
            a.partitionValues);
    }

    private static Map<String, AddFile> liveBefore(DeltaLog log, long version) {
        Map<String, AddFile> out = new HashMap<>();
        if (version > 0) {
            for (AddFile a : log.snapshot(version - 1).files) {
                out.put(a.path, a);
            }
        }
        return out;
    }

    private static boolean present(String s) {
        return s != null && !s.trim().isEmpty();
    }

    private static long version(String v, String name) {
        try {
            long n = Long.parseLong(v.trim());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw IndexedDFException.option("option " + name + " must be a version number >= 0, got '" + v + "'");
    }
}
