package io.indexeddf.spark.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableRelation;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Delta's maintenance statements on an indexeddf table, each running the Python API's
 * operation on the table ({@code IndexedTable.optimize}, {@code vacuum}, {@code restore}) in
 * the driver's Python, through the Python data source: a write with the private option
 * {@code _operation} (the operation as JSON) whose commit runs it and leaves its outcome in
 * the file {@code _commitResultFile} names ({@code indexeddf/spark/operation.py}). That commit
 * runs in a Python worker of the driver, which cannot start a Spark job; so for {@code OPTIMIZE},
 * {@code CREATE INDEX}, {@code REFRESH INDEX} and {@code CONVERT ... INDEX BY} it only plans (and
 * for an index commits the transient state), and this command runs the data work as a Spark job
 * (the Python data source's tasks), whose last commit commits. No
 * Java code changes the table. The result rows
 * have Delta's columns:
 * <ul>
 *   <li>{@code OPTIMIZE table [WHERE ...] [ZORDER BY ...]}: {@code path}, {@code metrics} (the
 *       fields of Delta's optimize metrics that apply: files added and removed with their size
 *       statistics, partitions optimized, batches, files considered and skipped, start and end
 *       time). {@code IndexedTable.optimize()} compacts each bucket's small files (mode
 *       {@code quick}); with {@code WHERE}, only the partitions the predicate selects (a
 *       predicate on partition columns only, Delta's rule; another column is
 *       {@code InvalidOptionError}). {@code ZORDER BY} is refused: the rows of an indexeddf file
 *       are clustered by the hash of the index columns, and a secondary index is what finds rows
 *       by other columns. The rewrite runs as a Spark job ({@link #optimizeOnExecutors}).</li>
 *   <li>{@code VACUUM table [RETAIN n HOURS] [DRY RUN]}: {@code path}: the table's location,
 *       or with {@code DRY RUN} one row for each file vacuum would delete. A retention below
 *       the table's {@code indexeddf.vacuum.minRetentionHours} (168 by default, Delta's 7 days)
 *       is refused unless {@value #RETENTION_CHECK_CONF} is false, Delta's conf.</li>
 *   <li>{@code RESTORE [TABLE] table [TO] VERSION AS OF n | TIMESTAMP AS OF 'ts'}:
 *       {@code table_size_after_restore}, {@code num_of_files_after_restore},
 *       {@code num_removed_files}, {@code num_restored_files}, {@code removed_files_size},
 *       {@code restored_files_size}. A timestamp is the version committed at or before it
 *       (Delta's rule, {@link DeltaLog#versionAt}).</li>
 *   <li>The index statements, in the syntax of Spark's own {@code CREATE INDEX} / {@code DROP
 *       INDEX}: {@code CREATE INDEX [IF NOT EXISTS] name ON [TABLE] table (c, ...) [OPTIONS
 *       (numBuckets = n)]} ({@code IndexedTable.create_index}), {@code DROP INDEX [IF EXISTS]
 *       name ON [TABLE] table} ({@code drop_index}), and {@code REFRESH INDEX name ON [TABLE] table
 *       [INCREMENTAL | FULL | QUICK]} ({@code refresh}). No result rows. {@code CREATE INDEX} and
 *       {@code REFRESH INDEX} run two writes: the first one's commit begins the operation (its
 *       transient state) and returns the build's plan; the second write's tasks, one a core, read
 *       the data files, hash, sort and write the index files, and its commit commits them
 *       ({@link #buildIndex}).</li>
 *   <li>{@code ALTER TABLE table RENAME COLUMN a TO b} and {@code DROP COLUMN[S] [IF EXISTS] (c, ...)}
 *       ({@code IndexedTable.rename_column} / {@code drop_columns}; {@link ColumnChanges}). No result
 *       rows.</li>
 *   <li>{@code CONVERT TO DELTA parquet.`/path` [NO STATISTICS] [PARTITIONED BY (c type, ...)]
 *       [INDEX BY (c, ...) [BUCKETS n]]}: Delta's conversion of Parquet files into a Delta table in
 *       place (then indexed, with {@code INDEX BY}); no result rows.</li>
 *   <li>{@code CONVERT TO INDEXEDDF delta.`/path` INDEX BY (c, ...) [BUCKETS n]}:
 *       {@code IndexedTable.convert} of the Delta table there, its primary index built by this
 *       command's job as {@code IndexedTable.convert(spark=)} builds it ({@link #buildIndex}: the
 *       first write's commit plans, the second one's commits the conversion); no result rows, as
 *       Delta's {@code CONVERT TO DELTA}, and, as it, nothing done when the table is already
 *       indexed by those columns.</li>
 * </ul>
 */
public final class TableOperationCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** Delta's conf that lets VACUUM keep less history than the table's minimum retention. */
    public static final String RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled";

    private static final StructType FILE_SIZES = new StructType()
        .add("min", DataTypes.LongType)
        .add("max", DataTypes.LongType)
        .add("avg", DataTypes.DoubleType)
        .add("totalFiles", DataTypes.LongType)
        .add("totalSize", DataTypes.LongType);

    /** OPTIMIZE's {@code metrics} column: the fields of Delta's OptimizeMetrics that apply. */
    private static final StructType OPTIMIZE_METRICS = new StructType()
        .add("numFilesAdded", DataTypes.LongType)
        .add("numFilesRemoved", DataTypes.LongType)
        .add("filesAdded", FILE_SIZES)
        .add("filesRemoved", FILE_SIZES)
        .add("partitionsOptimized", DataTypes.LongType)
        .add("numBatches", DataTypes.LongType)
        .add("totalConsideredFiles", DataTypes.LongType)
        .add("totalFilesSkipped", DataTypes.LongType)
        .add("preserveInsertionOrder", DataTypes.BooleanType)
        .add("startTimeMs", DataTypes.LongType)
        .add("endTimeMs", DataTypes.LongType);

    static final StructType OPTIMIZE_SCHEMA = new StructType()
        .add("path", DataTypes.StringType)
        .add("metrics", OPTIMIZE_METRICS);

    static final StructType VACUUM_SCHEMA = new StructType().add("path", DataTypes.StringType);

    static final String[] RESTORE_COLUMNS = {"table_size_after_restore", "num_of_files_after_restore",
        "num_removed_files", "num_restored_files", "removed_files_size", "restored_files_size"};

    static final StructType RESTORE_SCHEMA;

    static {
        StructType s = new StructType();
        for (String c : RESTORE_COLUMNS) {
            s = s.add(c, DataTypes.LongType);
        }
        RESTORE_SCHEMA = s;
    }

    private final String operation;
    private final String path;
    private final List<String> name;
    /** The statement's parameters (what the parser read), by name. */
    private final Map<String, Object> parameters;

    /** The statement {@code operation} (optimize, vacuum, restore) on a table with its parameters. */
    public TableOperationCommand(String operation, String path, List<String> name, Map<String, Object> parameters) {
        super(DescribeHistoryCommand.attributes(schema(operation)));
        this.operation = operation;
        this.path = path;
        this.name = name;
        this.parameters = parameters;
    }

    private static StructType schema(String operation) {
        switch (operation) {
            case "optimize":
                return OPTIMIZE_SCHEMA;
            case "vacuum":
                return VACUUM_SCHEMA;
            case "restore":
                return RESTORE_SCHEMA;
            default:
                return new StructType();  // the index and column statements, as Spark's: no rows
        }
    }

    /** {@code OPTIMIZE}: {@code where} (the predicate's text) or {@code zorder} (its columns) may be null. */
    public static TableOperationCommand optimize(String path, List<String> name, String where, List<String> zorder) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("where", where);
        p.put("zorder", zorder);
        return new TableOperationCommand("optimize", path, name, p);
    }

    /** {@code VACUUM}: {@code hours} null for the table's retention. */
    public static TableOperationCommand vacuum(String path, List<String> name, Double hours, boolean dryRun) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("retentionHours", hours);
        p.put("dryRun", dryRun);
        return new TableOperationCommand("vacuum", path, name, p);
    }

    /** {@code RESTORE}: to {@code version}, or to the version current at {@code timestamp}. */
    public static TableOperationCommand restore(String path, List<String> name, Long version, String timestamp) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("version", version);
        p.put("timestamp", timestamp);
        return new TableOperationCommand("restore", path, name, p);
    }

    /**
     * {@code CREATE INDEX [IF NOT EXISTS] name ON table (columns) [OPTIONS (numBuckets = n)]}:
     * {@code IndexedTable.create_index}; {@code numBuckets} null for the table's bucket count.
     */
    public static TableOperationCommand createIndex(String path, List<String> table, String index,
                                                    List<String> columns, Integer numBuckets, boolean ifNotExists) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", index);
        p.put("columns", columns);
        p.put("numBuckets", numBuckets);
        p.put("ifNotExists", ifNotExists);
        return new TableOperationCommand("createIndex", path, table, p);
    }

    /** {@code DROP INDEX [IF EXISTS] name ON table}: {@code IndexedTable.drop_index}. */
    public static TableOperationCommand dropIndex(String path, List<String> table, String index, boolean ifExists) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", index);
        p.put("ifExists", ifExists);
        return new TableOperationCommand("dropIndex", path, table, p);
    }

    /** {@code REFRESH INDEX name ON table [INCREMENTAL | FULL | QUICK]}: {@code IndexedTable.refresh}. */
    public static TableOperationCommand refreshIndex(String path, List<String> table, String index, String mode) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", index);
        p.put("mode", mode);
        return new TableOperationCommand("refreshIndex", path, table, p);
    }

    /**
     * {@code ALTER TABLE table RENAME COLUMN column TO newName} ({@code column}: the field's path,
     * one name for a top-level column): {@code IndexedTable.rename_column} ({@link ColumnChanges}).
     */
    public static TableOperationCommand renameColumn(String path, List<String> table, List<String> column,
                                                     String newName) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("column", column);
        p.put("newName", newName);
        return new TableOperationCommand("renameColumn", path, table, p);
    }

    /**
     * {@code ALTER TABLE table DROP COLUMN[S] [IF EXISTS] (columns)} (each a field's path):
     * {@code IndexedTable.drop_columns} ({@link ColumnChanges}).
     */
    public static TableOperationCommand dropColumns(String path, List<String> table, List<List<String>> columns,
                                                    boolean ifExists) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("columns", columns);
        p.put("ifExists", ifExists);
        return new TableOperationCommand("dropColumns", path, table, p);
    }

    /**
     * {@code CONVERT TO INDEXEDDF table INDEX BY (columns) [BUCKETS n]}: {@code IndexedTable.convert}
     * of the Delta table at the path (the data untouched); {@code numBuckets} null for 16.
     */
    public static TableOperationCommand convert(String path, List<String> table, List<String> columns,
                                                Integer numBuckets) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("columns", columns);
        p.put("numBuckets", numBuckets);
        return new TableOperationCommand("convert", path, table, p);
    }

    /**
     * {@code CONVERT TO DELTA parquet.`/path` [NO STATISTICS] [PARTITIONED BY (c type, ...)] [INDEX BY
     * (columns) [BUCKETS n]]}: the Parquet files there become a Delta table (version 0, operation
     * {@code CONVERT}); with {@code columns}, indexed as {@link #convert} indexes one.
     */
    public static TableOperationCommand convertParquet(String path, List<String> table, List<List<String>> partitions,
                                                       boolean collectStats, List<String> columns, Integer numBuckets) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("partitions", partitions);
        p.put("collectStats", collectStats);
        p.put("columns", columns);
        p.put("numBuckets", numBuckets);
        return new TableOperationCommand("convertParquet", path, table, p);
    }

    /** {@code TRUNCATE TABLE}: one commit removing every file, recorded as Delta's {@code TRUNCATE}. */
    public static TableOperationCommand truncate(String path, List<String> table) {
        return new TableOperationCommand("truncate", path, table, new LinkedHashMap<>());
    }

    private String statement() {
        switch (operation) {
            case "renameColumn":
                return "ALTER TABLE ... RENAME COLUMN";
            case "dropColumns":
                return "ALTER TABLE ... DROP COLUMNS";
            case "truncate":
                return "TRUNCATE TABLE";
            case "convert":
                return "CONVERT TO INDEXEDDF";
            case "convertParquet":
                return "CONVERT TO DELTA";
            case "createIndex":
                return "CREATE INDEX";
            case "dropIndex":
                return "DROP INDEX";
            case "refreshIndex":
                return "REFRESH INDEX";
            default:
                return operation.toUpperCase(java.util.Locale.ROOT);
        }
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        if ("dropColumns".equals(operation) && ((List<?>) parameters.get("columns")).isEmpty()
                && Boolean.TRUE.equals(parameters.get("ifExists"))) {
            // DROP COLUMNS IF EXISTS of columns Spark found none of: nothing to drop, no commit.
            return CollectionConverters.asScala(List.<Row>of()).toList();
        }
        SqlTable table = operation.startsWith("convert") ? SqlTable.resolve(session, convertedPath(), null, statement())
            : SqlTable.resolve(session, path, name, statement());
        Map<String, Object> op = new LinkedHashMap<>(parameters);
        op.put("operation", operation);
        if ("optimize".equals(operation)) {
            refuseOptimizeClauses();
            op.put("onExecutors", true);
        } else if ("vacuum".equals(operation)) {
            op.put("enforceRetention",
                Boolean.parseBoolean(session.conf().get(RETENTION_CHECK_CONF, "true").trim()));
        } else if ("restore".equals(operation) && op.get("timestamp") != null) {
            op.put("version", table.log(session).versionAt((String) op.get("timestamp")));
        } else if ("createIndex".equals(operation) || "refreshIndex".equals(operation)
                || operation.startsWith("convert")) {
            op.put("onExecutors", true);  // the index is built by this command's job (buildIndex)
            op.put("cores", Math.max(1, session.sparkContext().defaultParallelism()));  // a build task each
        }
        JsonNode result = runInPython(session, table, op, 1);
        if (result.has("plan")) {
            result = "optimize".equals(operation) ? optimizeOnExecutors(session, table, result.get("plan"))
                : buildIndex(session, table, result.get("plan"));
        }
        table.invalidate(session);
        List<Row> rows = new ArrayList<>();
        if ("optimize".equals(operation)) {
            JsonNode m = result.path("metrics");
            rows.add(RowFactory.create(location(session, table, null), RowFactory.create(
                m.path("numFilesAdded").asLong(), m.path("numFilesRemoved").asLong(),
                sizes(m.path("filesAdded")), sizes(m.path("filesRemoved")),
                m.path("partitionsOptimized").asLong(), m.path("numBatches").asLong(),
                m.path("totalConsideredFiles").asLong(), m.path("totalFilesSkipped").asLong(),
                m.path("preserveInsertionOrder").asBoolean(), m.path("startTimeMs").asLong(),
                m.path("endTimeMs").asLong())));
        } else if ("vacuum".equals(operation)) {
            if (Boolean.TRUE.equals(parameters.get("dryRun"))) {
                for (JsonNode f : result.path("files")) {
                    rows.add(RowFactory.create(location(session, table, f.asText())));
                }
            } else {
                rows.add(RowFactory.create(location(session, table, null)));
            }
        } else if ("restore".equals(operation)) {
            Object[] values = new Object[RESTORE_COLUMNS.length];
            for (int i = 0; i < values.length; i++) {
                values[i] = result.path(RESTORE_COLUMNS[i]).asLong();
            }
            rows.add(RowFactory.create(values));
        }
        return CollectionConverters.asScala(rows).toList();
    }

    /** The path {@code CONVERT TO INDEXEDDF} names: {@code '/path'}, {@code delta.`/path`} or {@code indexeddf.`/path`}. */
    private String convertedPath() {
        if (path != null) {
            return path;
        }
        String format = "convertParquet".equals(operation) ? "parquet" : "delta";
        if (name.size() == 2 && (name.get(0).equalsIgnoreCase(format)
                || name.get(0).equalsIgnoreCase(TableRelation.NAME))) {
            return name.get(1);
        }
        throw IndexedDFException.option(statement() + " " + String.join(".", name) + ": name the table by its path, "
            + format + ".`/path` (a catalog entry is not converted)");
    }

    private void refuseOptimizeClauses() {
        if (parameters.get("zorder") != null) {
            throw IndexedDFException.option("OPTIMIZE ... ZORDER BY " + parameters.get("zorder") + ": indexeddf "
                + "does not z-order; each file's rows are clustered by the hash of the table's index columns, and "
                + "lookups by other columns go through a secondary index: create one with "
                + "IndexedTable.create_index(name, columns), then run OPTIMIZE without ZORDER BY");
        }
    }

    private static Row sizes(JsonNode s) {
        if (s == null || !s.isObject()) {
            return null;
        }
        return RowFactory.create(s.path("min").asLong(), s.path("max").asLong(), s.path("avg").asDouble(),
            s.path("totalFiles").asLong(), s.path("totalSize").asLong());
    }

    /** The table's location (or a file in it) as Delta shows one: a fully qualified URI. */
    private static String location(SparkSession session, SqlTable table, String relative) {
        Path root = TableRelation.tableRoot(table.path, session.sessionState().newHadoopConf());
        return relative == null ? root.toString() : new Path(root, relative).toString();
    }

    /**
     * The build of {@code CREATE INDEX}, {@code REFRESH INDEX} and {@code CONVERT TO INDEXEDDF} as
     * {@code create_index(spark=)} runs it: the first write's commit planned it (for an index
     * statement, it committed the index's transient state) and split the data files into groups,
     * one a core; here a write of one row a group (its number), a task each, whose Python tasks read
     * their files through the project's reader, hash, sort and write the index files, and whose
     * commit commits them ({@code indexeddf/spark/index_statements.py}). No entry crosses into the
     * JVM. A failed job aborts the write, which cancels the operation.
     */
    private JsonNode buildIndex(SparkSession session, SqlTable table, JsonNode plan) {
        Map<String, Object> build = new LinkedHashMap<>();
        build.put("operation", "indexBuild");
        build.put("plan", plan);
        return runInPython(session, table, build, Math.max(1, plan.path("groups").size()));
    }

    /**
     * {@code OPTIMIZE}'s rewrite as the job of {@code optimize(spark=)}: the first write's commit
     * planned it (the version it read); here the Python data source's reader rewrites the groups of
     * files in its partitions, a task a group of groups, writes the index files of the rows it
     * wrote and yields a row per new data or index file (no index entry crosses into the JVM);
     * Spark shuffles these few rows by (index, index bucket) and sorts them; the write's tasks
     * leave one index file per index bucket and its commit commits the optimize once
     * ({@code indexeddf/spark/optimize_statement.py}).
     */
    private JsonNode optimizeOnExecutors(SparkSession session, SqlTable table, JsonNode plan) {
        int cores = Math.max(1, session.sparkContext().defaultParallelism());
        com.fasterxml.jackson.databind.node.ObjectNode withCores =
            ((com.fasterxml.jackson.databind.node.ObjectNode) plan).deepCopy().put("cores", cores);
        String text;
        try {
            text = DeltaLog.JSON.writeValueAsString(withCores);
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot write the plan of OPTIMIZE: " + e, e);
        }
        org.apache.spark.sql.DataFrameReader reader = session.read().format(TableRelation.PYTHON_NAME)
            .option("path", table.path).option("_optimizeRewrite", text);
        if (table.storageOptions != null) {
            reader = reader.option("storageOptions", table.storageOptions);
        }
        // Two merge tasks a core, no more than there are index buckets (each task's keys arrive sorted).
        int parts = Math.max(1, Math.min(plan.path("pairs").asInt(), 2 * cores));
        org.apache.spark.sql.Dataset<Row> entries = reader.load()
            .repartition(parts, org.apache.spark.sql.functions.col("key")).sortWithinPartitions("key");
        Map<String, Object> merge = new LinkedHashMap<>();
        merge.put("operation", "optimizeMerge");
        merge.put("plan", withCores);
        return runInPython(session, table, merge, entries);
    }

    /**
     * Runs the operation through the Python data source, a write of {@code rows} rows in as many
     * tasks (the row ids, 0 to rows - 1); returns the outcome its commit wrote.
     */
    private JsonNode runInPython(SparkSession session, SqlTable table, Map<String, Object> op, int rows) {
        // One row a task: a statement's write carries nothing but that row's id.
        return runInPython(session, table, op, session.range(0, rows, 1, rows).toDF());
    }

    /** Runs the operation through the Python data source, a write of {@code data}; returns the outcome its commit wrote. */
    private JsonNode runInPython(SparkSession session, SqlTable table, Map<String, Object> op,
                                 org.apache.spark.sql.Dataset<Row> data) {
        File result;
        try {
            result = File.createTempFile("indexeddf-operation-", ".json");
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot create a temporary file for the result of "
                + statement() + ": " + e, e);
        }
        try {
            Map<String, String> options = new LinkedHashMap<>();
            options.put("path", table.path);
            if (table.storageOptions != null) {
                options.put("storageOptions", table.storageOptions);
            }
            options.put("_operation", DeltaLog.JSON.writeValueAsString(op));
            options.put("_commitResultFile", result.getAbsolutePath());
            scala.collection.immutable.Map<String, String> params =
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
            PythonWriter.save(session.sqlContext(), SaveMode.Append, params, data);
            byte[] body = Files.readAllBytes(result.toPath());
            if (body.length == 0) {
                throw new IndexedDFException("IndexedDFError", statement() + " left no result in " + result);
            }
            return DeltaLog.JSON.readTree(body);
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot read the result of " + statement() + ": " + e, e);
        } finally {
            result.delete();
        }
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {operation, path, name, parameters};
    }
}
