package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.SnapshotFileIndex;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.SparkPartitionID;
import org.apache.spark.sql.catalyst.optimizer.BuildLeft$;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.CoalesceExec;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SortExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.UnionExec;
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec;
import org.apache.spark.sql.execution.exchange.REPARTITION_BY_COL$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec;
import org.apache.spark.sql.execution.joins.ShuffledHashJoinExec;
import org.apache.spark.sql.execution.joins.SortMergeJoinExec;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A change's outcome written where Spark's join leaves it, without its repartition by file,
 * when the rows of each target file already arrive in one task: a query-stage preparation rule
 * (adaptive execution), run after Spark chose its joins and bucketed scans.
 *
 * <p>A change Spark plans ({@link SparkChange}, {@link MergeOutcome}) repartitions its outcome
 * by the target file each row names, so that one task writes a file's deletion vector or
 * copy. When the target is read by a bucketed scan (one partition holds every file of its
 * buckets) and the rows reach the repartition through operators that keep each row in its
 * partition (projections, filters, sorts, a union, and joins that stream the target's side:
 * a sort-merge or shuffled hash join, or a broadcast join whose build side is the other one),
 * every row of a file is already in the partition of the file's bucket, and a MERGE's inserted
 * rows in the partition of their key's bucket (the join shuffled the source by the table's
 * bucketing). The repartition then only moves every changed row, a whole copy of the outcome
 * (at 20M target rows and a 2M-row source, 3M rows with their values), across the shuffle for
 * nothing; this rule drops it, and has a few tasks write the buckets' outcomes one after
 * another ({@link #WRITE_TASKS}). Anywhere else (no bucketed scan, a join that broadcasts the
 * target, an exchange on the target's side) the repartition stays. The driver's commit checks
 * that no file was written by two tasks (indexeddf/spark/apply.py).
 */
public final class BucketedOutcome extends Rule<SparkPlan> {
    /** The session setting that turns the rule off ({@code false}): every outcome is repartitioned by file. */
    public static final String CONF = "spark.indexeddf.change.bucketedOutcome.enabled";

    @Override
    public SparkPlan apply(SparkPlan plan) {
        if (!Boolean.parseBoolean(plan.conf().getConfString(CONF, "true"))) {
            return plan;
        }
        return plan.transformUp(new scala.runtime.AbstractPartialFunction<SparkPlan, SparkPlan>() {
            @Override
            public boolean isDefinedAt(SparkPlan p) {
                return p instanceof ShuffleExchangeExec && unneeded((ShuffleExchangeExec) p);
            }

            @Override
            public SparkPlan apply(SparkPlan p) {
                return inWriteTasks(((ShuffleExchangeExec) p).child());
            }
        });
    }

    /** The session setting: the most tasks that write an outcome left where the join put it
     * (default: twice the session's default parallelism). */
    public static final String WRITE_TASKS = "spark.indexeddf.change.writeTasks";

    /**
     * The outcome {@code p} (one partition a bucket, or a few) tagged with each row's partition
     * ({@link SparkChange#PART}) and coalesced into at most {@link #WRITE_TASKS} tasks: each
     * write task writes its partitions one after another, holding one partition's rows at a
     * time (indexeddf/spark/apply.py). A Python write task costs tens of milliseconds of CPU
     * besides its rows (its worker's set-up, the Arrow stream): at 32 buckets and a 2M-row
     * source, a task a bucket cost about a quarter of the MERGE's CPU.
     */
    private static SparkPlan inWriteTasks(SparkPlan p) {
        List<NamedExpression> project = new ArrayList<>();
        boolean tagged = false;
        for (Attribute a : CollectionConverters.asJava(p.output())) {
            if (a.name().equals(SparkChange.PART)) {
                project.add(new Alias(new SparkPartitionID(), a.name(), a.exprId(), a.qualifier(), Option.empty(),
                    CollectionConverters.asScala(List.<String>of()).toList()));
                tagged = true;
            } else {
                project.add(a);
            }
        }
        if (!tagged) {
            return p;  // an outcome that cannot say where its partitions end: one task a partition
        }
        // A union (a MERGE's count row) does not say how many partitions it has; a coalesce into
        // more partitions than there are keeps them as they are.
        return new CoalesceExec(writeTasks(p), new ProjectExec(CollectionConverters.asScala(project).toList(), p));
    }

    private static int writeTasks(SparkPlan p) {
        org.apache.spark.SparkContext sc = p.session() != null ? p.session().sparkContext()
            : org.apache.spark.SparkContext.getOrCreate();
        return writeTasks(p.conf(), sc);
    }

    /** The tasks that write a change's outcome ({@link #WRITE_TASKS}; by default twice the default parallelism). */
    static int writeTasks(org.apache.spark.sql.internal.SQLConf conf, org.apache.spark.SparkContext sc) {
        String v = conf.getConfString(WRITE_TASKS, "").trim();
        if (!v.isEmpty()) {
            try {
                int n = Integer.parseInt(v);
                if (n > 0) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // refused below
            }
            throw io.indexeddf.log.IndexedDFException.option(WRITE_TASKS + " = " + v
                + ": give a positive number of tasks, or unset it for twice the session's default parallelism");
        }
        return 2 * Math.max(1, sc.defaultParallelism());
    }

    /** The outcome's repartition by file, over rows whose files each lie in one partition. */
    private static boolean unneeded(ShuffleExchangeExec e) {
        if (e.shuffleOrigin() != REPARTITION_BY_COL$.MODULE$ || !(e.outputPartitioning() instanceof HashPartitioning)) {
            return false;
        }
        Set<ExprId> file = new HashSet<>();
        for (Expression x : CollectionConverters.asJava(((HashPartitioning) e.outputPartitioning()).expressions())) {
            for (Attribute a : CollectionConverters.asJava(x.references().toSeq())) {
                if (a.name().equals(SparkChange.FILE)) {
                    file.add(a.exprId());
                }
            }
        }
        return !file.isEmpty() && aligned(e.child(), file);
    }

    /**
     * Whether {@code p}'s rows that carry a file (the attributes {@code ids} or what they are
     * computed from) keep every row of a file in one partition, down to a bucketed scan of the
     * table.
     */
    private static boolean aligned(SparkPlan p, Set<ExprId> ids) {
        if (ids.isEmpty()) {
            return true;  // no file here (a MERGE's count of the source): any partition will do
        }
        if (p instanceof FileSourceScanExec) {
            FileSourceScanExec scan = (FileSourceScanExec) p;
            return scan.bucketedScan() && scan.relation().location() instanceof SnapshotFileIndex;
        }
        if (p instanceof ProjectExec) {
            return aligned(((ProjectExec) p).child(),
                sources(CollectionConverters.asJava(((ProjectExec) p).projectList()), ids));
        }
        if (p instanceof FilterExec || p instanceof SortExec || p instanceof ColumnarToRowExec) {
            return aligned(p.children().head(), ids);
        }
        if (p instanceof BaseAggregateExec) {  // a file only as a constant (a MERGE's count row)
            return sources(CollectionConverters.asJava(((BaseAggregateExec) p).resultExpressions()), ids).isEmpty();
        }
        if (p instanceof UnionExec) {
            List<Attribute> out = CollectionConverters.asJava(p.output());
            for (SparkPlan c : CollectionConverters.asJava(p.children())) {
                List<Attribute> theirs = CollectionConverters.asJava(c.output());
                Set<ExprId> mine = new HashSet<>();
                for (int i = 0; i < out.size(); i++) {
                    if (ids.contains(out.get(i).exprId())) {
                        mine.add(theirs.get(i).exprId());
                    }
                }
                if (!aligned(c, mine)) {
                    return false;
                }
            }
            return true;
        }
        if (p instanceof SortMergeJoinExec || p instanceof ShuffledHashJoinExec || p instanceof BroadcastHashJoinExec) {
            SparkPlan left = p.children().apply(0);
            SparkPlan right = p.children().apply(1);
            Set<ExprId> l = within(left, ids);
            Set<ExprId> r = within(right, ids);
            if (!l.isEmpty() && !r.isEmpty()) {
                return false;
            }
            if (p instanceof BroadcastHashJoinExec) {  // the target's side must be the streamed one
                boolean buildsLeft = ((BroadcastHashJoinExec) p).buildSide() == BuildLeft$.MODULE$;
                if (buildsLeft ? !l.isEmpty() : !r.isEmpty()) {
                    return false;
                }
            }
            return l.isEmpty() ? aligned(right, r) : aligned(left, l);
        }
        return false;  // an exchange, an aggregate, anything else: the rows may have moved
    }

    /** The attributes of {@code ids} that {@code p} outputs. */
    private static Set<ExprId> within(SparkPlan p, Set<ExprId> ids) {
        Set<ExprId> out = new HashSet<>();
        for (Attribute a : CollectionConverters.asJava(p.output())) {
            if (ids.contains(a.exprId())) {
                out.add(a.exprId());
            }
        }
        return out;
    }

    /** What a projection computes the attributes {@code ids} from: its child's attributes. */
    private static Set<ExprId> sources(List<NamedExpression> projectList, Set<ExprId> ids) {
        Set<ExprId> out = new HashSet<>();
        for (NamedExpression n : projectList) {
            if (!ids.contains(n.exprId())) {
                continue;
            }
            Expression e = n instanceof Alias ? ((Alias) n).child() : (Expression) n;
            for (Attribute a : CollectionConverters.asJava(e.references().toSeq())) {
                out.add(a.exprId());
            }
        }
        return out;
    }
}
