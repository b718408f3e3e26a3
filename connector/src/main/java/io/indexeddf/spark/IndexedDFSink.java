package io.indexeddf.spark;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.execution.streaming.Sink;

/**
 * {@code writeStream.format("indexeddf")}: each micro-batch is written by the Python data
 * source {@code indexeddf_python} as one batch write that commits like its stream writer
 * ({@code _streamBatchId}: one commit with {@code txn=(appId, batchId)}, an empty
 * append commits nothing, a replayed batch the table already holds is dropped), so every
 * micro-batch lands exactly once. The {@code appId} is the streaming query's id, as
 * delta-spark's {@code DeltaSink} keys its {@code SetTransaction}: Spark keeps that id in the
 * query's checkpoint, so a query restarted from it continues the same transaction; the option
 * {@code txnAppId}, when given, is the {@code appId} instead. Output mode {@code complete}
 * replaces the table's rows with each batch (Delta's overwrite of a complete-mode sink).
 */
final class IndexedDFSink implements Sink {
    private final Map<String, String> options;
    private final boolean complete;

    IndexedDFSink(Map<String, String> options, boolean complete) {
        this.options = options;
        this.complete = complete;
    }

    @Override
    public void addBatch(long batchId, Dataset<Row> data) {
        // The batch's rows through its own (incremental) execution, as a plain batch frame.
        org.apache.spark.sql.classic.SparkSession session =
            (org.apache.spark.sql.classic.SparkSession) data.sparkSession();
        PythonWriter.requirePythonSource(session);
        Dataset<Row> rows = session.internalCreateDataFrame(data.queryExecution().toRdd(), data.schema(), false);
        Map<String, String> batchOptions = new java.util.LinkedHashMap<>(options);
        if (PythonWriter.lookup(batchOptions, "txnAppId") == null) {
            batchOptions.put("txnAppId", queryId(session));
        }
        PythonWriter.autoMerge(session, batchOptions);
        rows = io.indexeddf.spark.exec.CheckConstraints.forWrite(session, batchOptions.get("path"), rows, batchOptions);
        try {
            PythonWriter.save(session, rows.write().format(IndexedDFProvider.PYTHON_NAME)
                .mode(complete ? "overwrite" : "append")
                .options(batchOptions)
                .option("_streamBatchId", Long.toString(batchId)));
        } catch (Exception e) {  // Spark's AnalysisException is a checked exception to Java
            throw PythonWriter.unwrapped(e);  // the typed error the Python writer raised
        }
    }

    /**
     * The id of the streaming query running this batch, which Spark sets as a local property
     * of the thread that runs the query's batches (the key delta-spark's {@code DeltaSink}
     * reads) and keeps across restarts from the query's checkpoint.
     */
    static String queryId(org.apache.spark.sql.classic.SparkSession session) {
        String id = session.sparkContext().getLocalProperty(
            org.apache.spark.sql.execution.streaming.runtime.StreamExecution$.MODULE$.QUERY_ID_KEY());
        if (id == null || id.isEmpty()) {
            throw IndexedDFException.option("writeStream.format('indexeddf') found no streaming query id for this "
                + "micro-batch: give option('txnAppId', '<stable id of this query>')");
        }
        return id;
    }

    @Override
    public String toString() {
        return "IndexedDFSink[" + options.get("path") + "]";
    }
}
