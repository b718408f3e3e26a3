package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.execution.datasources.CreateTable;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code CREATE TABLE name (columns) USING indexeddf OPTIONS (indexColumns '...', numBuckets
 * n)}: an empty table with those columns, created by the writer as a
 * {@code CREATE TABLE ... AS SELECT} of no rows would. Without this, Spark asks the
 * connector to read the table it is about to create (a managed table has no location yet),
 * which fails.
 *
 * <p>A created table's partition columns ({@code PARTITIONED BY (...)},
 * {@code df.write.partitionBy(...).saveAsTable(name)}) reach the writer as the option
 * {@code partitionBy} gives a path write ({@code __partition_columns}): Spark hands a
 * {@code CreatableRelationProvider} the entry's options but not its partition columns. The
 * entry itself then names none: the table's log decides its partitioning and schema, and a
 * partitioned entry would make Spark move those columns to the end of its schema.
 *
 * <p>Spark's bucketing clause ({@code CLUSTERED BY (c) INTO n BUCKETS}, {@code bucketBy(n, "c")}) is the
 * table's index columns and bucket count ({@link #bucketsAsOptions}).
 *
 * <p>The {@code CREATE TABLE} that {@code writeStream.toTable(name)} runs for a new name (no options,
 * no bucketing: Spark passes the stream's options to the query only) registers the entry
 * alone ({@link StreamTableEntry}); the provider's sink, given the stream's options, creates it.
 *
 * <p>{@code TBLPROPERTIES (...)} go to the table's log too, never to the entry
 * ({@link #propertiesToLog}): into the create commit's {@code metaData.configuration} when the
 * statement creates the table, and refused unless they are the table's when it registers an
 * existing one ({@code LOCATION} alone).
 */
public final class CreateEmptyTable extends Rule<LogicalPlan> {
    /** Spark's option for {@code partitionBy(...)} of a path write: a JSON list of the columns. */
    public static final String PARTITION_COLUMNS = "__partition_columns";

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!(plan instanceof CreateTable)) {
            return plan;
        }
        CreateTable given = (CreateTable) plan;
        if (!TableRelation.isProvider(given.tableDesc().provider())) {
            return plan;
        }
        CreateTable ct = given;
        if (ct.query().isEmpty() && !ct.tableDesc().schema().isEmpty() && ct.tableDesc().bucketSpec().isEmpty()
                && ct.tableDesc().storage().properties().isEmpty() && StreamTableEntry.fromStreamToTable()) {
            // writeStream.toTable(name) of a new name: the stream's sink creates the table, with its options.
            return new StreamTableEntry(withoutSchema(ct.tableDesc()), ct.tableDesc().schema());
        }
        if (ct.tableDesc().bucketSpec().isDefined()) {
            if (ct.query().isEmpty() && ct.tableDesc().schema().isEmpty()) {
                throw IndexedDFException.option("CREATE TABLE " + ct.tableDesc().identifier().unquotedString()
                    + " USING indexeddf LOCATION ... CLUSTERED BY registers an existing table, whose index columns "
                    + "and bucket count are its log's: drop CLUSTERED BY");
            }
            ct = new CreateTable(bucketsAsOptions(ct.tableDesc()), ct.mode(), ct.query());
        }
        if (!ct.tableDesc().properties().isEmpty()) {
            ct = new CreateTable(propertiesToLog(ct.tableDesc(), ct.query().isDefined()
                || !ct.tableDesc().schema().isEmpty()), ct.mode(), ct.query());
        }
        CreateTable out = ct;
        if (ct.query().isEmpty() && !ct.tableDesc().schema().isEmpty()) {
            java.util.List<Attribute> columns =
                new ArrayList<>(CollectionConverters.asJava(DataTypeUtils.toAttributes(ct.tableDesc().schema())));
            LocalRelation none = new LocalRelation(CollectionConverters.asScala(columns).toList(),
                CollectionConverters.asScala(new ArrayList<InternalRow>()).toList(), false, Option.empty());
            out = new CreateTable(withoutSchema(ct.tableDesc()), ct.mode(), Option.apply(none));
        }
        if (out.query().isDefined() && !out.tableDesc().partitionColumnNames().isEmpty()) {
            out = new CreateTable(partitionsAsOption(out.tableDesc()), out.mode(), out.query());
        }
        return out == given ? plan : out;
    }

    /**
     * {@code t} without its {@code TBLPROPERTIES}, which belong to the table's log, never to the
     * entry. A statement that creates the table ({@code creates}: {@code AS SELECT}, columns,
     * {@code saveAsTable}) hands them to the writer as the option {@code tableProperties} (a JSON
     * object, merged with one the statement's {@code OPTIONS} give; the writer validates them,
     * refusing unknown {@code indexeddf.*} / {@code delta.*} names, and writes them to the create
     * commit's {@code metaData.configuration}). One that registers an existing table
     * ({@code LOCATION} and nothing else) changes nothing in its log: the properties must be the
     * table's already, as Delta requires, or the statement is refused.
     */
    private static CatalogTable propertiesToLog(CatalogTable t, boolean creates) {
        java.util.Map<String, String> given = new java.util.TreeMap<>(CollectionConverters.asJava(t.properties()));
        CatalogStorageFormat s = t.storage();
        scala.collection.immutable.Map<String, String> storage = s.properties();
        if (creates) {
            java.util.Map<String, String> merged = new java.util.LinkedHashMap<>();
            String optionKey = "tableProperties";
            for (java.util.Map.Entry<String, String> e : CollectionConverters.asJava(s.properties()).entrySet()) {
                if (e.getKey().equalsIgnoreCase(optionKey)) {
                    optionKey = e.getKey();
                    merged.putAll(jsonObject(e.getValue()));
                }
            }
            for (java.util.Map.Entry<String, String> e : given.entrySet()) {
                String before = merged.put(e.getKey(), e.getValue());
                if (before != null && !before.equals(e.getValue())) {
                    throw IndexedDFException.option("table property " + e.getKey() + " is given twice, as '" + before
                        + "' (OPTIONS tableProperties) and as '" + e.getValue() + "' (TBLPROPERTIES); give it once");
                }
            }
            try {
                storage = storage.updated(optionKey, io.indexeddf.log.DeltaLog.JSON.writeValueAsString(merged));
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        } else if (s.locationUri().isDefined()) {
            java.util.Map<String, String> table = ShowPropertiesCommand.configuration(
                org.apache.spark.sql.SparkSession.active(), CatalogTables.location(t, "CREATE TABLE"));
            java.util.List<String> differ = new java.util.ArrayList<>();
            for (java.util.Map.Entry<String, String> e : given.entrySet()) {
                if (!e.getValue().equals(table.get(e.getKey()))) {
                    differ.add(e.getKey() + "='" + e.getValue() + "' (the table: "
                        + (table.containsKey(e.getKey()) ? "'" + table.get(e.getKey()) + "'" : "not set") + ")");
                }
            }
            if (!differ.isEmpty()) {
                throw IndexedDFException.option("CREATE TABLE " + t.identifier().unquotedString() + " USING indexeddf "
                    + "LOCATION registers the existing table there, whose log keeps its properties: TBLPROPERTIES "
                    + String.join(", ", differ) + " are not the table's. Drop TBLPROPERTIES (SHOW TBLPROPERTIES lists "
                    + "the table's), and change them with ALTER TABLE ... SET TBLPROPERTIES after registering it");
            }
        }
        CatalogStorageFormat newStorage = s.copy(s.copy$default$1(), s.copy$default$2(), s.copy$default$3(),
            s.copy$default$4(), s.copy$default$5(), storage, s.copy$default$7());
        scala.collection.immutable.Map<String, String> none = scala.collection.immutable.Map$.MODULE$.empty();
        return t.copy(t.copy$default$1(), t.copy$default$2(), newStorage, t.copy$default$4(),
            t.copy$default$5(), t.copy$default$6(), t.copy$default$7(), t.copy$default$8(), t.copy$default$9(),
            t.copy$default$10(), t.copy$default$11(), none, t.copy$default$13(),
            t.copy$default$14(), t.copy$default$15(), t.copy$default$16(), t.copy$default$17(),
            t.copy$default$18(), t.copy$default$19(), t.copy$default$20(), t.copy$default$21(),
            t.copy$default$22());
    }

    private static java.util.Map<String, String> jsonObject(String json) {
        java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
        try {
            com.fasterxml.jackson.databind.JsonNode node = io.indexeddf.log.DeltaLog.JSON.readTree(json);
            if (node == null || !node.isObject()) {
                throw IndexedDFException.option("option tableProperties must be a JSON object, got " + json);
            }
            node.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        } catch (java.io.IOException e) {
            throw IndexedDFException.option("option tableProperties must be a JSON object, got " + json);
        }
        return out;
    }

    /**
     * {@code t} with Spark's bucketing clause ({@code CLUSTERED BY (c) INTO n BUCKETS},
     * {@code df.write.bucketBy(n, "c").saveAsTable(name)}) as the writer's options
     * {@code indexColumns} and {@code numBuckets}: the table's index columns and bucket count,
     * which its log keeps (the entry names no bucketing). {@code SORTED BY} may name only the
     * bucket columns (every file is sorted by them anyway); an {@code OPTIONS} value that
     * differs from the clause's is refused.
     */
    private static CatalogTable bucketsAsOptions(CatalogTable t) {
        org.apache.spark.sql.catalyst.catalog.BucketSpec spec = t.bucketSpec().get();
        java.util.List<String> columns = CollectionConverters.asJava(spec.bucketColumnNames());
        java.util.List<String> sorted = CollectionConverters.asJava(spec.sortColumnNames());
        String name = t.identifier().unquotedString();
        if (!sorted.isEmpty() && !sorted.equals(columns.subList(0, Math.min(sorted.size(), columns.size())))) {
            throw IndexedDFException.option("CREATE TABLE " + name + " USING indexeddf: SORTED BY (" + String.join(", ",
                sorted) + ") is not supported: an indexeddf table's files are sorted by its index columns (the "
                + "CLUSTERED BY columns); drop SORTED BY");
        }
        java.util.Map<String, String> wanted = new java.util.LinkedHashMap<>();
        wanted.put("indexColumns", String.join(",", columns));
        wanted.put("numBuckets", Integer.toString(spec.numBuckets()));
        CatalogStorageFormat s = t.storage();
        scala.collection.immutable.Map<String, String> storage = s.properties();
        for (java.util.Map.Entry<String, String> e : CollectionConverters.asJava(s.properties()).entrySet()) {
            String want = null;
            for (java.util.Map.Entry<String, String> w : wanted.entrySet()) {
                if (w.getKey().equalsIgnoreCase(e.getKey())) {
                    want = w.getValue();
                }
            }
            if (want != null && !want.equals(e.getValue().replace(" ", ""))) {
                throw IndexedDFException.option("CREATE TABLE " + name + " USING indexeddf: OPTIONS " + e.getKey()
                    + " '" + e.getValue() + "' is not what CLUSTERED BY / bucketBy says ('" + want + "'); give it once");
            }
            if (want != null) {
                storage = storage.removed(e.getKey());
            }
        }
        for (java.util.Map.Entry<String, String> w : wanted.entrySet()) {
            storage = storage.updated(w.getKey(), w.getValue());
        }
        CatalogStorageFormat newStorage = s.copy(s.copy$default$1(), s.copy$default$2(), s.copy$default$3(),
            s.copy$default$4(), s.copy$default$5(), storage, s.copy$default$7());
        return t.copy(t.copy$default$1(), t.copy$default$2(), newStorage, t.copy$default$4(),
            t.copy$default$5(), t.copy$default$6(), Option.empty(), t.copy$default$8(), t.copy$default$9(),
            t.copy$default$10(), t.copy$default$11(), t.copy$default$12(), t.copy$default$13(),
            t.copy$default$14(), t.copy$default$15(), t.copy$default$16(), t.copy$default$17(),
            t.copy$default$18(), t.copy$default$19(), t.copy$default$20(), t.copy$default$21(),
            t.copy$default$22());
    }

    /** {@code t} with its partition columns moved into its options ({@link #PARTITION_COLUMNS}). */
    private static CatalogTable partitionsAsOption(CatalogTable t) {
        String json;
        try {
            json = io.indexeddf.log.DeltaLog.JSON.writeValueAsString(
                CollectionConverters.asJava(t.partitionColumnNames()));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
        CatalogStorageFormat s = t.storage();
        CatalogStorageFormat storage = s.copy(s.copy$default$1(), s.copy$default$2(), s.copy$default$3(),
            s.copy$default$4(), s.copy$default$5(), s.properties().updated(PARTITION_COLUMNS, json), s.copy$default$7());
        scala.collection.immutable.Seq<String> none = CollectionConverters.asScala(new ArrayList<String>()).toList();
        return t.copy(t.copy$default$1(), t.copy$default$2(), storage, t.copy$default$4(),
            t.copy$default$5(), none, t.copy$default$7(), t.copy$default$8(), t.copy$default$9(),
            t.copy$default$10(), t.copy$default$11(), t.copy$default$12(), t.copy$default$13(),
            t.copy$default$14(), t.copy$default$15(), t.copy$default$16(), t.copy$default$17(),
            t.copy$default$18(), t.copy$default$19(), t.copy$default$20(), t.copy$default$21(),
            t.copy$default$22());
    }

    /** {@code t} with no schema (a CREATE TABLE ... AS SELECT takes the query's), all else kept. */
    private static CatalogTable withoutSchema(CatalogTable t) {
        return t.copy(t.copy$default$1(), t.copy$default$2(), t.copy$default$3(), new StructType(),
            t.copy$default$5(), t.copy$default$6(), t.copy$default$7(), t.copy$default$8(), t.copy$default$9(),
            t.copy$default$10(), t.copy$default$11(), t.copy$default$12(), t.copy$default$13(),
            t.copy$default$14(), t.copy$default$15(), t.copy$default$16(), t.copy$default$17(),
            t.copy$default$18(), t.copy$default$19(), t.copy$default$20(), t.copy$default$21(),
            t.copy$default$22());
    }
}
