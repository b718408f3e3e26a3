package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeAction;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * {@code DELETE FROM}, {@code UPDATE ... SET} and {@code MERGE INTO} an indexeddf table (a
 * catalog table or {@code indexeddf.`/path`}), as delta-spark's analysis rules turn these
 * statements on a Delta table into its own commands. Spark resolves the statement first
 * (names, {@code *} actions, types).
 *
 * <p>DELETE, UPDATE and MERGE become a {@link SparkChange}: Spark plans and evaluates the
 * conditions and assignments over the table's relation (a MERGE's join: {@link MergeOutcome}),
 * its tasks write the outcome, the driver commits once (docs/spark-tables.md).
 *
 * <p>A MERGE that evolves the schema ({@code MERGE WITH SCHEMA EVOLUTION}, or the session's
 * autoMerge) becomes a {@link ChangeCommand}: an insert into a {@link ChangeWriter}, which runs
 * the change through the Python data source {@code indexeddf_python} with the statement as a
 * JSON option ({@link ChangeSpec}). Spark evaluates the source query and every expression
 * over the source's columns alone (the writer's tasks stage those rows); the change engine
 * evaluates what refers to the target's columns (conditions, {@code SET v = t.v + s.v}),
 * finds the matched rows through the index when the ON condition fixes the index columns,
 * and writes copy-on-write files or deletion vectors. An expression the engine cannot
 * evaluate is refused with a typed error before anything is written. {@code MERGE WITH SCHEMA
 * EVOLUTION} (or the session's autoMerge) runs the engine's {@code schema_mode="merge"} with the
 * {@code *} clauses {@link MergeStars} marked: the source's columns the table lacks join it in the
 * MERGE's own commit.
 */
public final class ResolveChanges extends Rule<LogicalPlan> {
    private final SparkSession session;

    public ResolveChanges(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        return plan.resolveOperatorsDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return (p.resolved() || resolvedButItsStars(p)) && relationOf(target(p)) != null;
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                return command(p);
            }
        });
    }

    /**
     * Whether {@code p} is a MERGE that evolves the schema and is resolved but for the
     * assignments Spark made of its {@code *} clauses. A source struct with a field the
     * table's struct lacks makes Spark assign it through a cast to the table's struct, which
     * cannot drop a field and stays unresolved; those assignments are not used (the engine
     * takes a {@code *} clause's source columns by name, and adds the new fields).
     */
    private boolean resolvedButItsStars(LogicalPlan p) {
        if (!(p instanceof MergeIntoTable) || !MergeStars.evolves(session, (MergeIntoTable) p)) {
            return false;
        }
        MergeIntoTable m = (MergeIntoTable) p;
        List<String> stars = MergeStars.of(m);
        if (stars == null || !m.targetTable().resolved() || !m.sourceTable().resolved()
                || !m.mergeCondition().resolved()) {
            return false;
        }
        return resolvedBut(stars, "matched", m.matchedActions()) && resolvedBut(stars, "not_matched", m.notMatchedActions())
            && resolvedBut(stars, "not_matched_by_source", m.notMatchedBySourceActions());
    }

    private static boolean resolvedBut(List<String> stars, String when, scala.collection.immutable.Seq<MergeAction> seq) {
        List<MergeAction> actions = actions(seq);
        for (int i = 0; i < actions.size(); i++) {
            MergeAction a = actions.get(i);
            boolean ok = stars.contains(MergeStars.key(when, i))
                ? a.condition().isEmpty() || a.condition().get().resolved()
                : a.resolved();
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    /** The table a change statement changes, or null when {@code p} is not one. */
    private static LogicalPlan target(LogicalPlan p) {
        if (p instanceof DeleteFromTable) {
            return ((DeleteFromTable) p).table();
        }
        if (p instanceof UpdateTable) {
            return ((UpdateTable) p).table();
        }
        if (p instanceof MergeIntoTable) {
            return ((MergeIntoTable) p).targetTable();
        }
        return null;
    }

    /** The indexeddf relation under a statement's target (aliases removed), or null. */
    static LogicalRelation relationOf(LogicalPlan p) {
        while (p instanceof SubqueryAlias) {
            p = ((SubqueryAlias) p).child();
        }
        return p instanceof LogicalRelation && DriverLookup.snapshotOf(p) != null ? (LogicalRelation) p : null;
    }

    private LogicalPlan command(LogicalPlan p) {
        LogicalRelation lr = relationOf(target(p));
        if (p instanceof DeleteFromTable) {
            // Planned and evaluated by Spark, written by its tasks (docs/spark-tables.md).
            Expression condition = ((DeleteFromTable) p).condition();
            return SparkChange.of(lr, "DELETE", isTrue(condition) ? null : condition, null);
        } else if (p instanceof UpdateTable) {
            UpdateTable u = (UpdateTable) p;
            Expression condition = u.condition().isDefined() ? u.condition().get() : null;
            return SparkChange.of(lr, "UPDATE", condition == null || isTrue(condition) ? null : condition,
                CollectionConverters.asJava(u.assignments()));
        }
        MergeIntoTable m = (MergeIntoTable) p;
        ChangeSpec.Merge merge;
        List<Expression> bucketKeys = null;
        int numBuckets = 0;
        boolean whole = false;
        if (MergeStars.evolves(session, m)) {
            List<String> stars = MergeStars.of(m);
            if (stars == null) {
                throw IndexedDFException.option("MERGE WITH SCHEMA EVOLUTION into an indexeddf table: the analyzer "
                    + "lost which clauses were written with *, so the columns to add are unknown; add the new "
                    + "columns first (ALTER TABLE ... ADD COLUMNS), then MERGE");
            }
            merge = engineMerge(lr, m, stars);
        } else {
            // A table with CHECK constraints: Spark's plan, which checks them with Catalyst.
            io.indexeddf.log.Snapshot snapshot = DriverLookup.snapshotOf(lr);
            boolean constrained = !io.indexeddf.spark.exec.CheckConstraints.of(snapshot).isEmpty();
            boolean small = smallSource(m);
            // A larger source: its write tasks run the engine a bucket at a time, where they can.
            bucketKeys = small || constrained || engineMaxSourceBytes() < 0 ? null
                : BucketTasks.sourceKeys(session, lr, m, snapshot);
            merge = (small || bucketKeys != null) && !constrained ? engineMergeOrNull(lr, m) : null;
            if (merge == null || !merge.evaluable) {
                return SparkChange.merge(lr, m);
            }
            if (bucketKeys != null) {
                merge.spec.inBucketTasks(snapshot.version);
                numBuckets = snapshot.numBuckets();
            } else if (oneTask()) {
                merge.spec.inOneTask(snapshot.version);
                whole = true;
            }
        }
        ChangeSpec spec = merge.spec;
        // A small source whole in one task, coalesced (no shuffle): the engine's one pass runs there.
        LogicalPlan rows = whole ? new Repartition(1, false, merge.sourceRows)
            : bucketKeys == null ? merge.sourceRows
            : BucketTasks.rows(session, merge.sourceRows, bucketKeys, numBuckets);
        // Where the Python commit leaves the change's metrics for the command's result row.
        String resultFile = new java.io.File(System.getProperty("java.io.tmpdir"),
            "indexeddf-change-" + java.util.UUID.randomUUID() + ".json").getPath();
        ChangeWriter writer = new ChangeWriter(session, lr, spec.idempotent(session).json(), rows.schema(), resultFile);
        LogicalRelation writable = lr.copy(writer, lr.output(), lr.catalogTable(), false, lr.stream());
        return new ChangeCommand(writable, rows, spec.operation(), resultFile);
    }

    /** The session conf: the largest source (Spark's estimate of its size) a MERGE runs through the
     * Python change engine, which finds the target's rows through the index; -1: none. */
    static final String ENGINE_MAX_SOURCE_BYTES = "spark.indexeddf.merge.engineMaxSourceBytes";

    /**
     * Whether a MERGE's source is small enough for the change engine: Spark's estimate of its
     * size at most {@link #ENGINE_MAX_SOURCE_BYTES} (by default Spark's broadcast threshold: a
     * source Spark would broadcast), and no NOT MATCHED BY SOURCE clause (which reads every
     * target row anyway). A source Spark cannot size (a DataFrame made from local rows) is not.
     */
    private boolean smallSource(MergeIntoTable m) {
        long max = engineMaxSourceBytes();
        return max >= 0 && m.notMatchedBySourceActions().isEmpty()
            && m.sourceTable().stats().sizeInBytes().compareTo(scala.math.BigInt.apply(max)) <= 0;
    }

    /** The session conf that runs a small MERGE source's change in one write task (default true); false:
     * the driver's commit runs it. */
    static final String ONE_TASK = "spark.indexeddf.merge.oneTask.enabled";

    /** {@link #ONE_TASK}: whether a small source's change runs in its one write task. */
    private boolean oneTask() {
        return Boolean.parseBoolean(session.conf().get(ONE_TASK, "true").trim());
    }

    /** {@link #ENGINE_MAX_SOURCE_BYTES} in bytes; -1: no MERGE runs through the change engine. */
    private long engineMaxSourceBytes() {
        String v = session.conf().get(ENGINE_MAX_SOURCE_BYTES,
            session.conf().get("spark.sql.autoBroadcastJoinThreshold", "10MB")).trim();
        return v.startsWith("-") ? -1 : org.apache.spark.network.util.JavaUtils.byteStringAsBytes(v);
    }

    private static ChangeSpec.Merge engineMerge(LogicalRelation lr, MergeIntoTable m, List<String> stars) {
        return ChangeSpec.merge(lr, m.sourceTable(), m.mergeCondition(), actions(m.matchedActions()),
            actions(m.notMatchedActions()), actions(m.notMatchedBySourceActions()), stars);
    }

    /** The MERGE as the change engine takes it, or null where it cannot (Spark's plan takes it then). */
    private static ChangeSpec.Merge engineMergeOrNull(LogicalRelation lr, MergeIntoTable m) {
        try {
            return engineMerge(lr, m, null);
        } catch (IndexedDFException e) {
            return null;
        }
    }

    private static List<MergeAction> actions(scala.collection.immutable.Seq<MergeAction> seq) {
        return new ArrayList<>(CollectionConverters.asJava(seq));
    }

    private static boolean isTrue(Expression e) {
        return e instanceof Literal && Boolean.TRUE.equals(((Literal) e).value());
    }

    /**
     * The change as Spark executes it: an insertable relation whose insert runs the change
     * through the Python writer: the MERGE's source rows (with the source-only expressions
     * Spark evaluated).
     */
    static final class ChangeWriter extends TableWriter {
        ChangeWriter(SparkSession session, LogicalRelation lr, String spec, StructType schema, String resultFile) {
            super(session, lr, schema);
            options.put("changeSpec", spec);
            options.put("_commitResultFile", resultFile);
        }

        @Override
        public void insert(Dataset<Row> data, boolean overwrite) {
            save(data, SaveMode.Append, false);  // the source's rows: the change engine checks what it writes
        }
    }
}
