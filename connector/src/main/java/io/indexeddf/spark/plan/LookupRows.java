package io.indexeddf.spark.plan;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.types.DataType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The rows a driver lookup answers with, as Spark plans them with no per-query code
 * generation: {@link DriverLookup} gives its local relation rows already in Spark's unsafe
 * format (through a projection compiled once for the columns' types) and tags it; this
 * strategy plans such a relation as a {@link Scan}, which hands those rows out as they are,
 * where Spark's {@code LocalTableScanExec} would generate a projection to the same format for
 * every query (milliseconds: as much as reading the index block).
 */
public final class LookupRows extends SparkStrategy {
    /** Marks a local relation whose rows {@link DriverLookup} made unsafe already. */
    static final TreeNodeTag<Boolean> UNSAFE = new TreeNodeTag<>("indexeddf.unsafeLookupRows");

    /** Compiled projections to the unsafe format, by the columns' types (few: one a table's columns read). */
    private static final Map<String, UnsafeProjection> PROJECTIONS = new java.util.LinkedHashMap<String, UnsafeProjection>(
            16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, UnsafeProjection> e) {
            return size() > 64;
        }
    };

    /** A local relation of {@code rows} with {@code output}'s columns, in the unsafe format and tagged for this strategy. */
    static LocalRelation relation(List<Attribute> output, List<InternalRow> rows) {
        DataType[] types = new DataType[output.size()];
        StringBuilder key = new StringBuilder();
        for (int i = 0; i < types.length; i++) {
            types[i] = output.get(i).dataType();
            key.append(types[i].json()).append('\u0001');
        }
        List<InternalRow> unsafe = new ArrayList<>(rows.size());
        synchronized (PROJECTIONS) {  // a projection reuses its output row: one caller at a time
            UnsafeProjection project = PROJECTIONS.computeIfAbsent(key.toString(), k -> UnsafeProjection.create(types));
            for (InternalRow r : rows) {
                unsafe.add(project.apply(r).copy());
            }
        }
        LocalRelation out = new LocalRelation(CollectionConverters.asScala(output).toList(),
            CollectionConverters.asScala(unsafe).toList(), false, Option.empty());
        out.setTagValue(UNSAFE, true);
        return out;
    }

    @Override
    public Seq<SparkPlan> apply(LogicalPlan plan) {
        List<SparkPlan> out = new ArrayList<>();
        if (plan instanceof LocalRelation && ((LocalRelation) plan).stream().isEmpty()
                && plan.getTagValue(UNSAFE).isDefined() && allUnsafe((LocalRelation) plan)) {
            LocalRelation r = (LocalRelation) plan;
            out.add(new Scan(r.output(), r.data()));
        }
        return CollectionConverters.asScala(out).toList();
    }

    /** Whether every row is unsafe with the relation's column count (what a copy of the relation keeps too). */
    private static boolean allUnsafe(LocalRelation r) {
        int n = r.output().size();
        for (InternalRow row : CollectionConverters.asJava(r.data())) {
            if (!(row instanceof UnsafeRow) || ((UnsafeRow) row).numFields() != n) {
                return false;
            }
        }
        return true;
    }

    /**
     * A leaf that hands out rows already unsafe: collecting them (or their first or last few)
     * returns them as they are; run as an RDD, they are one partition. Its name in plans is
     * Spark's local scan's ({@code LocalTableScan}).
     */
    public static final class Scan extends SparkPlan {
        private static final long serialVersionUID = 1L;
        private final Seq<Attribute> output;
        private final transient Seq<InternalRow> rows;

        /** The constructor copies of the node are made through ({@code TreeNode.makeCopy}: its arguments in order). */
        public Scan(Seq<Attribute> output, Seq<InternalRow> rows) {
            this.output = output;
            this.rows = rows;
        }

        @Override
        public Seq<Attribute> output() {
            return output;
        }

        @Override
        public Seq<SparkPlan> children() {
            return CollectionConverters.asScala(List.<SparkPlan>of()).toList();
        }

        @Override
        public SparkPlan withNewChildrenInternal(scala.collection.immutable.IndexedSeq<SparkPlan> children) {
            return this;  // a leaf
        }

        @Override
        public String nodeName() {
            return "LocalTableScan";
        }

        @Override
        public scala.collection.Iterator<Object> stringArgs() {
            return CollectionConverters.asScala(List.<Object>of(output)).iterator();
        }

        @Override
        public org.apache.spark.rdd.RDD<InternalRow> doExecute() {
            return sparkContext().parallelize(rows, 1, scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
        }

        @Override
        public InternalRow[] executeCollect() {
            return CollectionConverters.asJava(rows).toArray(new InternalRow[0]);
        }

        @Override
        public InternalRow[] executeTake(int limit) {
            return java.util.Arrays.copyOf(executeCollect(), Math.min(Math.max(0, limit), rows.size()));
        }

        @Override
        public InternalRow[] executeTail(int limit) {
            int size = rows.size();
            return java.util.Arrays.copyOfRange(executeCollect(), size - Math.min(Math.max(0, limit), size), size);
        }

        @Override
        public int productArity() {
            return 2;
        }

        @Override
        public Object productElement(int n) {
            if (n == 0) {
                return output;
            }
            if (n == 1) {
                return rows;
            }
            throw new IndexOutOfBoundsException(String.valueOf(n));
        }

        @Override
        public boolean canEqual(Object that) {
            return that instanceof Scan;
        }
    }
}
