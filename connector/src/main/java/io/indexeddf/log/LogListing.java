package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * One listing of a table's {@code _delta_log/}: its JSON commits and its complete classic
 * checkpoints (single-file, or multi-part with every part present) by version, and the reads
 * of its files (lines of a commit, {@code _last_checkpoint}). Listed once per
 * {@link DeltaLog#open}; replay, time travel and the index state read through it.
 */
final class LogListing {
    private static final Pattern COMMIT = Pattern.compile("^(\\d{20})\\.json$");
    private static final Pattern CHECKPOINT = Pattern.compile("^(\\d{20})\\.checkpoint\\.parquet$");
    /** A UUID-named (v2 spec) checkpoint, JSON or Parquet (PROTOCOL.md 7.2): used when no classic one has its version. */
    private static final Pattern UUID_CHECKPOINT =
        Pattern.compile("^(\\d{20})\\.checkpoint\\.[0-9a-fA-F-]{36}\\.(json|parquet)$");
    private static final Pattern CHECKPOINT_PART =
        Pattern.compile("^(\\d{20})\\.checkpoint\\.(\\d{10})\\.(\\d{10})\\.parquet$");

    final Path root;
    final Path logDir;
    final FileSystem fs;
    final TreeMap<Long, FileStatus> commits = new TreeMap<>();
    final TreeMap<Long, List<FileStatus>> checkpoints = new TreeMap<>();

    LogListing(Path root, Configuration conf) throws IOException {
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
        Map<Long, List<FileStatus>> uuidNamed = new TreeMap<>();
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
            m = UUID_CHECKPOINT.matcher(name);
            if (m.matches()) {
                uuidNamed.computeIfAbsent(Long.parseLong(m.group(1)), k -> new ArrayList<>()).add(st);
                continue;
            }
            m = CHECKPOINT_PART.matcher(name);
            if (m.matches()) {
                long v = Long.parseLong(m.group(1));
                parts.computeIfAbsent(v, k -> new ArrayList<>()).add(st);
                partCounts.put(v, Integer.parseInt(m.group(3)));
            }
        }
        for (Map.Entry<Long, List<FileStatus>> e : uuidNamed.entrySet()) {
            if (!checkpoints.containsKey(e.getKey())) {  // each is the whole state: the first by name
                e.getValue().sort((a, b) -> a.getPath().getName().compareTo(b.getPath().getName()));
                checkpoints.put(e.getKey(), new ArrayList<>(List.of(e.getValue().get(0))));
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

    /** The newest version in the log. */
    long latestVersion() {
        long c = commits.isEmpty() ? -1 : commits.lastKey();
        long k = checkpoints.isEmpty() ? -1 : checkpoints.lastKey();
        return Math.max(c, k);
    }

    /** Version {@code v} with the modification time and length of the log file that holds it. */
    String stamp(long v) {
        FileStatus st = commits.containsKey(v) ? commits.get(v) : checkpoints.get(v).get(0);
        return v + "@" + st.getModificationTime() + "+" + st.getLen();
    }

    /** The version {@code _last_checkpoint} names, or null when it is absent or unreadable. */
    Long lastCheckpointHint() {
        Path p = new Path(logDir, "_last_checkpoint");
        try (FSDataInputStream in = fs.open(p)) {
            JsonNode hint = DeltaLog.JSON.readTree(in);
            JsonNode v = hint.get("version");
            return v != null && v.canConvertToLong() ? v.asLong() : null;
        } catch (IOException e) {
            return null;  // absent or unreadable: the listing names the checkpoints
        }
    }

    /** The lines of a log file. */
    List<String> readLines(Path p) {
        List<String> lines = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(fs.open(p), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                lines.add(line);
            }
        } catch (IOException e) {
            throw IndexedDFException.corrupt(p, "cannot be read: " + e);
        }
        return lines;
    }

    /** One line of a commit: a JSON object holding one action. */
    static JsonNode parse(String line, Path source) {
        try {
            JsonNode n = DeltaLog.JSON.readTree(line);
            if (n == null || !n.isObject()) {
                throw IndexedDFException.corrupt(source, "a line must be a JSON object holding one action");
            }
            return n;
        } catch (IOException e) {
            throw IndexedDFException.corrupt(source, "not valid JSON (" + e.getMessage() + ")");
        }
    }
}
