package io.indexeddf.spark.plan;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import scala.runtime.AbstractPartialFunction;

/**
 * An indexeddf table the catalog loaded ({@link IndexedDFTable}) is read through the
 * connector's V1 relation, as delta-spark reads a {@code DeltaTableV2}: this analyzer rule
 * replaces each {@code DataSourceV2Relation} over one, in a query, as the target of an
 * {@code INSERT} and as the target of a {@code DELETE} / {@code UPDATE} / {@code MERGE}, with
 * the {@code LogicalRelation} at the version the table was loaded at
 * ({@link IndexedDFTable#relation}), keeping its attributes. Every read optimisation (driver
 * lookups, indexed joins, bucketed scans, deletion vectors) and every change path
 * ({@link ResolveInsert}, {@link ResolveChanges}) then applies as it does to a path. Why not a
 * V2 scan: docs/spark-tables.md.
 *
 * <p>The session extensions inject it before {@link ResolveInsert} and {@link ResolveChanges},
 * which take the relation it makes. Spark's own {@code ResolveInsertInto}, which would turn an
 * insert into a V2 table into {@code AppendData}, runs before {@code ResolveRelations} in the
 * next pass of the analyzer's batch, by when the insert's target is the V1 relation.
 */
public final class V1Fallback extends Rule<LogicalPlan> {
    private final SparkSession session;

    public V1Fallback(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        return plan.resolveOperatorsUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return tableOf(p) != null
                    || p instanceof InsertIntoStatement && tableOf(((InsertIntoStatement) p).table()) != null;
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                if (p instanceof InsertIntoStatement) {
                    InsertIntoStatement i = (InsertIntoStatement) p;
                    // The target is not a child of the insert: the transform does not reach it.
                    return i.copy(relation((DataSourceV2Relation) i.table()), i.partitionSpec(), i.copy$default$3(),
                        i.query(), i.overwrite(), i.copy$default$6(), i.copy$default$7(), i.copy$default$8(),
                        i.copy$default$9());
                }
                return relation((DataSourceV2Relation) p);
            }
        });
    }

    /** The indexeddf table under a V2 relation, or null. */
    static IndexedDFTable tableOf(LogicalPlan p) {
        return p instanceof DataSourceV2Relation && ((DataSourceV2Relation) p).table() instanceof IndexedDFTable
            ? (IndexedDFTable) ((DataSourceV2Relation) p).table() : null;
    }

    private LogicalRelation relation(DataSourceV2Relation r) {
        return ((IndexedDFTable) r.table()).relation(session, r.output(), r.options().asCaseSensitiveMap());
    }
}
