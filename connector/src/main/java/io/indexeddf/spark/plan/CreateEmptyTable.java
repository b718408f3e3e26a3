package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;

import org.apache.spark.sql.catalyst.InternalRow;
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
 */
public final class CreateEmptyTable extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!(plan instanceof CreateTable)) {
            return plan;
        }
        CreateTable ct = (CreateTable) plan;
        if (!TableRelation.isProvider(ct.tableDesc().provider()) || ct.query().isDefined()
                || ct.tableDesc().schema().isEmpty()) {
            return plan;
        }
        java.util.List<Attribute> columns =
            new ArrayList<>(CollectionConverters.asJava(DataTypeUtils.toAttributes(ct.tableDesc().schema())));
        LocalRelation none = new LocalRelation(CollectionConverters.asScala(columns).toList(),
            CollectionConverters.asScala(new ArrayList<InternalRow>()).toList(), false, Option.empty());
        return new CreateTable(withoutSchema(ct.tableDesc()), ct.mode(), Option.apply(none));
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
