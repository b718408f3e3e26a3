package io.indexeddf.spark.plan;

import java.util.ArrayList;
import java.util.List;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Coalesce;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Murmur3Hash;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Pmod;
import org.apache.spark.sql.catalyst.plans.FullOuter$;
import org.apache.spark.sql.catalyst.plans.Inner$;
import org.apache.spark.sql.catalyst.plans.JoinType;
import org.apache.spark.sql.catalyst.plans.LeftOuter$;
import org.apache.spark.sql.catalyst.plans.RightOuter$;
import org.apache.spark.sql.catalyst.plans.logical.Assignment;
import org.apache.spark.sql.catalyst.plans.logical.DeleteAction;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.InsertAction;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeAction;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.catalyst.plans.logical.UpdateAction;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The plan of a MERGE's outcome, evaluated by Spark (docs/spark-tables.md): the target's rows
 * (with their file and ordinal) joined with the source on the ON condition (inner, or outer on
 * the side whose unmatched rows a clause acts on); each joined row takes the first clause of
 * its kind whose condition holds, as Delta and Spark apply them, and becomes one outcome row:
 * {@code delete} or {@code update} of its target row (with the new values), or an
 * {@code insert}; rows no clause acts on are dropped. Every condition and value is Catalyst's
 * expression, cast to the column's type as Spark casts a stored value. The rows are
 * repartitioned by target file (inserts by the table's bucket of their keys), so one task holds
 * all of a file's changes; the Python tasks check that no target row is changed twice (Delta's
 * error for a target row matched by several source rows).
 */
final class MergeOutcome {
    private static final String TARGET_PRESENT = "__indexeddf_target";
    private static final String SOURCE_PRESENT = "__indexeddf_source";

    private MergeOutcome() {
    }

    static LogicalPlan of(LogicalRelation target, MergeIntoTable m) {
        LogicalRelation withMeta = target.withMetadataColumns();
        List<NamedExpression> t = new ArrayList<>(CollectionConverters.asJava(target.output()));
        t.addAll(SparkChange.rowId(withMeta));
        t.add(SparkChange.alias(Literal.create(true, DataTypes.BooleanType), TARGET_PRESENT));
        Project targetRows = new Project(CollectionConverters.asScala(t).toList(), withMeta);
        List<NamedExpression> s = new ArrayList<>(CollectionConverters.asJava(m.sourceTable().output()));
        s.add(SparkChange.alias(Literal.create(true, DataTypes.BooleanType), SOURCE_PRESENT));
        Project sourceRows = new Project(CollectionConverters.asScala(s).toList(), m.sourceTable());

        List<MergeAction> matched = actions(m.matchedActions());
        List<MergeAction> notMatched = actions(m.notMatchedActions());
        List<MergeAction> bySource = actions(m.notMatchedBySourceActions());
        JoinType type = notMatched.isEmpty()
            ? (bySource.isEmpty() ? Inner$.MODULE$ : LeftOuter$.MODULE$)
            : (bySource.isEmpty() ? RightOuter$.MODULE$ : FullOuter$.MODULE$);
        Join join = new Join(targetRows, sourceRows, type, Option.apply(m.mergeCondition()), JoinHint$.MODULE$.NONE());

        List<Attribute> out = CollectionConverters.asJava(targetRows.output());
        int n = target.output().size();
        Attribute file = out.get(n);
        Attribute row = out.get(n + 1);
        Expression hasTarget = new IsNotNull(out.get(n + 2));
        Expression hasSource = new IsNotNull(sourceRows.output().last());
        List<Attribute> columns = new ArrayList<>(CollectionConverters.asJava(target.output()));

        // (when the row takes the clause, the clause) in the order Spark tries them
        List<Tuple2<Expression, MergeAction>> clauses = new ArrayList<>();
        add(clauses, new And(hasTarget, hasSource), matched);
        add(clauses, new IsNull(out.get(n + 2)), notMatched);
        add(clauses, new IsNull(sourceRows.output().last()), bySource);

        List<Tuple2<Expression, Expression>> ops = new ArrayList<>();
        for (Tuple2<Expression, MergeAction> c : clauses) {
            ops.add(new Tuple2<>(c._1(), Literal.create(op(c._2()), DataTypes.StringType)));
        }
        Expression opExpr = caseWhen(ops);
        List<NamedExpression> project = new ArrayList<>();
        project.add(SparkChange.alias(opExpr, SparkChange.OP));
        project.add(file);
        project.add(row);
        List<Expression> values = new ArrayList<>();
        for (Attribute col : columns) {
            List<Tuple2<Expression, Expression>> cases = new ArrayList<>();
            for (Tuple2<Expression, MergeAction> c : clauses) {
                if (!(c._2() instanceof DeleteAction)) {
                    cases.add(new Tuple2<>(c._1(), value(c._2(), col)));
                }
            }
            Expression v = cases.isEmpty() ? Literal.create(null, col.dataType()) : caseWhen(cases);
            values.add(v);
            project.add(SparkChange.alias(v, col.name()));
        }
        project.add(SparkChange.partColumn());
        Filter acted = new Filter(new IsNotNull(opExpr), join);
        Project changes = new Project(CollectionConverters.asScala(project).toList(), acted);
        // One more row: the source's row count (Delta's numSourceRows), as op "count".
        org.apache.spark.sql.catalyst.expressions.Alias sourceRowCount = SparkChange.alias(
            new org.apache.spark.sql.catalyst.expressions.aggregate.Count(
                CollectionConverters.asScala(List.<Expression>of(Literal.create(1, DataTypes.IntegerType))).toList())
                .toAggregateExpression(), "n");
        org.apache.spark.sql.catalyst.plans.logical.Aggregate count =
            new org.apache.spark.sql.catalyst.plans.logical.Aggregate(
                CollectionConverters.asScala(List.<Expression>of()).toList(),
                CollectionConverters.asScala(List.<NamedExpression>of(sourceRowCount)).toList(), m.sourceTable(),
                Option.empty());
        List<NamedExpression> countRow = new ArrayList<>();
        countRow.add(SparkChange.alias(Literal.create("count", DataTypes.StringType), SparkChange.OP));
        countRow.add(SparkChange.alias(Literal.create(null, DataTypes.LongType), SparkChange.FILE));
        countRow.add(SparkChange.alias(sourceRowCount.toAttribute(), SparkChange.ROW));
        for (Attribute col : columns) {
            countRow.add(SparkChange.alias(Literal.create(null, col.dataType()), col.name()));
        }
        countRow.add(SparkChange.partColumn());
        LogicalPlan outcome = new org.apache.spark.sql.catalyst.plans.logical.Union(
            CollectionConverters.asScala(List.<LogicalPlan>of(changes,
                new Project(CollectionConverters.asScala(countRow).toList(), count))).toList(), false, false);
        List<Attribute> o = CollectionConverters.asJava(outcome.output());
        // Any value will do for an insert (it has no file): its bucket spreads the inserts.
        Expression part = new Coalesce(CollectionConverters.asScala(List.<Expression>of(o.get(1),
            new Cast(insertBucket(target, o.subList(3, o.size() - 1)), DataTypes.LongType, Option.empty())))
            .toList());
        return new RepartitionByExpression(CollectionConverters.asScala(List.of(part)).toList(), outcome,
            Option.empty(), Option.empty());
    }

    /** Delta's history parameters of a MERGE: the predicate and each clause's action and condition. */
    static String parameters(LogicalRelation target, MergeIntoTable m) {
        com.fasterxml.jackson.databind.node.ObjectNode json =
            com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
        org.apache.spark.sql.catalyst.expressions.AttributeSet t = target.outputSet();
        json.put("predicate", ChangeSpec.historyText(m.mergeCondition(), t));
        clauses(json.putArray("matchedPredicates"), actions(m.matchedActions()), t);
        clauses(json.putArray("notMatchedPredicates"), actions(m.notMatchedActions()), t);
        clauses(json.putArray("notMatchedBySourcePredicates"), actions(m.notMatchedBySourceActions()), t);
        return json.toString();
    }

    private static void clauses(com.fasterxml.jackson.databind.node.ArrayNode into, List<MergeAction> actions,
                                org.apache.spark.sql.catalyst.expressions.AttributeSet target) {
        for (MergeAction a : actions) {
            com.fasterxml.jackson.databind.node.ObjectNode c = into.addObject();
            if (a.condition().isDefined()) {
                c.put("predicate", ChangeSpec.historyText(a.condition().get(), target));
            }
            c.put("actionType", op(a));
        }
    }

    /** An inserted row's bucket in the table (Spark's pmod(hash(index columns), n), as the
     * layout buckets), or a constant when the table has no bucketing to follow. */
    private static Expression insertBucket(LogicalRelation target, List<Attribute> outcomeColumns) {
        Snapshot snapshot = DriverLookup.snapshotOf(target);
        List<String> keys = snapshot.indexColumns();
        List<Expression> k = new ArrayList<>();
        for (String name : keys) {
            for (Attribute a : outcomeColumns) {
                if (a.name().equals(name)) {
                    k.add(a);
                }
            }
        }
        if (k.size() != keys.size() || snapshot.numBuckets() <= 0) {
            return Literal.create(0, DataTypes.IntegerType);
        }
        return new Pmod(new Murmur3Hash(CollectionConverters.asScala(k).toList(), io.indexeddf.log.Spec.BUCKET_SEED),
            Literal.create(snapshot.numBuckets(), DataTypes.IntegerType));
    }

    private static void add(List<Tuple2<Expression, MergeAction>> into, Expression kind, List<MergeAction> actions) {
        for (MergeAction a : actions) {
            into.add(new Tuple2<>(a.condition().isDefined() ? new And(kind, a.condition().get()) : kind, a));
        }
    }

    private static String op(MergeAction a) {
        if (a instanceof DeleteAction) {
            return "delete";
        }
        if (a instanceof UpdateAction) {
            return "update";
        }
        if (a instanceof InsertAction) {
            return "insert";
        }
        throw IndexedDFException.option("MERGE INTO an indexeddf table does not take the action " + a.sql());
    }

    /** The value clause {@code a} gives column {@code col}: its assignment (cast to the column's
     * type), the target's own value for an UPDATE that does not set it, NULL for an INSERT. */
    private static Expression value(MergeAction a, Attribute col) {
        scala.collection.immutable.Seq<Assignment> assignments = a instanceof UpdateAction
            ? ((UpdateAction) a).assignments() : ((InsertAction) a).assignments();
        for (Assignment s : CollectionConverters.asJava(assignments)) {
            if (!(s.key() instanceof Attribute)) {
                throw IndexedDFException.option("an indexeddf MERGE sets whole columns; " + s.key().sql()
                    + " is not one (set the struct column to a new struct instead)");
            }
            if (((Attribute) s.key()).exprId().equals(col.exprId())) {
                return cast(s.value(), col.dataType());
            }
        }
        return a instanceof UpdateAction ? col : Literal.create(null, col.dataType());
    }

    private static Expression cast(Expression e, DataType type) {
        return e.dataType().sameType(type) ? e : new Cast(e, type, Option.empty());
    }

    private static Expression caseWhen(List<Tuple2<Expression, Expression>> cases) {
        return new CaseWhen(CollectionConverters.asScala(cases).toList(), Option.empty());
    }

    private static List<MergeAction> actions(scala.collection.immutable.Seq<MergeAction> seq) {
        return new ArrayList<>(CollectionConverters.asJava(seq));
    }
}
