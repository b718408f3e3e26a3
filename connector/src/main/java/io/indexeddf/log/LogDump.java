package io.indexeddf.log;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Prints what the connector's log reader makes of a table at a version, as one JSON object,
 * with no Spark session: {@code java -cp <connector jar>:<pyspark>/jars/* io.indexeddf.log.LogDump
 * PATH [VERSION | --timestamp TS]}. The tests compare it with the Python reader's snapshot
 * ({@code tests/test_log_dump.py}); it is also a quick look at a table's replay.
 *
 * <p>Prints {@code version}, {@code latestVersion}, {@code protocol}, {@code schemaString},
 * {@code indexColumns}, {@code numBuckets}, {@code files} (live paths, sorted, each with its
 * bucket and file id, and, when it has one, its {@code deletionVector}: unique id and
 * cardinality) and {@code indexes} (by name: columns, kind, state, numBuckets, index
 * file paths sorted; null when the log leaves them unknown). A typed refusal prints
 * {@code {"error": name, "message": ...}} and exits with status 2. {@code --all}: every
 * version in one run, a JSON array.
 */
public final class LogDump {
    private LogDump() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 3) {
            System.err.println("usage: LogDump PATH [VERSION | --timestamp TS | --all]");
            System.exit(64);
        }
        if (args.length == 2 && args[1].equals("--all")) {
            System.exit(dumpAll(args[0]));
        }
        ObjectNode out = JsonNodeFactory.instance.objectNode();
        int status = 0;
        try {
            Path p = new Path(args[0]);
            Configuration conf = new Configuration();
            Path root = p.getFileSystem(conf).makeQualified(p);
            DeltaLog log = DeltaLog.open(root, conf);
            Long version = null;
            if (args.length == 3 && args[1].equals("--timestamp")) {
                version = log.versionAt(args[2]);
            } else if (args.length == 2) {
                version = Long.parseLong(args[1]);
            }
            dump(log.snapshot(version), log.latestVersion(), out);
        } catch (IndexedDFException e) {
            out.put("error", e.errorName);
            out.put("message", e.getMessage());
            status = 2;
        }
        System.out.println(DeltaLog.JSON.writerWithDefaultPrettyPrinter().writeValueAsString(out));
        System.exit(status);
    }

    /**
     * {@code --all}: every version from 0 to the newest in one run, as a JSON array of what a
     * run for each version prints (a refused version: its error object). One JVM instead of one
     * a version: a check of a long log starts Java once.
     */
    private static int dumpAll(String path) throws Exception {
        ArrayNode all = JsonNodeFactory.instance.arrayNode();
        int status = 0;
        try {
            Path p = new Path(path);
            Configuration conf = new Configuration();
            DeltaLog log = DeltaLog.open(p.getFileSystem(conf).makeQualified(p), conf);
            long latest = log.latestVersion();
            for (long v = 0; v <= latest; v++) {
                ObjectNode out = all.addObject();
                try {
                    dump(log.snapshot(v), latest, out);
                } catch (IndexedDFException e) {
                    out.put("error", e.errorName);
                    out.put("message", e.getMessage());
                }
            }
        } catch (IndexedDFException e) {
            ObjectNode out = all.addObject();
            out.put("error", e.errorName);
            out.put("message", e.getMessage());
            status = 2;
        }
        System.out.println(DeltaLog.JSON.writerWithDefaultPrettyPrinter().writeValueAsString(all));
        return status;
    }

    private static void dump(Snapshot s, long latest, ObjectNode out) {
        out.put("version", s.version);
        out.put("latestVersion", latest);
        out.set("protocol", s.protocol);
        out.put("schemaString", s.schemaString());
        ArrayNode columns = out.putArray("indexColumns");
        s.indexColumns().forEach(columns::add);
        out.put("numBuckets", s.numBuckets());
        List<AddFile> files = new ArrayList<>(s.files);
        files.sort((a, b) -> a.path.compareTo(b.path));
        ArrayNode fs = out.putArray("files");
        for (AddFile a : files) {
            ObjectNode o = fs.addObject();
            o.put("path", a.path);
            o.put("size", a.size);
            if (a.bucket == null) {
                o.putNull("bucket");
            } else {
                o.put("bucket", a.bucket);
            }
            o.put("fileId", a.fileId);
            o.put("sorted", a.sorted);
            if (a.deletionVector != null) {  // only then: the Python side's dump has no such key
                ObjectNode dv = o.putObject("deletionVector");
                dv.put("uniqueId", a.deletionVector.uniqueId());
                dv.put("cardinality", a.deletionVector.cardinality);
            }
        }
        if (s.indexes == null) {
            out.putNull("indexes");
            return;
        }
        ObjectNode indexes = out.putObject("indexes");
        for (Map.Entry<String, IndexLog.Entry> e : s.indexes.entrySet()) {
            IndexLog.Entry x = e.getValue();
            ObjectNode o = indexes.putObject(e.getKey());
            ArrayNode cols = o.putArray("columns");
            x.columns.forEach(cols::add);
            o.put("kind", x.kind);
            o.put("state", x.state);
            o.put("numBuckets", x.numBuckets);
            List<String> paths = new ArrayList<>();
            for (IndexLog.IndexFile file : x.files) {
                paths.add(file.path);
            }
            Collections.sort(paths);
            ArrayNode ps = o.putArray("files");
            paths.forEach(ps::add);
        }
    }
}
