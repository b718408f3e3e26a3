package io.indexeddf.spark.plan;

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
 */
public final class CreateEmptyTable extends Rule<LogicalPlan> {
    /** Spark's option for {@code partitionBy(...)} of a path write: a JSON list of the columns. */
    public static final String PARTITION_COLUMNS = "__partition_columns";

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!(plan instanceof CreateTable)) {
            return plan;
        }
        CreateTable ct = (CreateTable) plan;
        if (!TableRelation.isProvider(ct.tableDesc().provider())) {
            return plan;
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
        return out == ct ? plan : out;
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
