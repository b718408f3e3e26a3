package io.indexeddf.spark.plan;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.indexeddf.log.AddFile;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import io.indexeddf.spark.exec.TableRelation;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Murmur3Hash;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Pmod;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.types.DataTypes;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The index entries of an SQL index build ({@code CREATE INDEX}, {@code REFRESH INDEX},
 * {@code CONVERT TO INDEXEDDF}): one row per live row of the data files the plan names, with
 * the columns {@code bucket int, hash long, file_id long, row int} of
 * {@code indexeddf.spark.index_tasks.ENTRY_SCHEMA}, bit for bit those of the single-process build
 * ({@code indexeddf/spark/index_statements.py} writes the plan):
 * <ul>
 *   <li>the plan's {@code native} files (those Spark's Parquet reader reads as the project's
 *       reader does: the rule of {@code index_tasks.split_reads}, applied in Python, so it has
 *       no copy here) through Spark's own scan of the index columns ({@link TableRelation#files}:
 *       the table's schema, each file's id as the constant {@code _metadata.indexeddf_file_id},
 *       no join on a file name), each row's ordinal {@code _metadata.row_index}, the bucket
 *       {@code pmod(Murmur3Hash(keys, bucketSeed), numBuckets)} and the key hash
 *       {@code pmod(Murmur3Hash(keys, keyHashSeed), 2^32)} (the seeds of {@code spec.json},
 *       {@link Spec}): bit for bit the single-process build's;</li>
 *   <li>the plan's {@code python} files (deletion vectors, column mapping, an index on a
 *       partition column, storage that is not local, ...) through a read of the Python data
 *       source with the option {@value #ENTRIES_OPTION}, a task a group of files.</li>
 * </ul>
 */
public final class IndexEntries {
    /** Private read option of the Python data source: the plan whose {@code python} files it reads. */
    static final String ENTRIES_OPTION = "_indexEntries";

    private IndexEntries() {
    }

    /** The entries of every file the plan names ({@code cores}: the session's, for the Python read's tasks). */
    static Dataset<Row> of(SparkSession session, SqlTable table, JsonNode plan, int cores) {
        Dataset<Row> entries = null;
        if (plan.path("native").size() > 0) {
            entries = nativeEntries(session, table, plan);
        }
        if (plan.path("python").size() > 0) {
            Dataset<Row> python = pythonEntries(session, table, plan, cores);
            entries = entries == null ? python : entries.union(python);
        }
        if (entries == null) {
            throw new IndexedDFException("IndexedDFError", "the plan of an index build names no data file");
        }
        return entries;
    }

    /** The entries of the {@code native} files by Spark's scan and hash. */
    private static Dataset<Row> nativeEntries(SparkSession session, SqlTable table, JsonNode plan) {
        DeltaLog log = table.log(session);
        long version = plan.path("version").asLong();
        // A conversion reads a Delta table that is not indexed yet (replayed now, not from the cache).
        Snapshot snapshot = plan.path("unindexed").asBoolean() ? log.unindexedSnapshot(version) : log.snapshot(version);
        Set<Long> ids = new HashSet<>();
        for (JsonNode id : plan.path("native")) {
            ids.add(id.asLong());
        }
        List<AddFile> files = new ArrayList<>();
        for (AddFile a : snapshot.files) {
            if (ids.contains(a.fileId)) {
                files.add(a);
            }
        }
        if (files.size() != ids.size()) {
            throw new IndexedDFException("IndexedDFError", "version " + snapshot.version + " of " + table.path
                + " lacks data files the index build planned; run the statement again");
        }
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        HadoopFsRelation relation = TableRelation.files(classic, snapshot, files);
        LogicalRelation scan = LogicalRelation$.MODULE$.apply(relation, false).withMetadataColumns();
        List<Expression> keys = new ArrayList<>();
        for (JsonNode c : plan.path("columns")) {
            keys.add(column(scan, c.asText()));
        }
        List<Alias> rowId = SparkChange.rowId(scan);  // the file's id and the row's ordinal
        scala.collection.immutable.Seq<Expression> k = CollectionConverters.asScala(keys).toList();
        Expression bucket = new Pmod(new Murmur3Hash(k, Spec.BUCKET_SEED),
            Literal.create(plan.path("numBuckets").asInt(), DataTypes.IntegerType));
        Expression hash = new Pmod(new Cast(new Murmur3Hash(k, Spec.KEY_HASH_SEED), DataTypes.LongType, Option.empty()),
            Literal.create(1L << 32, DataTypes.LongType));
        List<NamedExpression> out = List.of(SparkChange.alias(bucket, "bucket"), SparkChange.alias(hash, "hash"),
            SparkChange.alias(rowId.get(0).child(), "file_id"),
            SparkChange.alias(new Cast(rowId.get(1).child(), DataTypes.IntegerType, Option.empty()), "row"));
        return org.apache.spark.sql.classic.Dataset.ofRows(classic,
            new Project(CollectionConverters.asScala(out).toList(), scan));
    }

    private static Attribute column(LogicalRelation scan, String name) {
        for (Attribute a : CollectionConverters.asJava(scan.output())) {
            if (a.name().equals(name)) {
                return a;
            }
        }
        throw new IndexedDFException("IndexedDFError", "the table has no column " + name + " to index");
    }

    /** The entries of the {@code python} files, read and hashed by the Python data source's tasks. */
    private static Dataset<Row> pythonEntries(SparkSession session, SqlTable table, JsonNode plan, int cores) {
        ObjectNode spec = DeltaLog.JSON.createObjectNode();
        spec.set("plan", plan);
        spec.put("cores", cores);
        String text;
        try {
            text = DeltaLog.JSON.writeValueAsString(spec);
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "cannot write the plan of an index build: " + e, e);
        }
        DataFrameReader reader = session.read().format(TableRelation.PYTHON_NAME)
            .option("path", table.path).option(ENTRIES_OPTION, text);
        if (table.storageOptions != null) {
            reader = reader.option("storageOptions", table.storageOptions);
        }
        return reader.load();
    }
}
