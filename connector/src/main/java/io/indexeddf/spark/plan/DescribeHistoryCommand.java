package io.indexeddf.spark.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code DESCRIBE HISTORY table [LIMIT n]}: the table's commits, newest first, with the columns
 * and types of Delta's statement (version, timestamp, userId, userName, operation,
 * operationParameters, job, notebook, clusterId, readVersion, isolationLevel, isBlindAppend,
 * operationMetrics, userMetadata, engineInfo), read from each commit's {@code commitInfo}
 * action by the JVM's own reading of the log. A commit without {@code commitInfo} is left out,
 * as {@code IndexedTable.history()} leaves it out. {@code timestamp} is the commit's
 * {@code inCommitTimestamp} or {@code timestamp} (the time time travel by timestamp uses).
 * Values of {@code operationParameters} and {@code operationMetrics} are strings, as Delta
 * shows them: a JSON string as its text, any other JSON value as its JSON.
 */
public final class DescribeHistoryCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** Delta's {@code DESCRIBE HISTORY} columns. */
    public static final StructType SCHEMA = new StructType()
        .add("version", DataTypes.LongType)
        .add("timestamp", DataTypes.TimestampType)
        .add("userId", DataTypes.StringType)
        .add("userName", DataTypes.StringType)
        .add("operation", DataTypes.StringType)
        .add("operationParameters", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType))
        .add("job", new StructType()
            .add("jobId", DataTypes.StringType)
            .add("jobName", DataTypes.StringType)
            .add("runId", DataTypes.StringType)
            .add("jobOwnerId", DataTypes.StringType)
            .add("triggerType", DataTypes.StringType))
        .add("notebook", new StructType().add("notebookId", DataTypes.StringType))
        .add("clusterId", DataTypes.StringType)
        .add("readVersion", DataTypes.LongType)
        .add("isolationLevel", DataTypes.StringType)
        .add("isBlindAppend", DataTypes.BooleanType)
        .add("operationMetrics", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType))
        .add("userMetadata", DataTypes.StringType)
        .add("engineInfo", DataTypes.StringType);

    private final String path;
    private final List<String> name;
    private final Integer limit;

    /** The history of the table named by {@code path} or {@code name} ({@link SqlTable}), at most {@code limit}. */
    public DescribeHistoryCommand(String path, List<String> name, Integer limit) {
        super(attributes(SCHEMA));
        this.path = path;
        this.name = name;
        this.limit = limit;
    }

    static List<Attribute> attributes(StructType schema) {
        return new ArrayList<>(CollectionConverters.asJava(DataTypeUtils.toAttributes(schema)));
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        if (limit != null && limit < 0) {
            throw IndexedDFException.option("DESCRIBE HISTORY ... LIMIT " + limit + ": the limit must be >= 0");
        }
        DeltaLog log = SqlTable.resolve(session, path, name, "DESCRIBE HISTORY").log(session);
        List<Long> versions = log.commitVersions();
        Collections.reverse(versions);
        List<Row> rows = new ArrayList<>();
        for (long v : versions) {
            if (limit != null && rows.size() >= limit) {
                break;
            }
            JsonNode info = log.commitInfo(v);
            if (info != null) {
                rows.add(row(v, info, log.commitTime(v)));
            }
        }
        return CollectionConverters.asScala(rows).toList();
    }

    private static Row row(long version, JsonNode info, long time) {
        JsonNode job = info.get("job");
        JsonNode notebook = info.get("notebook");
        return RowFactory.create(
            version,
            new Timestamp(time),
            text(info.get("userId")),
            text(info.get("userName")),
            text(info.get("operation")),
            strings(info.get("operationParameters")),
            job == null || !job.isObject() ? null : RowFactory.create(text(job.get("jobId")),
                text(job.get("jobName")), text(job.get("runId")), text(job.get("jobOwnerId")),
                text(job.get("triggerType"))),
            notebook == null || !notebook.isObject() ? null : RowFactory.create(text(notebook.get("notebookId"))),
            text(info.get("clusterId")),
            info.hasNonNull("readVersion") ? info.get("readVersion").asLong() : null,
            text(info.get("isolationLevel")),
            info.hasNonNull("isBlindAppend") ? info.get("isBlindAppend").asBoolean() : null,
            strings(info.get("operationMetrics")),
            text(info.get("userMetadata")),
            text(info.get("engineInfo")));
    }

    /** A JSON value as a string column shows it: a string's text, anything else its JSON; null stays null. */
    static String text(JsonNode node) {
        if (node == null || node.isNull() || node.isMissingNode()) {
            return null;
        }
        return node.isTextual() ? node.asText() : node.toString();
    }

    /** A JSON object as a map of strings ({@link #text} of each value), or null. */
    static Map<String, String> strings(JsonNode node) {
        if (node == null || !node.isObject()) {
            return null;
        }
        Map<String, String> out = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            out.put(e.getKey(), text(e.getValue()));
        }
        return out;
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {path, name, limit};
    }
}
