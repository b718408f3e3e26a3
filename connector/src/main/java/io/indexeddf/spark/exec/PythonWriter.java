package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

import io.indexeddf.log.IndexedDFException;

/**
 * Writes through the Python data source {@code indexeddf_python} ({@code indexeddf.register(spark)}):
 * the provider's batch writes, SQL inserts and the stream sink's micro-batches all commit
 * through the Python writer. Spark's save modes are handled here first (Spark refuses
 * errorifexists / ignore for Python sources).
 */
public final class PythonWriter {
    private PythonWriter() {
    }

    /** Writes {@code data} in {@code mode} to the table {@code parameters} name ({@code path}). */
    public static BaseRelation save(SQLContext sqlContext, SaveMode mode,
                                    scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
        return save(sqlContext, mode, parameters, data, false);
    }

    /**
     * As {@link #save(SQLContext, SaveMode, scala.collection.immutable.Map, Dataset)}; with
     * {@code autoMerge} (a DataFrame write, {@code df.write.format("indexeddf")}) the session's
     * {@link #AUTO_MERGE_CONF} applies. SQL inserts (rows already cast to the table's schema)
     * and other statements written through here do not take it.
     */
    public static BaseRelation save(SQLContext sqlContext, SaveMode mode,
                                    scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data,
                                    boolean autoMerge) {
        return save(sqlContext, mode, parameters, data, autoMerge, false);
    }

    /**
     * A write of table rows ({@code df.write}, {@code INSERT}, {@code writeTo}, {@code
     * saveAsTable}): as {@link #save(SQLContext, SaveMode, scala.collection.immutable.Map,
     * Dataset, boolean)}, the table's CHECK constraints checked in the written plan by Catalyst
     * ({@link CheckConstraints}). Statements that pass other rows (a change's source, the one
     * empty row of an {@code ALTER TABLE}) use the other overloads.
     */
    public static BaseRelation saveRows(SQLContext sqlContext, SaveMode mode,
                                        scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data,
                                        boolean autoMerge) {
        return save(sqlContext, mode, parameters, data, autoMerge, true);
    }

    private static BaseRelation save(SQLContext sqlContext, SaveMode mode,
                                     scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data,
                                     boolean autoMerge, boolean tableRows) {
        org.apache.spark.sql.classic.SparkSession session = TableRelation.classic(sqlContext);
        Map<String, String> opts = passThrough(parameters);
        String path = opts.get("path");
        if (path == null || path.isEmpty()) {
            throw IndexedDFException.option("indexeddf needs one table location: .save(path)");
        }
        requirePythonSource(session);
        checkPartitionBy(opts, path, session.sessionState().newHadoopConf());
        if (autoMerge) {
            autoMerge(session, opts);
        }
        String pyMode;
        String saveModeOption = lookup(opts, "saveMode");
        switch (mode) {
            case Overwrite:
                pyMode = "overwrite";
                break;
            case Append:
                pyMode = "append";
                break;
            case ErrorIfExists:
            case Ignore:
            default: {
                pyMode = "append";
                if (saveModeOption == null) {
                    String name = mode == SaveMode.Ignore ? "ignore" : "errorifexists";
                    if (tableExists(path, session.sessionState().newHadoopConf())) {
                        if (mode == SaveMode.Ignore) {
                            return new WrittenRelation(sqlContext, writtenSchema(path, session, data.schema()));
                        }
                        throw new IndexedDFException("TableExistsError",
                            "a table already exists at " + path + " (mode " + name + "); use mode('append') "
                            + "or mode('overwrite')");
                    }
                    // The Python writer checks again where it commits (put-if-absent).
                    opts.put("saveMode", name);
                }
                break;
            }
        }
        sizeEstimate(session, opts, path, data);
        if (tableRows) {  // a table the connector cannot reach (no table yet, s3:// without hadoop-aws): its tasks check
            data = CheckConstraints.forWrite(session, path, data, opts);
        }
        try {
            save(session, data.write().format(TableRelation.PYTHON_NAME).mode(pyMode).options(opts));
        } catch (Exception e) {  // Spark's AnalysisException is a checked exception to Java
            throw unwrapped(e);
        }
        return new WrittenRelation(sqlContext, writtenSchema(path, session, data.schema()));
    }

    /** Spark's byte limit on an Arrow batch sent to Python workers. */
    static final String ARROW_BATCH_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch";

    /**
     * Saves a write through the Python data source. Unless the session sets
     * {@value #ARROW_BATCH_BYTES} itself, the write's batches to its Python tasks are bounded by
     * rows only ({@code spark.sql.execution.arrow.maxRecordsPerBatch}, 10,000 by default), as they
     * were before Spark 4: Spark checks a byte limit after every row by sizing every column
     * vector of the batch: in a 2M-row MERGE into 20M rows the JVM spent 1.1 to 2.0 CPU-s less
     * without it, of 7.7 (a fifth; loaded A/B, warm rounds). {@code Integer.MAX_VALUE} is the
     * value at which Spark skips the check. The session's setting is lifted for
     * the write, so it covers every Arrow hand-off of the write's job (a pandas or Arrow UDF in
     * the source query too) and of any query the session runs meanwhile. A session whose rows
     * are wide enough for 10,000 of them to strain a Python worker sets the limit, and it
     * stands.
     */
    public static void save(org.apache.spark.sql.SparkSession session, org.apache.spark.sql.DataFrameWriter<Row> writer) {
        org.apache.spark.sql.RuntimeConfig conf = session.conf();
        if (conf.contains(ARROW_BATCH_BYTES)) {
            writer.save();
            return;
        }
        conf.set(ARROW_BATCH_BYTES, Integer.toString(Integer.MAX_VALUE));
        try {
            writer.save();
        } finally {
            conf.unset(ARROW_BATCH_BYTES);
        }
    }

    /** The private option with Spark's estimate of the written bytes (the Python writer's {@code SIZE_OPTION}). */
    static final String SIZE_OPTION = "_sizeInBytes";

    /**
     * A write that may create the table without {@code numBuckets} (no table at {@code path}, or a
     * replace) passes Spark's estimate of its plan's bytes ({@code sizeInBytes} of the optimized
     * plan, nothing run) to the Python writer, which chooses the bucket count from it
     * ({@code spec/bucket_count.py}). An estimate Spark does not have ({@code
     * spark.sql.defaultSizeInBytes}) is left out: the count is then the default.
     */
    private static void sizeEstimate(org.apache.spark.sql.classic.SparkSession session, Map<String, String> opts,
                                     String path, Dataset<Row> data) {
        if (lookup(opts, "numBuckets") != null || lookup(opts, "_operation") != null) {  // a statement: no rows
            return;
        }
        try {
            if (lookup(opts, "_replaceTable") == null && tableExists(path, session.sessionState().newHadoopConf())) {
                return;
            }
            scala.math.BigInt size = data.queryExecution().optimizedPlan().stats().sizeInBytes();
            if (size.signum() >= 0 && size.compare(scala.math.BigInt.apply(session.sessionState().conf()
                    .defaultSizeInBytes())) < 0) {
                opts.put(SIZE_OPTION, size.toString());
            }
        } catch (RuntimeException e) {
            // A plan Spark cannot estimate, or a table this session's Hadoop cannot reach (s3://
            // without hadoop-aws; the Python writer reaches it with fsspec): the Python writer
            // takes the default count.
        }
    }

    /**
     * The table's schema after a write, as its log has it (every column a Spark write makes is
     * nullable there): what Spark records in the catalog entry of a table that
     * {@code CREATE TABLE ... AS SELECT} or {@code saveAsTable} creates. The frame's schema
     * would make the entry say {@code NOT NULL} where the table does not. Column comments are
     * kept, column mapping's field metadata is not. Without a table the connector reads (nothing committed, or a store with no Hadoop file system), the
     * frame's schema with every column nullable.
     */
    private static StructType writtenSchema(String path, org.apache.spark.sql.classic.SparkSession session,
                                            StructType data) {
        Configuration conf = session.sessionState().newHadoopConf();
        StructType table = null;
        try {
            if (tableExists(path, conf)) {
                table = ColumnMapping.tableSchema(
                    io.indexeddf.log.DeltaLog.open(TableRelation.tableRoot(path, conf), conf).snapshot(null));
            }
        } catch (IndexedDFException e) {
            // A table the connector cannot read (no Hadoop file system for its store: the
            // Python writer reached it through fsspec): the frame's schema, all nullable.
        }
        StructType schema = table != null ? table : data;
        org.apache.spark.sql.types.StructField[] out = new org.apache.spark.sql.types.StructField[schema.size()];
        for (int i = 0; i < out.length; i++) {
            org.apache.spark.sql.types.StructField f = schema.fields()[i];
            org.apache.spark.sql.types.MetadataBuilder meta = new org.apache.spark.sql.types.MetadataBuilder();
            if (f.metadata().contains("comment")) {
                meta.putString("comment", f.metadata().getString("comment"));
            }
            out[i] = new org.apache.spark.sql.types.StructField(f.name(),
                table != null ? ColumnMapping.shape(f.dataType()) : ColumnMapping.nullableShape(f.dataType()),
                table == null || f.nullable(), meta.build());
        }
        return new StructType(out);
    }


    /**
     * Spark's {@code partitionBy(...)} (the {@code __partition_columns} option) on an existing
     * table may only repeat the table's own partition columns: the Python writer puts every
     * row in its partition anyway, and repartitioning a table is not supported. On a new
     * table it is passed on: the Python writer creates the table partitioned that way.
     */
    private static void checkPartitionBy(Map<String, String> opts, String path, Configuration conf) {
        String given = opts.remove("__partition_columns");
        if (given == null) {
            return;
        }
        if (lookup(opts, "_replaceTable") != null || !tableExists(path, conf)) {  // a replace sets them anew
            opts.put("__partition_columns", given);
            return;
        }
        List<String> columns = new java.util.ArrayList<>();
        try {
            for (com.fasterxml.jackson.databind.JsonNode n : io.indexeddf.log.DeltaLog.JSON.readTree(given)) {
                columns.add(n.asText());
            }
        } catch (IOException e) {
            throw IndexedDFException.option("partitionBy(...) gave unreadable columns " + given);
        }
        List<String> table =
            io.indexeddf.log.DeltaLog.open(TableRelation.tableRoot(path, conf), conf).snapshot(null).partitionColumns();
        if (!columns.equals(table)) {
            throw IndexedDFException.option("partitionBy(" + String.join(", ", columns) + "): "
                + (table.isEmpty() ? "the table exists and is not partitioned, and indexeddf does not repartition a "
                    + "table; drop partitionBy(...) (indexeddf tables are bucketed by their index columns)"
                    : "the table is partitioned by " + table + "; name those columns, in that order, or drop "
                    + "partitionBy(...): rows are written in their partitions either way"));
        }
    }

    private static boolean tableExists(String path, Configuration conf) {
        Path root = TableRelation.tableRoot(path, conf);
        try {
            FileSystem fs = root.getFileSystem(conf);
            for (FileStatus st : fs.listStatus(new Path(root, "_delta_log"))) {
                if (st.getPath().getName().endsWith(".json") || st.getPath().getName().contains(".checkpoint.")) {
                    return true;
                }
            }
            return false;
        } catch (java.io.FileNotFoundException e) {
            return false;
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot list " + root + "/_delta_log: " + e, e);
        }
    }

    private static final java.util.regex.Pattern TYPED =
        java.util.regex.Pattern.compile("indexeddf\\.errors\\.(\\w+): ([^\\n]*)");

    /**
     * The error a user caused, as itself: Spark reports an error the Python writer raised
     * wrapped in its own ({@code [PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data
     * source writer: Traceback ...}, or a failed job's {@code PythonException}), with the typed
     * error's name and message on the traceback's last line. This returns an
     * {@link IndexedDFException} whose message starts with that name and message (the last one
     * named anywhere in {@code e} and its causes: earlier ones are its context), the Spark
     * exception as its cause; or {@code e} itself (thrown here when it is a checked exception,
     * as Scala code throws one) when it names none or already is one.
     */
    public static RuntimeException unwrapped(Exception e) {
        if (e instanceof IndexedDFException) {
            return (IndexedDFException) e;
        }
        String name = null;
        String message = null;
        java.util.Set<Throwable> seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (Throwable t = e; t != null && seen.add(t); t = t.getCause()) {
            if (t instanceof IndexedDFException && name == null) {
                return (IndexedDFException) t;  // thrown by the connector in a task (a CHECK constraint), whole
            }
            if (t.getMessage() == null) {
                continue;
            }
            java.util.regex.Matcher m = TYPED.matcher(t.getMessage());
            String lastName = null;
            String lastMessage = null;
            while (m.find()) {
                lastName = m.group(1);
                lastMessage = m.group(2).trim();
            }
            if (lastName != null && name == null) {
                name = lastName;  // the outermost exception's traceback ends with the error raised
                message = lastMessage;
            }
        }
        if (name == null) {
            if (e instanceof RuntimeException) {
                return (RuntimeException) e;
            }
            throw PythonWriter.<RuntimeException>sneaky(e);
        }
        return new IndexedDFException(name, message.replaceAll("\\s*SQLSTATE: \\w+$", ""), e);
    }

    /** Throws {@code e} unchanged, whatever its type (Spark's Scala code throws checked exceptions so). */
    @SuppressWarnings("unchecked")
    private static <T extends Exception> T sneaky(Exception e) throws T {
        throw (T) e;
    }

    /** The session conf that makes every write evolve the schema, as Delta's
     * {@code spark.databricks.delta.schema.autoMerge.enabled}. */
    public static final String AUTO_MERGE_CONF = "spark.indexeddf.schema.autoMerge.enabled";

    /**
     * Adds {@code mergeSchema=true} to a write's options when the session's
     * {@link #AUTO_MERGE_CONF} is true and the write does not set {@code mergeSchema} itself
     * (an explicit {@code false} wins, as in Delta). The Python writer, which runs where no
     * session conf is visible, sees only the option.
     */
    public static void autoMerge(org.apache.spark.sql.SparkSession session, Map<String, String> opts) {
        if (lookup(opts, "mergeSchema") == null
                && Boolean.parseBoolean(session.conf().get(AUTO_MERGE_CONF, "false").trim())) {
            opts.put("mergeSchema", "true");
        }
    }

    /** Refuses a write when the session has no Python data source to write through. */
    public static void requirePythonSource(org.apache.spark.sql.classic.SparkSession session) {
        if (!session.sessionState().dataSourceManager().dataSourceExists(TableRelation.PYTHON_NAME)) {
            throw new IndexedDFException("IndexedDFError",
                "the indexeddf connector writes through the Python data source '" + TableRelation.PYTHON_NAME
                + "', which this session does not have: call indexeddf.register(spark) once after creating it");
        }
    }

    public static Map<String, String> passThrough(scala.collection.immutable.Map<String, String> parameters) {
        return new LinkedHashMap<>(CollectionConverters.asJava(parameters));
    }

    public static String lookup(Map<String, String> opts, String name) {
        for (Map.Entry<String, String> e : opts.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                return e.getValue();
            }
        }
        return null;
    }

    /** What a write returns to Spark: the written frame's schema (Spark reads nothing from it). */
    static final class WrittenRelation extends BaseRelation {
        private final SQLContext sqlContext;
        private final StructType schema;

        WrittenRelation(SQLContext sqlContext, StructType schema) {
            this.sqlContext = sqlContext;
            this.schema = schema;
        }

        @Override
        public SQLContext sqlContext() {
            return sqlContext;
        }

        @Override
        public StructType schema() {
            return schema;
        }
    }
}