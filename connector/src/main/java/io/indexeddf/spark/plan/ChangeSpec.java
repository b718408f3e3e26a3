package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.Between;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression$;
import org.apache.spark.sql.catalyst.plans.logical.Assignment;
import org.apache.spark.sql.catalyst.plans.logical.DeleteAction;
import org.apache.spark.sql.catalyst.plans.logical.InsertAction;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeAction;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.UpdateAction;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.collection.immutable.Seq;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * A resolved MERGE as the Python change engine takes it: JSON with the
 * statement's conditions and assignments as Spark SQL text ({@code Expression.sql()}), in the
 * shape of {@code indexeddf.changes} ({@code operation}, {@code predicate}, {@code updates},
 * {@code clauses} of {@code when} / {@code action} / {@code predicate} / {@code updates}).
 *
 * <p>Names: a MERGE's are qualified {@code target.} and {@code source.}, whatever aliases the statement used (Spark has
 * already resolved every name to its side). A MERGE's sub-expressions over the source's columns
 * alone (a cast, {@code s.v * 2}, a UDF) are evaluated by Spark: they become extra columns of
 * the source rows ({@code __indexeddf_source_N}) and the engine reads them by name.
 */
final class ChangeSpec {
    static final String TARGET = "target";
    static final String SOURCE = "source";
    static final String COMPUTED = "__indexeddf_source_";

    private final ObjectNode json = JsonNodeFactory.instance.objectNode();

    private ChangeSpec(String operation) {
        json.put("operation", operation);
        json.put("targetAlias", TARGET);
        json.put("sourceAlias", SOURCE);
    }

    String json() {
        return json.toString();
    }

    /** This MERGE run by its write tasks a bucket at a time ({@link BucketTasks}), on {@code version}. */
    ChangeSpec inBucketTasks(long version) {
        json.put("bucketTasks", true);
        json.put("readVersion", version);
        return this;
    }

    /** This MERGE of a small source run whole by its one write task (the change engine's one pass, in an
     * executor's Python worker rather than the driver's commit), on {@code version}. */
    ChangeSpec inOneTask(long version) {
        json.put("oneTask", true);
        json.put("readVersion", version);
        return this;
    }

    /** Delta's session confs that make a change idempotent: its commit carries
     * {@code txn(appId, version)}, and a change whose app already committed that version (or a
     * later one) changes nothing. */
    static final String TXN_APP_ID = io.indexeddf.log.Spec.CONF_TXN_APP_ID;
    static final String TXN_VERSION = io.indexeddf.log.Spec.CONF_TXN_VERSION;

    /** Adds the session's {@link #TXN_APP_ID} and {@link #TXN_VERSION} (both or neither) to a change's JSON. */
    static void idempotency(org.apache.spark.sql.SparkSession session, ObjectNode into) {
        Option<String> app = session.conf().getOption(TXN_APP_ID);
        Option<String> version = session.conf().getOption(TXN_VERSION);
        if (app.isEmpty() && version.isEmpty()) {
            return;
        }
        if (app.isEmpty() || version.isEmpty()) {
            throw IndexedDFException.option("an idempotent change needs both " + TXN_APP_ID + " and " + TXN_VERSION
                + " set (Delta's confs); set the missing one or unset both");
        }
        long v;
        try {
            v = Long.parseLong(version.get().trim());
        } catch (NumberFormatException e) {
            throw IndexedDFException.option(TXN_VERSION + " must be a whole number, got '" + version.get() + "'");
        }
        into.put("txnAppId", app.get());
        into.put("txnVersion", v);
    }

    /** This change made idempotent by the session's confs ({@link #idempotency}). */
    ChangeSpec idempotent(org.apache.spark.sql.SparkSession session) {
        idempotency(session, json);
        return this;
    }

    /** The operation (MERGE). */
    String operation() {
        return json.get("operation").asText();
    }

    /** A MERGE's condition as the table's history shows it, whichever path runs the MERGE:
     * Spark SQL over columns qualified {@code target.} and {@code source.}. */
    static String historyText(Expression e, AttributeSet target) {
        return qualified(spelledOut(e), target).sql();
    }

    /** A MERGE: its JSON and the source rows Spark writes for it. */
    static final class Merge {
        final ChangeSpec spec;
        final LogicalPlan sourceRows;
        /** Whether the change engine evaluates every expression over the target's columns exactly
         * as Spark does ({@link #engineEvaluates}). */
        final boolean evaluable;

        Merge(ChangeSpec spec, LogicalPlan sourceRows, boolean evaluable) {
            this.spec = spec;
            this.sourceRows = sourceRows;
            this.evaluable = evaluable;
        }
    }

    /** The expressions the change engine evaluates as Spark does, whatever their operands'
     * types (its property tests check them against DuckDB and Spark): columns, literals, the
     * boolean connectives, comparisons, NULL tests, IN, CASE and COALESCE. */
    private static final java.util.Set<Class<?>> ENGINE_EXPRESSIONS = java.util.Set.of(
        AttributeReference.class, org.apache.spark.sql.catalyst.expressions.Literal.class, And.class,
        org.apache.spark.sql.catalyst.expressions.Or.class, org.apache.spark.sql.catalyst.expressions.Not.class,
        org.apache.spark.sql.catalyst.expressions.EqualTo.class, org.apache.spark.sql.catalyst.expressions.LessThan.class,
        LessThanOrEqual.class, org.apache.spark.sql.catalyst.expressions.GreaterThan.class, GreaterThanOrEqual.class,
        org.apache.spark.sql.catalyst.expressions.IsNull.class, org.apache.spark.sql.catalyst.expressions.IsNotNull.class,
        org.apache.spark.sql.catalyst.expressions.In.class, org.apache.spark.sql.catalyst.expressions.InSet.class,
        org.apache.spark.sql.catalyst.expressions.CaseWhen.class,
        org.apache.spark.sql.catalyst.expressions.Coalesce.class);

    /** Whether every node of {@code e} is one the change engine evaluates as Spark does. */
    static boolean engineEvaluates(Expression e) {
        if (!ENGINE_EXPRESSIONS.contains(e.getClass())) {
            return false;
        }
        for (Expression child : CollectionConverters.asJava(e.children())) {
            if (!engineEvaluates(child)) {
                return false;
            }
        }
        return true;
    }

    /**
     * A MERGE. {@code stars} (null: the schema stays): the MERGE evolves the schema, and these
     * clauses ({@link MergeStars#key}) were written with {@code *}: they go to the engine as
     * {@code "all": true} with {@code "schemaMode": "merge"}, so that the engine takes every
     * source column of the clause, the ones the table lacks included.
     */
    static Merge merge(LogicalRelation target, LogicalPlan source, Expression on, List<MergeAction> matched,
                       List<MergeAction> notMatched, List<MergeAction> notMatchedBySource, List<String> stars) {
        ChangeSpec spec = new ChangeSpec("MERGE");
        Names names = new Names(target.outputSet(), source.outputSet());
        spec.json.put("predicate", names.text(on, "the ON condition"));
        if (stars != null) {
            spec.json.put("schemaMode", "merge");
        }
        List<String> all = stars == null ? List.of() : stars;
        ArrayNode clauses = spec.json.putArray("clauses");
        addClauses(clauses, "matched", matched, names, all);
        addClauses(clauses, "not_matched", notMatched, names, all);
        addClauses(clauses, "not_matched_by_source", notMatchedBySource, names, all);
        List<NamedExpression> columns = new ArrayList<>();
        for (Attribute a : CollectionConverters.asJava(source.output())) {
            columns.add(a);
        }
        columns.addAll(names.computed);
        return new Merge(spec, new Project(CollectionConverters.asScala(columns).toList(), source), names.evaluable);
    }

    private static void addClauses(ArrayNode clauses, String when, List<MergeAction> actions, Names names,
                                   List<String> stars) {
        for (int i = 0; i < actions.size(); i++) {
            MergeAction action = actions.get(i);
            ObjectNode clause = clauses.addObject();
            clause.put("when", when);
            String where = "WHEN " + when.toUpperCase().replace('_', ' ');
            clause.put("predicate", action.condition().isDefined()
                ? names.text(action.condition().get(), "the condition of " + where) : null);
            Seq<Assignment> assignments;
            if (action instanceof DeleteAction) {
                clause.put("action", "delete");
                continue;
            } else if (action instanceof UpdateAction) {
                clause.put("action", "update");
                assignments = ((UpdateAction) action).assignments();
            } else if (action instanceof InsertAction) {
                clause.put("action", "insert");
                assignments = ((InsertAction) action).assignments();
            } else {
                throw IndexedDFException.option("MERGE INTO an indexeddf table does not take the action " + action.sql());
            }
            if (stars.contains(MergeStars.key(when, i))) {
                clause.put("all", true);  // every source column of the table's names, and the new ones
                continue;
            }
            ObjectNode updates = clause.putObject("updates");
            for (Assignment a : CollectionConverters.asJava(assignments)) {
                updates.put(column(a.key()), names.text(a.value(), where + " SET " + column(a.key())));
            }
        }
    }

    /** The target column an assignment sets (a top-level column: nested fields are refused). */
    private static String column(Expression key) {
        if (!(key instanceof AttributeReference)) {
            throw IndexedDFException.option("an indexeddf change sets whole columns; " + key.sql()
                + " is not one (set the struct column to a new struct instead)");
        }
        return ((AttributeReference) key).name();
    }


    /**
     * {@code e} with Spark's {@code x BETWEEN lo AND hi} written as {@code x >= lo AND x <= hi}:
     * Spark prints a resolved BETWEEN as the call {@code between(x, lo, hi)}, which is no SQL
     * the change engine's parser (or any other) reads back. The two are the same predicate,
     * NULLs included (Spark's own BETWEEN is replaced by exactly this conjunction).
     */
    static Expression spelledOut(Expression e) {
        return e.transformUp(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
                return x instanceof Between;
            }

            @Override
            public Expression apply(Expression x) {
                Between b = (Between) x;
                return new And(new GreaterThanOrEqual(b.input(), b.lower()), new LessThanOrEqual(b.input(), b.upper()));
            }
        });
    }

    /**
     * {@code e} with each integral cast of a literal ({@code CAST(700 AS BIGINT)}, which Spark's
     * analyzer writes wherever an int literal meets a bigint column) replaced by the literal of
     * the cast's type, as Spark's optimizer folds it: the engine reads {@code 700L} as Spark does,
     * so {@code t.v > 700} stays an expression it evaluates. A cast Spark would fail is kept.
     * A cast to the type its operand has already ({@code CAST(t.v AS BIGINT) IN (0, 1)} of a
     * bigint {@code v}, as Spark's analyzer writes an IN list) is its operand, as Spark's
     * optimizer removes it.
     */
    static Expression castLiteralsFolded(Expression e) {
        return e.transformUp(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
                if (!(x instanceof org.apache.spark.sql.catalyst.expressions.Cast)) {
                    return false;
                }
                Expression child = ((org.apache.spark.sql.catalyst.expressions.Cast) x).child();
                return child.dataType().sameType(x.dataType())
                    || child instanceof org.apache.spark.sql.catalyst.expressions.Literal
                        && x.dataType() instanceof org.apache.spark.sql.types.IntegralType;
            }

            @Override
            public Expression apply(Expression x) {
                Expression child = ((org.apache.spark.sql.catalyst.expressions.Cast) x).child();
                if (child.dataType().sameType(x.dataType())) {
                    return child;
                }
                try {
                    return org.apache.spark.sql.catalyst.expressions.Literal.create(x.eval(null), x.dataType());
                } catch (RuntimeException overflow) {
                    return x;
                }
            }
        });
    }

    private static void refuseSubquery(Expression e, String where) {
        if (SubqueryExpression$.MODULE$.hasSubquery(e)) {
            throw IndexedDFException.option(where + " of a change to an indexeddf table has a subquery (" + e.sql()
                + "); write it as MERGE INTO ... USING (the subquery) ON ...");
        }
    }

    /** {@code e} with every column qualified by its side ({@code TARGET} for the target's, else
     * {@code SOURCE}: the source's and the computed ones). */
    static Expression qualified(Expression e, AttributeSet target) {
        return e.transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
                return x instanceof AttributeReference;
            }

            @Override
            public Expression apply(Expression x) {
                AttributeReference a = (AttributeReference) x;
                String side = target.contains(a) ? TARGET : SOURCE;
                return a.withQualifier(CollectionConverters.asScala(List.of(side)).toList());
            }
        });
    }

    /** A MERGE's expressions as text, the source-only parts turned into computed source columns. */
    private static final class Names {
        final AttributeSet target;
        final AttributeSet source;
        final List<NamedExpression> computed = new ArrayList<>();
        boolean evaluable = true;

        Names(AttributeSet target, AttributeSet source) {
            this.target = target;
            this.source = source;
        }

        String text(Expression e, String where) {
            refuseSubquery(e, where);
            for (Attribute a : CollectionConverters.asJava(e.references().toSeq())) {
                if (!target.contains(a) && !source.contains(a)) {
                    throw IndexedDFException.option(where + " names " + a.sql() + ", a column of neither the target "
                        + "nor the source");
                }
            }
            Expression rest = computeSourceParts(castLiteralsFolded(spelledOut(e)));
            evaluable &= engineEvaluates(rest);
            return qualified(rest, target).sql();
        }

        /** Largest sub-expressions that read source columns only, replaced by computed columns. */
        private Expression computeSourceParts(Expression e) {
            return e.transformDown(new AbstractPartialFunction<Expression, Expression>() {
                @Override
                public boolean isDefinedAt(Expression x) {
                    return !(x instanceof Attribute) && !x.references().isEmpty()
                        && x.references().subsetOf(source);
                }

                @Override
                public Expression apply(Expression x) {
                    Alias alias = new Alias(x, COMPUTED + computed.size(), NamedExpression$.MODULE$.newExprId(),
                        CollectionConverters.asScala(List.<String>of()).toList(), scala.Option.empty(),
                        CollectionConverters.asScala(List.<String>of()).toList());
                    computed.add(alias);
                    return alias.toAttribute();
                }
            });
        }
    }
}
