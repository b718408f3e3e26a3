package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;

/**
 * Time travel by timestamp, Delta's rule: the newest version committed at or before it. A
 * commit's time is its {@code commitInfo.inCommitTimestamp} or {@code timestamp}, else its
 * file's modification time.
 */
final class TimeTravel {
    private TimeTravel() {
    }

    /** The newest version of {@code log} committed at or before {@code timestamp}. */
    static long versionAt(LogListing log, String timestamp) {
        long ms = toMillis(timestamp);
        List<Long> versions = new ArrayList<>(log.commits.keySet());
        if (versions.isEmpty()) {
            throw new IndexedDFException("VersionNotFoundError", log.root + " has no commits");
        }
        if (commitTime(log, versions.get(0)) > ms) {
            throw new IndexedDFException("VersionNotFoundError",
                log.root + " did not exist at " + timestamp + "; its oldest version (" + versions.get(0)
                + ") was committed at " + Instant.ofEpochMilli(commitTime(log, versions.get(0))));
        }
        int lo = 0;
        int hi = versions.size() - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (commitTime(log, versions.get(mid)) <= ms) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return versions.get(lo);
    }

    /**
     * The oldest version of {@code log} committed at or after {@code timestamp}, or the newest
     * version plus one when none was (a stream's {@code startingTimestamp}, Delta's rule).
     */
    static long versionFrom(LogListing log, String timestamp) {
        long ms = toMillis(timestamp);
        List<Long> versions = new ArrayList<>(log.commits.keySet());
        int lo = 0;
        int hi = versions.size();
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (commitTime(log, versions.get(mid)) >= ms) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo < versions.size() ? versions.get(lo) : log.latestVersion() + 1;
    }

    /** A commit's time: {@code commitInfo.timestamp} (or inCommitTimestamp), else the file's modification time. */
    static long commitTime(LogListing log, long version) {
        FileStatus st = log.commits.get(version);
        for (String line : log.readLines(st.getPath())) {
            if (line.trim().isEmpty()) {
                continue;
            }
            JsonNode info = LogListing.parse(line, st.getPath()).get("commitInfo");
            if (info != null) {
                return commitTime(info, st);
            }
        }
        return st.getModificationTime();
    }

    /** The time of the commit whose file is {@code st} and whose {@code commitInfo} is {@code info} (may be null). */
    static long commitTime(JsonNode info, FileStatus st) {
        if (info != null) {
            JsonNode ts = info.get("inCommitTimestamp");
            if (ts == null || !ts.isNumber()) {
                ts = info.get("timestamp");
            }
            if (ts != null && ts.isNumber()) {
                return ts.asLong();
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
}
