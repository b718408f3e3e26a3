package io.indexeddf.spark.exec;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.Partition;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.LogicalRDD;
import scala.Option;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * Rows found on the driver, shipped to tasks as a few byte arrays: one {@link RowCache.Group}
 * (rows packed as {@link UnsafeRow}s) a partition. A {@link LocalRelation} that a job scans
 * ships its rows as one serialized object each (Spark's {@code parallelize}), which costs
 * about as much as the index lookup that found them when a join's side holds tens of
 * thousands of rows (measured: a third of the optimizer-to-answer time of a 10K-key join).
 */
public final class PackedRows extends RDD<InternalRow> {
    private static final long serialVersionUID = 1L;
    /** Rows a partition at least: fewer rows ship cheaply either way. */
    public static final int MIN_ROWS_A_PART = 4096;

    /** The driver's copy (each task gets its part's rows in the {@link Part} it runs, not these). */
    private final transient List<RowCache.Group> parts;

    private PackedRows(org.apache.spark.SparkContext sc, List<RowCache.Group> parts) {
        super(sc, CollectionConverters.asScala(new ArrayList<org.apache.spark.Dependency<?>>()).toList(),
            ClassTag$.MODULE$.apply(InternalRow.class));
        this.parts = parts;
    }

    /**
     * {@code local} as a relation over packed rows, with the same output and statistics (so
     * Spark picks the same join strategy and build side).
     */
    public static LogicalPlan of(SparkSession session, LocalRelation local) {
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        int size = local.data().size();
        int numFields = local.output().size();
        int n = Math.max(1, Math.min(classic.sparkContext().defaultParallelism(), size / MIN_ROWS_A_PART));
        UnsafeProjection project = UnsafeProjection.create(local.schema());
        List<RowCache.Group> parts = new ArrayList<>();
        Iterator<InternalRow> rows = local.data().iterator();  // a Scala list: no indexed access
        for (int p = 0; p < n; p++) {
            RowCache.Builder b = new RowCache.Builder(numFields);
            for (long i = (long) size * p / n; i < (long) size * (p + 1) / n; i++) {
                b.add(project.apply(rows.next()));
            }
            parts.add(b.build());
        }
        scala.collection.immutable.Seq<SortOrder> unordered =
            CollectionConverters.asScala(new ArrayList<SortOrder>()).toList();
        return new LogicalRDD(local.output(), new PackedRows(classic.sparkContext(), parts),
            new org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning(0), unordered, false, Option.empty(),
            classic, Option.apply(local.computeStats()), Option.empty(), false);
    }

    @Override
    public Iterator<InternalRow> compute(Partition split, TaskContext context) {
        RowCache.Group g = ((Part) split).rows;
        UnsafeRow row = new UnsafeRow(g.numFields);
        return CollectionConverters.asScala(new java.util.Iterator<InternalRow>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < g.rows();
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new java.util.NoSuchElementException();
                }
                g.pointTo(row, next++);
                return row;  // reused: Spark's scan of an RDD projects each row before it goes on
            }
        });
    }

    @Override
    public Partition[] getPartitions() {
        Partition[] out = new Partition[parts.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = new Part(i, parts.get(i));
        }
        return out;
    }

    /** One task's rows. */
    private static final class Part extends TaskPart {
        private static final long serialVersionUID = 1L;
        private final RowCache.Group rows;

        Part(int index, RowCache.Group rows) {
            super(index);
            this.rows = rows;
        }
    }
}
