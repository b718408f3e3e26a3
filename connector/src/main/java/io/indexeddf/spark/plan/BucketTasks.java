package io.indexeddf.spark.plan;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.Snapshot;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A MERGE of a large source run by its write tasks a bucket at a time (the Python side:
 * {@code indexeddf/spark/change_tasks.py}; docs/changes.md). Spark evaluates the source and the
 * expressions over it, repartitions the rows by the table's bucket (Spark's hash of the keys
 * modulo the bucket count is the bucket, docs/PROTOCOL.md) and coalesces the buckets into a few
 * tasks; each task runs the change engine on its buckets: the index finds the target rows of the
 * bucket's keys, no scan and no join of the table's rows in Spark, the files of the bucket get
 * their deletion vectors or are copied, the new rows are written there. The driver commits once.
 */
final class BucketTasks {
    /** The session conf that lets a MERGE run this way (default true); false: Spark's plan joins the table. */
    static final String CONF = "spark.indexeddf.merge.bucketTasks.enabled";

    private BucketTasks() {
    }

    /**
     * The source expressions the ON condition equates with each bucketing column of the table
     * (in the table's order), or null when the tasks cannot run {@code m} a bucket at a time: the
     * conf is off, a NOT MATCHED BY SOURCE clause needs every target row, a live file has no
     * bucket (another Delta writer's: it holds rows of every bucket), or a key is missing or of
     * another type than its column (Spark would hash the value of another type into another
     * partition than its bucket).
     */
    static List<Expression> sourceKeys(SparkSession session, LogicalRelation target, MergeIntoTable m,
                                       Snapshot snapshot) {
        if (!Boolean.parseBoolean(session.conf().get(CONF, "true").trim()) || !m.notMatchedBySourceActions().isEmpty()) {
            return null;
        }
        List<String> index = snapshot.indexColumns();
        if (index.isEmpty() || snapshot.numBuckets() <= 0) {
            return null;
        }
        for (AddFile f : snapshot.files) {
            if (f.bucket == null) {
                return null;
            }
        }
        Map<String, Expression> equal = new HashMap<>();
        collect(m.mergeCondition(), target.outputSet(), m.sourceTable().outputSet(), equal);
        List<Expression> keys = new ArrayList<>();
        for (String column : index) {
            Expression e = equal.get(column);
            if (e == null) {
                return null;
            }
            keys.add(e);
        }
        return keys;
    }

    /** The source rows repartitioned by their bucket, the buckets coalesced into the write tasks. */
    static LogicalPlan rows(SparkSession session, LogicalPlan sourceRows, List<Expression> keys, int numBuckets) {
        LogicalPlan byBucket = new RepartitionByExpression(CollectionConverters.asScala(keys).toList(), sourceRows,
            Option.apply(numBuckets), Option.empty());
        int tasks = BucketedOutcome.writeTasks(session.sessionState().conf(), session.sparkContext());
        // Coalesced, not shuffled again: a task reads its buckets' partitions one after another.
        return tasks < numBuckets ? new Repartition(tasks, false, byBucket) : byBucket;
    }

    /** Each conjunct {@code target column = source expression} of {@code e}, by the column's name. */
    private static void collect(Expression e, AttributeSet target, AttributeSet source, Map<String, Expression> equal) {
        if (e instanceof And) {
            collect(((And) e).left(), target, source, equal);
            collect(((And) e).right(), target, source, equal);
        } else if (e instanceof EqualTo) {
            EqualTo eq = (EqualTo) e;
            put(eq.left(), eq.right(), target, source, equal);
            put(eq.right(), eq.left(), target, source, equal);
        }
    }

    private static void put(Expression t, Expression s, AttributeSet target, AttributeSet source,
                            Map<String, Expression> equal) {
        if (t instanceof AttributeReference && target.contains((Attribute) t) && !s.references().isEmpty()
            && s.references().subsetOf(source) && s.deterministic() && s.dataType().sameType(t.dataType())) {
            equal.putIfAbsent(((Attribute) t).name(), s);
        }
    }
}
