package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Murmur3HashFunction$;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The connector's index planner, with the rules of {@code indexeddf/optimizer/planner.py}
 * (docs/PROTOCOL.md 13): which columns a filter fixes, which index answers it at a version,
 * which index buckets it probes and which live files it must scan (hybrid scan).
 */
public final class LookupPlanner {
    // The seeds and the key cap are the Python side's (indexeddf/spec/, through Spec): one
    // definition, so a bucket or a cap can never differ between the two planners.
    static final int KEY_HASH_SEED = Spec.KEY_HASH_SEED;
    static final int BUCKET_SEED = Spec.BUCKET_SEED;
    /** The most keys one index lookup takes ({@code MAX_INDEX_KEYS} of the Python planner). */
    static final int MAX_INDEX_KEYS = Spec.MAX_INDEX_KEYS;

    private LookupPlanner() {
    }

    // -- which columns the filter fixes ---------------------------------------------------
    /** Column -> the values an equality, {@code <=>}, IN or IS NULL conjunct fixes it to. */
    public static Map<String, List<Object>> fixedValues(Expression condition, List<Attribute> output) {
        Map<String, List<Object>> fixed = new LinkedHashMap<>();
        for (Expression c : conjuncts(condition)) {
            Map.Entry<String, List<Object>> fix = fixes(c, output);
            String column = fix == null ? null : fix.getKey();
            List<Object> values = fix == null ? null : fix.getValue();
            // Two conjuncts on one column: either set holds every match (rows are checked against
            // the whole condition after they are read).
            if (column != null && (!fixed.containsKey(column) || fixed.get(column).size() > values.size())) {
                fixed.put(column, values);
            }
        }
        return fixed;
    }

    /** The column and values one predicate fixes (an OR of such predicates on one column too), or null. */
    private static Map.Entry<String, List<Object>> fixes(Expression c, List<Attribute> output) {
        if (c instanceof Or) {
            Map.Entry<String, List<Object>> l = fixes(((Or) c).left(), output);
            Map.Entry<String, List<Object>> r = fixes(((Or) c).right(), output);
            if (l == null || r == null || !l.getKey().equals(r.getKey())) {
                return null;
            }
            List<Object> both = new ArrayList<>(l.getValue());
            both.addAll(r.getValue());
            return Map.entry(l.getKey(), both);
        }
        if (c instanceof EqualTo || c instanceof EqualNullSafe) {
            Expression l = c.children().apply(0);
            Expression r = c.children().apply(1);
            Expression value = r.foldable() && column(l, output) != null ? r
                : l.foldable() && column(r, output) != null ? l : null;
            if (value == null) {
                return null;
            }
            Object v = valueOf(value);
            // col = NULL is never true: no key (as the Python planner, PROTOCOL.md 13); col <=> NULL is IS NULL.
            return v == null && c instanceof EqualTo ? null
                : entry(column(value == r ? l : r, output), java.util.Collections.singletonList(v));
        } else if (c instanceof In && column(((In) c).value(), output) != null) {
            List<Object> vals = new ArrayList<>();
            for (Expression e : CollectionConverters.asJava(((In) c).list())) {
                if (!e.foldable()) {
                    return null;
                }
                Object v = e.eval(null);
                if (v != null) {  // a NULL in an IN list matches nothing: not a key (PROTOCOL.md 13)
                    vals.add(v);
                }
            }
            return entry(column(((In) c).value(), output), vals);
        } else if (c instanceof InSet && column(((InSet) c).child(), output) != null) {
            List<Object> vals = new ArrayList<>(CollectionConverters.asJava(((InSet) c).hset()));
            vals.removeIf(java.util.Objects::isNull);
            return entry(column(((InSet) c).child(), output), vals);
        } else if (c instanceof IsNull && column(((IsNull) c).child(), output) != null) {
            return entry(column(((IsNull) c).child(), output), java.util.Collections.singletonList(null));
        }
        return null;
    }

    private static Map.Entry<String, List<Object>> entry(String column, List<Object> values) {
        return new java.util.AbstractMap.SimpleImmutableEntry<>(column, values);
    }

    private static Object valueOf(Expression foldable) {
        return foldable.eval(null);
    }

    public static List<Expression> conjuncts(Expression e) {
        List<Expression> out = new ArrayList<>();
        if (e instanceof And) {
            out.addAll(conjuncts(((And) e).left()));
            out.addAll(conjuncts(((And) e).right()));
        } else {
            out.add(e);
        }
        return out;
    }

    private static String column(Expression e, List<Attribute> output) {
        int i = indexOf(e, output);
        return i < 0 ? null : output.get(i).name();
    }

    /** The position in {@code output} of the column {@code e} is (by expression id), or -1 when it is none. */
    public static int indexOf(Expression e, List<Attribute> output) {
        if (!(e instanceof AttributeReference)) {
            return -1;
        }
        for (int i = 0; i < output.size(); i++) {
            if (output.get(i).exprId().equals(((AttributeReference) e).exprId())) {
                return i;
            }
        }
        return -1;
    }

    // -- planning (the rules of optimizer/planner.py) -------------------------------------
    /** What a lookup reads: the index, its keys, and the live files it must scan. */
    public static final class Plan {
        public final IndexLog.Entry index;
        public final List<Object[]> keys;
        public final Set<Long> liveCovered;
        public final List<AddFile> scan;
        /** More keys than the driver answers ({@code maxKeys}): Spark tasks read the rows. */
        public final boolean manyKeys;

        Plan(IndexLog.Entry index, List<Object[]> keys, Set<Long> liveCovered, List<AddFile> scan,
             boolean manyKeys) {
            this.index = index;
            this.keys = keys;
            this.liveCovered = liveCovered;
            this.scan = scan;
            this.manyKeys = manyKeys;
        }
    }

    /**
     * The lookup that answers a filter fixing {@code fixed}, or null when Spark's scan should:
     * through the first usable index (primary first, then by name; readable; every column
     * fixed; at most {@link #MAX_INDEX_KEYS} keys; within the staleness limits).
     */
    public static Plan plan(Snapshot snapshot, StructType schema, Map<String, List<Object>> fixed,
                     LookupLimits limits) {
        List<IndexLog.Entry> entries = servingStates(snapshot, fixed);
        entries.sort(Comparator.comparing((IndexLog.Entry e) -> !Spec.PRIMARY_KIND.equals(e.kind))
            .thenComparing(e -> e.name));
        for (IndexLog.Entry e : entries) {
            if (!e.readable() || !fixed.keySet().containsAll(e.columns)) {
                continue;
            }
            long count = 1;
            for (String c : e.columns) {
                count *= new HashSet<>(fixed.get(c)).size();  // distinct values, as the Python planner counts
            }
            if (count > MAX_INDEX_KEYS || hasFloatColumn(schema, e.columns)) {
                continue;
            }
            Set<Long> covered = e.coveredIds();
            if (tooStale(snapshot, covered)) {
                continue;
            }
            // The first index the planner would use answers: on the driver for few keys, else
            // in Spark tasks (the caller decides; a later index would be another plan than the
            // Python planner's).
            List<Object[]> keys = product(e.columns, fixed);
            Set<Long> liveCovered = new HashSet<>();
            List<AddFile> scan = new ArrayList<>();
            Set<Integer> dataBuckets = e.columns.equals(snapshot.indexColumns())
                ? buckets(keys, e.columns, schema, snapshot.numBuckets()) : null;
            for (AddFile a : snapshot.files) {
                if (covered.contains(a.fileId)) {
                    liveCovered.add(a.fileId);
                } else if (dataBuckets == null || a.bucket == null || dataBuckets.contains(a.bucket)) {
                    scan.add(a);
                }
            }
            return new Plan(e, keys, liveCovered, scan, count > limits.maxKeys);
        }
        return null;
    }

    /**
     * Per index name, the state that serves a read of {@code snapshot}: its state there, or at
     * the newest version, whichever leaves fewer live bytes unindexed (same columns, kind and
     * bucket count only; {@code serving_states} of the Python planner). Only indexes whose
     * columns the filter fixes are weighed (the others cannot answer).
     */
    private static List<IndexLog.Entry> servingStates(Snapshot snapshot, Map<String, List<Object>> fixed) {
        Map<String, IndexLog.Entry> held = snapshot.indexes == null ? Map.of() : snapshot.indexes;
        Map<String, IndexLog.Entry> newest = snapshot.newestIndexes() == null ? null : snapshot.newestIndexes().get();
        if (newest == null) {
            return new ArrayList<>(held.values());
        }
        Set<String> names = new java.util.LinkedHashSet<>(held.keySet());
        names.addAll(newest.keySet());
        List<IndexLog.Entry> out = new ArrayList<>();
        for (String name : names) {
            IndexLog.Entry then = held.get(name);
            IndexLog.Entry now = newest.get(name);
            IndexLog.Entry first = then != null ? then : now;
            if (!fixed.keySet().containsAll(first.columns)) {
                out.add(first);
                continue;
            }
            IndexLog.Entry best = first;
            if (then != null && now != null && then.columns.equals(now.columns) && then.kind.equals(now.kind)
                    && then.numBuckets == now.numBuckets && unindexedBytes(snapshot, now) < unindexedBytes(snapshot, then)) {
                best = now;
            }
            out.add(best);
        }
        return out;
    }

    private static double unindexedBytes(Snapshot snapshot, IndexLog.Entry e) {
        if (!e.readable()) {
            return Double.POSITIVE_INFINITY;
        }
        Set<Long> covered = e.coveredIds();
        long bytes = 0;
        for (AddFile a : snapshot.files) {
            if (!covered.contains(a.fileId)) {
                bytes += a.size;
            }
        }
        return bytes;
    }

    static boolean hasFloatColumn(StructType schema, List<String> columns) {
        for (String c : columns) {
            DataType t = schema.apply(c).dataType();
            if (t instanceof FloatType || t instanceof DoubleType) {
                return true;  // -0.0 / NaN: left to Spark's scan
            }
        }
        return false;
    }

    /** The hybrid-scan limits of the table ({@code indexeddf.hybridScan.*}). */
    private static boolean tooStale(Snapshot snapshot, Set<Long> covered) {
        long live = 0;
        long appended = 0;
        for (AddFile a : snapshot.files) {
            live += a.size;
            if (!covered.contains(a.fileId)) {
                appended += a.size;
            }
        }
        long gone = 0;
        for (Map.Entry<Long, Long> t : snapshot.tombstoneSizes.entrySet()) {
            if (covered.contains(t.getKey())) {
                gone += t.getValue();
            }
        }
        double maxAppended = ratio(snapshot, "indexeddf.hybridScan.maxAppendedRatio");
        double maxDeleted = ratio(snapshot, "indexeddf.hybridScan.maxDeletedRatio");
        double appendedRatio = appended / (double) Math.max(1, live);
        double deletedRatio = gone / (double) Math.max(1, live - appended + gone);
        return appendedRatio > maxAppended || deletedRatio > maxDeleted;
    }

    private static double ratio(Snapshot snapshot, String key) {
        String v = snapshot.configuration(key);
        return Double.parseDouble((v == null ? Spec.propertyDefault(key) : v).trim());
    }

    static List<Object[]> product(List<String> columns, Map<String, List<Object>> fixed) {
        List<Object[]> out = new ArrayList<>();
        out.add(new Object[0]);
        for (String c : columns) {
            List<Object[]> next = new ArrayList<>();
            for (Object[] prefix : out) {
                for (Object v : new ArrayList<>(new java.util.LinkedHashSet<>(fixed.get(c)))) {
                    Object[] k = Arrays.copyOf(prefix, prefix.length + 1);
                    k[prefix.length] = v;
                    next.add(k);
                }
            }
            out = next;
        }
        return out;
    }

    /**
     * Spark's hash of a key (its columns folded in order, nulls skipped), as the writer
     * computed it: what {@code Murmur3Hash(columns, seed)} evaluates, without building an
     * expression per key (lookups and joins hash up to a million keys).
     */
    static int hash(Object[] key, List<String> columns, StructType schema, int seed) {
        int h = seed;
        for (int i = 0; i < key.length; i++) {
            if (key[i] != null) {
                h = (int) Murmur3HashFunction$.MODULE$.hash(key[i], schema.apply(columns.get(i)).dataType(), h);
            }
        }
        return h;
    }

    /** The bucket of {@code n} that {@code key} lands in: {@code pmod(hash(columns), n)}, as the writer bucketed it. */
    public static int bucket(Object[] key, List<String> columns, StructType schema, int n) {
        return Math.floorMod(hash(key, columns, schema, BUCKET_SEED), n);
    }

    /** The buckets of {@code n} that {@code keys} land in. */
    public static Set<Integer> buckets(List<Object[]> keys, List<String> columns, StructType schema, int n) {
        Set<Integer> out = new HashSet<>();
        for (Object[] k : keys) {
            out.add(bucket(k, columns, schema, n));
        }
        return out;
    }

}
