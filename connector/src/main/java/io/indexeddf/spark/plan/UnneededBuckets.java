package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.SnapshotFileIndex;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.plans.physical.AllTuples$;
import org.apache.spark.sql.catalyst.plans.physical.ClusteredDistribution;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SortExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec;
import org.apache.spark.sql.execution.exchange.Exchange;
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec;
import org.apache.spark.sql.execution.joins.BroadcastNestedLoopJoinExec;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An indexeddf table's scan read as a plain one (files split and packed into tasks, as
 * {@code spark.read.parquet} reads them) where no operator uses its bucketing: a query-stage
 * preparation rule (adaptive execution, Spark's default), run after Spark's own
 * {@code DisableUnnecessaryBucketedScan}, with that rule's walk of the physical plan and one
 * difference: a broadcast join passes the walk on to its children, as a filter or a
 * projection does.
 *
 * <p>Why: Spark keeps a bucketed scan under a broadcast join whenever an operator above needs
 * some distribution, even when an exchange between re-distributes the rows anyway. A join
 * with a small broadcast side under a global aggregate ({@code
 * df.join(probe, "k").agg(count("*"))}) then reads the table with one task per bucket and no
 * file packing, where the same files read by {@code spark.read.parquet} need a few tasks
 * (1.5x slower at 2M rows). A broadcast join asks nothing of its streamed side's partitioning
 * or order (its build side is broadcast through an exchange), so a scan under it is used only
 * by what lies above the join, which the walk sees.
 *
 * <p>A scan stays bucketed where Spark would keep it for any other reason: an operator that
 * needs the table's distribution with no exchange between them (a join or aggregation on the
 * index columns that spares a shuffle), or bucket pruning. Only scans of indexeddf tables are
 * touched; Spark's own bucketed tables keep Spark's choice.
 */
public final class UnneededBuckets extends Rule<SparkPlan> {

    @Override
    public SparkPlan apply(SparkPlan plan) {
        if (!plan.conf().bucketingEnabled() || !plan.conf().autoBucketedScanEnabled() || !hasCandidate(plan)) {
            return plan;
        }
        return walk(plan, false, false, true);
    }

    private static boolean hasCandidate(SparkPlan plan) {
        return plan.find(new scala.runtime.AbstractFunction1<SparkPlan, Object>() {
            @Override
            public Object apply(SparkPlan p) {
                return p instanceof FileSourceScanExec && candidate((FileSourceScanExec) p);
            }
        }).isDefined();
    }

    /** A bucketed scan of an indexeddf table without bucket pruning. */
    private static boolean candidate(FileSourceScanExec scan) {
        return scan.bucketedScan() && scan.optionalBucketSet().isEmpty()
            && scan.relation().location() instanceof SnapshotFileIndex;
    }

    /**
     * The walk of {@code DisableUnnecessaryBucketedScan}: {@code interesting}, an operator above
     * needs a distribution; {@code exchange}, an exchange lies between it and here; {@code
     * passing}, every operator between passes the rows on without needing their distribution.
     */
    private static SparkPlan walk(SparkPlan p, boolean interesting, boolean exchange, boolean passing) {
        if (needsDistribution(p)) {
            return withChildren(p, true, false, true);
        }
        if (p instanceof Exchange) {
            return withChildren(p, interesting, true, passing);
        }
        if (p instanceof FileSourceScanExec) {
            FileSourceScanExec scan = (FileSourceScanExec) p;
            return candidate(scan) && (!interesting || (exchange && passing)) ? plain(scan) : scan;
        }
        return withChildren(p, interesting, exchange, passing && passesOn(p));
    }

    private static SparkPlan withChildren(SparkPlan p, boolean interesting, boolean exchange, boolean passing) {
        List<SparkPlan> children = CollectionConverters.asJava(p.children());
        List<SparkPlan> out = new ArrayList<>(children.size());
        boolean changed = false;
        for (SparkPlan c : children) {
            SparkPlan n = walk(c, interesting, exchange, passing);
            changed |= n != c;
            out.add(n);
        }
        return changed ? p.withNewChildren(CollectionConverters.asScala(out).toList()) : p;
    }

    /** Spark's "interesting partition": the operator needs its children clustered, or all rows in one place. */
    private static boolean needsDistribution(SparkPlan p) {
        for (Distribution d : CollectionConverters.asJava(p.requiredChildDistribution())) {
            if (d instanceof ClusteredDistribution || d == AllTuples$.MODULE$) {
                return true;
            }
        }
        return false;
    }

    /** Spark's allowed operators (sort, projection, filter, partial aggregate), and broadcast joins. */
    private static boolean passesOn(SparkPlan p) {
        if (p instanceof SortExec || p instanceof ProjectExec || p instanceof FilterExec
                || p instanceof BroadcastHashJoinExec || p instanceof BroadcastNestedLoopJoinExec) {
            return true;
        }
        return p instanceof BaseAggregateExec && ((BaseAggregateExec) p).requiredChildDistributionExpressions().isEmpty();
    }

    /** The scan reading the same files unbucketed, linked to the same logical plan (as Spark's rule does). */
    private static SparkPlan plain(FileSourceScanExec scan) {
        FileSourceScanExec out = scan.copy(scan.relation(), scan.stream(), scan.output(), scan.requiredSchema(),
            scan.partitionFilters(), scan.optionalBucketSet(), scan.optionalNumCoalescedBuckets(), scan.dataFilters(),
            scan.tableIdentifier(), true, scan.markedForSingleTaskExecution());
        if (scan.logicalLink().isDefined()) {
            out.setLogicalLink(scan.logicalLink().get());
        }
        return out;
    }
}
