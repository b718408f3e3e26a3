package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.PythonWriter;

import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.InsertableRelation;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An indexeddf table as a SQL statement writes it: a relation Spark inserts into, whose
 * insert writes through the Python writer ({@link PythonWriter}) with the table's path and
 * storage options, then lets the catalog entry read the new version. {@link ResolveInsert}'s
 * inserts and {@link ResolveChanges}' changes are its two kinds.
 */
abstract class TableWriter extends BaseRelation implements InsertableRelation {
    private final SparkSession session;
    private final SQLContext sqlContext;
    private final StructType schema;
    private final scala.Option<CatalogTable> catalogTable;
    /** The write's options: the table's, and what a subclass adds. */
    final Map<String, String> options;

    TableWriter(SparkSession session, LogicalRelation lr, StructType schema) {
        this.session = session;
        this.sqlContext = session.sqlContext();
        this.schema = schema;
        this.catalogTable = lr.catalogTable();
        this.options = tableOptions(lr);
    }

    /** The options every write of a table passes to the Python writer: its path and storage options. */
    static Map<String, String> tableOptions(LogicalRelation lr) {
        Map<String, String> options = new LinkedHashMap<>();
        java.net.URI uri = DriverLookup.snapshotOf(lr).root.toUri();
        // The Python writer takes local tables as plain paths, others as URLs.
        options.put("path", "file".equals(uri.getScheme()) ? uri.getPath() : uri.toString());
        if (lr.catalogTable().isDefined()) {  // CREATE TABLE ... OPTIONS (storageOptions ...)
            for (Map.Entry<String, String> e
                    : CollectionConverters.asJava(lr.catalogTable().get().storage().properties()).entrySet()) {
                if (e.getKey().equalsIgnoreCase("storageOptions")) {
                    options.put("storageOptions", e.getValue());
                }
            }
        }
        return options;
    }

    @Override
    public SQLContext sqlContext() {
        return sqlContext;
    }

    @Override
    public StructType schema() {
        return schema;
    }

    SparkSession session() {
        return session;
    }

    /**
     * Writes {@code rows} in {@code mode} through the Python writer; {@code tableRows}: they are
     * rows of the table (an insert), checked against its CHECK constraints in the plan.
     */
    void save(Dataset<Row> rows, SaveMode mode, boolean tableRows) {
        scala.collection.immutable.Map<String, String> params =
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
        if (tableRows) {
            PythonWriter.saveRows(sqlContext, mode, params, rows, false);
        } else {
            PythonWriter.save(sqlContext, mode, params, rows);
        }
        if (catalogTable.isDefined()) {  // the next query of the table reads the new version
            session.sessionState().catalog().invalidateCachedTable(catalogTable.get().identifier());
        }
    }
}
