package io.indexeddf.spark;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableRelation;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.RelationProvider;
import org.apache.spark.sql.sources.SchemaRelationProvider;
import org.apache.spark.sql.sources.StreamSinkProvider;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;

/**
 * The Spark data source {@code indexeddf} in the JVM (registered in
 * {@code META-INF/services/org.apache.spark.sql.sources.DataSourceRegister}).
 *
 * <p>Reads ({@code spark.read.format("indexeddf").load(path)}, options {@code versionAsOf} /
 * {@code timestampAsOf}, and {@code SELECT ... FROM indexeddf.`/path`}, which
 * {@link IndexedDFExtensions} resolves) are {@link TableRelation}s: Spark's own Parquet scan of
 * exactly the version's live files, bucketed when the files allow it.
 *
 * <p>Streaming reads ({@code spark.readStream.format("indexeddf").load(path)}, and
 * {@code readStream.table(name)} of a catalog entry, which Spark turns into this provider) are
 * an {@link IndexedDFSource}, Delta's streaming source.
 *
 * <p>Writes and streaming writes are done by the Python data source registered as
 * {@code indexeddf_python} ({@code indexeddf.register(spark)}), through {@link PythonWriter},
 * which handles Spark's save modes first (Spark refuses errorifexists / ignore for Python
 * sources). It is a {@link ParquetFileFormat} so that Spark accepts {@code indexeddf.`/path`}
 * as SQL on files; the session extensions resolve such names before Spark's rule would.
 */
public final class IndexedDFProvider extends ParquetFileFormat implements DataSourceRegister, RelationProvider,
        SchemaRelationProvider, CreatableRelationProvider, StreamSinkProvider, StreamSourceProvider {
    /** The format name. */
    public static final String NAME = TableRelation.NAME;
    /** The name the Python data source is registered under next to this provider. */
    public static final String PYTHON_NAME = TableRelation.PYTHON_NAME;

    static final List<String> STREAM_OPTIONS = Arrays.asList("path", "storageOptions", "indexColumns", "numBuckets",
        "name", "description", "tableProperties", "mergeSchema", "txnAppId", "checkpointLocation");

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public String toString() {
        return "IndexedDF";
    }

    // -- reads ------------------------------------------------------------------------------
    @Override
    public BaseRelation createRelation(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters) {
        return TableRelation.read(sqlContext, parameters, null);
    }

    @Override
    public BaseRelation createRelation(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters,
                                       StructType schema) {
        return TableRelation.read(sqlContext, parameters, schema);
    }

    // -- writes -----------------------------------------------------------------------------
    @Override
    public BaseRelation createRelation(SQLContext sqlContext, SaveMode mode,
                                       scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
        return PythonWriter.saveRows(sqlContext, mode, parameters, data, true);
    }

    // -- streaming writes -------------------------------------------------------------------
    @Override
    public Sink createSink(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters,
                           Seq<String> partitionColumns, OutputMode outputMode) {
        TableRelation.canonical(parameters, STREAM_OPTIONS, "writeStream.format('indexeddf')", true);
        Map<String, String> opts = PythonWriter.passThrough(parameters);
        if (opts.get("path") == null) {
            throw IndexedDFException.option(
                "indexeddf needs the table location: .load(path), .save(path) or .start(path)");
        }
        String app = PythonWriter.lookup(opts, "txnAppId");
        if (app != null && app.trim().isEmpty()) {
            throw IndexedDFException.option("writeStream.format('indexeddf') got an empty txnAppId: give a stable id "
                + "of this query, or leave the option out (the streaming query's id is used, as Delta's sink does)");
        }
        if (!partitionColumns.isEmpty()) {
            throw IndexedDFException.option("writeStream.partitionBy(...) is not supported: a stream writes each "
                + "row into the table's own partitions (if it has any) anyway; drop partitionBy(...)");
        }
        if (outputMode == OutputMode.Update()) {
            throw IndexedDFException.option("writeStream.format('indexeddf') supports outputMode append and "
                + "complete, not update");
        }
        PythonWriter.requirePythonSource(TableRelation.classic(sqlContext));
        createPending(TableRelation.classic(sqlContext), opts);
        return new IndexedDFSink(opts, outputMode == OutputMode.Complete());
    }

    /** The options of a write that creates a table, as the stream's options give them. */
    private static final List<String> CREATE_OPTIONS = Arrays.asList("path", "storageOptions", "indexColumns",
        "numBuckets", "name", "description", "tableProperties");

    /**
     * The table of an entry {@code writeStream.toTable(name)} registered for a new name
     * ({@link io.indexeddf.spark.plan.StreamTableEntry}), created now, before the query runs:
     * empty, with the stream's schema and the stream's options ({@code indexColumns} and
     * {@code numBuckets}, ...), as Delta's {@code toTable} commits version 0. A stream without
     * {@code indexColumns} fails here, and the entry stays pending for a retry with them.
     */
    private static void createPending(org.apache.spark.sql.classic.SparkSession session, Map<String, String> opts) {
        String path = opts.get("path");
        StructType schema = io.indexeddf.spark.plan.StreamTableEntry.takePending(path);
        if (schema == null) {
            return;
        }
        Map<String, String> create = new java.util.LinkedHashMap<>();
        for (Map.Entry<String, String> e : opts.entrySet()) {
            for (String name : CREATE_OPTIONS) {
                if (name.equalsIgnoreCase(e.getKey())) {
                    create.put(name, e.getValue());
                }
            }
        }
        try {
            session.createDataFrame(java.util.List.<Row>of(), schema).write().format(PYTHON_NAME).mode("append")
                .options(create).save();
        } catch (Exception e) {  // Spark's AnalysisException is a checked exception to Java
            io.indexeddf.spark.plan.StreamTableEntry.putBack(path, schema);
            throw PythonWriter.unwrapped(e);
        }
    }

    // -- streaming reads ----------------------------------------------------------------------
    // Without these, Spark would treat the provider (a ParquetFileFormat, for SQL on paths) as
    // a file stream source and read every Parquet file under the folder, of every version.
    @Override
    public Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, Option<StructType> schema,
                                                   String providerName,
                                                   scala.collection.immutable.Map<String, String> parameters) {
        Map<String, String> opts = TableRelation.canonical(parameters, IndexedDFSource.OPTIONS,
            "readStream.format('indexeddf')", false);
        IndexedDFSource.Options checked = new IndexedDFSource.Options(opts);
        Configuration conf = TableRelation.classic(sqlContext).sessionState().newHadoopConf();
        Path root = TableRelation.tableRoot(TableRelation.requirePath(opts), conf);
        // The log decides the schema, as for batch reads; a catalog entry hands its copy here.
        StructType table = IndexedDFSource.schemaOf(root, conf, checked.changeFeed);
        return new Tuple2<>(NAME, table);
    }

    @Override
    public Source createSource(SQLContext sqlContext, String metadataPath, Option<StructType> schema,
                               String providerName, scala.collection.immutable.Map<String, String> parameters) {
        Map<String, String> opts = TableRelation.canonical(parameters, IndexedDFSource.OPTIONS,
            "readStream.format('indexeddf')", false);
        org.apache.spark.sql.classic.SparkSession session = TableRelation.classic(sqlContext);
        Configuration conf = session.sessionState().newHadoopConf();
        Path root = TableRelation.tableRoot(TableRelation.requirePath(opts), conf);
        return new IndexedDFSource(session, root, conf, metadataPath, opts);
    }
}
