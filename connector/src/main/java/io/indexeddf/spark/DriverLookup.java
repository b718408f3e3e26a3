package io.indexeddf.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Murmur3Hash;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.InterpretedPredicate;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.DataSourceStrategy$;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Index lookups answered on the driver with no Spark job: an optimizer rule that replaces a
 * filter over an indexeddf table, when an index answers it (docs/PROTOCOL.md 13, the
 * planner rules of {@code indexeddf/optimizer/planner.py}), by the matching rows themselves
 * (a {@link LocalRelation}). It probes the index segments of the keys' buckets (cached in
 * the JVM), reads only the row groups that hold candidate rows, scans the live files the
 * index does not cover (hybrid scan; row groups skipped by Parquet statistics and bloom
 * filters), and keeps the rows that satisfy the whole filter condition (Spark's own
 * expression evaluation). Collecting a local relation runs no Spark job.
 *
 * <p>It steps aside, leaving Spark's bucket-pruned Parquet scan to answer, whenever the
 * driver would do too much: more keys than {@code spark.indexeddf.driverLookup.maxKeys},
 * more row groups than {@code .maxRowGroups}, more matching rows than {@code .maxRows}, more
 * unindexed bytes to scan than {@code .maxScanBytes}; when reading the index fails; and when no index is usable (state, staleness, columns not fixed,
 * floating-point index columns, an index file deleted since the version read, the log's
 * index state unknown).
 */
public final class DriverLookup extends Rule<LogicalPlan> {
    static final String CONF = "spark.indexeddf.driverLookup.";
    static final int KEY_HASH_SEED = 0x2545F491;
    static final int BUCKET_SEED = 42;
    static final int MAX_INDEX_KEYS = 1_000_000;

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(DriverLookup.class);

    private final SparkSession session;

    public DriverLookup(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!Boolean.parseBoolean(conf("enabled", "true"))) {
            return plan;
        }
        return plan.transformDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                if (p instanceof Project) {
                    p = ((Project) p).child();  // a projection: read only the columns it and the filter use
                }
                return p instanceof Filter && snapshotOf(((Filter) p).child()) != null;
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                Project project = p instanceof Project ? (Project) p : null;
                Filter filter = (Filter) (project != null ? project.child() : p);
                LogicalPlan answered = answer(filter, project);
                if (answered == null) {
                    return p;
                }
                return project == null ? answered : new Project(project.projectList(), answered);
            }
        });
    }

    private String conf(String key, String dflt) {
        return session.conf().get(CONF + key, dflt);
    }

    static DeltaLog.Snapshot snapshotOf(LogicalPlan p) {
        if (!(p instanceof LogicalRelation) || ((LogicalRelation) p).isStreaming()) {
            return null;
        }
        if (!(((LogicalRelation) p).relation() instanceof HadoopFsRelation)) {
            return null;
        }
        HadoopFsRelation r = (HadoopFsRelation) ((LogicalRelation) p).relation();
        return r.location() instanceof SnapshotFileIndex ? ((SnapshotFileIndex) r.location()).snapshot() : null;
    }

    /** The filter answered by an index lookup, or null when it should be left to Spark. */
    private LogicalPlan answer(Filter filter, Project project) {
        Expression condition = filter.condition();
        if (!condition.deterministic() || SubqueryExpression$.MODULE$.hasSubquery(condition)) {
            return null;
        }
        LogicalRelation lr = (LogicalRelation) filter.child();
        HadoopFsRelation rel = (HadoopFsRelation) lr.relation();
        DeltaLog.Snapshot snapshot = snapshotOf(lr);
        StructType schema = rel.dataSchema();
        List<Attribute> output = new ArrayList<>(CollectionConverters.asJava(lr.output()));
        if ((snapshot.indexes == null && snapshot.newestIndexes == null) || output.size() != schema.size()) {
            return null;
        }
        Map<String, List<Object>> fixed = fixedValues(condition, output);
        Plan plan = plan(snapshot, schema, fixed);
        if (plan == null) {
            return null;
        }
        // The columns to read: those the projection above (when there is one) and the filter use.
        List<Attribute> read = new ArrayList<>();
        StructType required = new StructType();
        for (int i = 0; i < output.size(); i++) {
            Attribute a = output.get(i);
            if (project == null || project.references().contains(a) || condition.references().contains(a)) {
                read.add(a);
                required = required.add(schema.fields()[i]);
            }
        }
        Configuration hadoopConf = ((org.apache.spark.sql.classic.SparkSession) session).sessionState().newHadoopConf();
        List<InternalRow> rows;
        try {
            rows = execute(plan, snapshot, schema, required, condition, read, hadoopConf);
        } catch (FileNotFoundException e) {
            return null;  // an index file vacuumed since this version: Spark's scan answers
        } catch (IOException | RuntimeException e) {
            // The data files are the truth: whatever went wrong with the index, Spark's scan of
            // them answers right, so a lookup problem never fails the query.
            LOG.warn("indexeddf: the driver-side lookup on " + snapshot.root + " failed (" + e
                + "); Spark's scan answers instead", e);
            return null;
        }
        if (rows == null) {
            return null;
        }
        Seq<Attribute> attrs = CollectionConverters.asScala(read).toList();
        // The rows satisfy the whole condition already (evaluated below): no Filter stays above.
        return new LocalRelation(attrs, CollectionConverters.asScala(rows).toList(), false, Option.empty());
    }

    // -- which columns the filter fixes ---------------------------------------------------
    /** Column -> the values an equality, {@code <=>}, IN or IS NULL conjunct fixes it to. */
    static Map<String, List<Object>> fixedValues(Expression condition, List<Attribute> output) {
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
            if (r.foldable() && column(l, output) != null) {
                return entry(column(l, output), java.util.Collections.singletonList(valueOf(r)));
            }
            if (l.foldable() && column(r, output) != null) {
                return entry(column(r, output), java.util.Collections.singletonList(valueOf(l)));
            }
        } else if (c instanceof In && column(((In) c).value(), output) != null) {
            List<Object> vals = new ArrayList<>();
            for (Expression e : CollectionConverters.asJava(((In) c).list())) {
                if (!e.foldable()) {
                    return null;
                }
                vals.add(e.eval(null));
            }
            return entry(column(((In) c).value(), output), vals);
        } else if (c instanceof InSet && column(((InSet) c).child(), output) != null) {
            return entry(column(((InSet) c).child(), output), new ArrayList<>(CollectionConverters.asJava(((InSet) c).hset())));
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

    private static List<Expression> conjuncts(Expression e) {
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
        if (!(e instanceof AttributeReference)) {
            return null;
        }
        for (Attribute a : output) {
            if (a.exprId().equals(((AttributeReference) e).exprId())) {
                return a.name();
            }
        }
        return null;
    }

    // -- planning (the rules of optimizer/planner.py) -------------------------------------
    /** What a lookup reads: the index, its keys, and the live files it must scan. */
    static final class Plan {
        final IndexLog.Entry index;
        final List<Object[]> keys;
        final Set<Long> liveCovered;
        final List<DeltaLog.AddFile> scan;

        Plan(IndexLog.Entry index, List<Object[]> keys, Set<Long> liveCovered, List<DeltaLog.AddFile> scan) {
            this.index = index;
            this.keys = keys;
            this.liveCovered = liveCovered;
            this.scan = scan;
        }
    }

    private Plan plan(DeltaLog.Snapshot snapshot, StructType schema, Map<String, List<Object>> fixed) {
        List<IndexLog.Entry> entries = servingStates(snapshot, fixed);
        entries.sort(Comparator.comparing((IndexLog.Entry e) -> !"primary".equals(e.kind)).thenComparing(e -> e.name));
        for (IndexLog.Entry e : entries) {
            if (!e.readable() || !fixed.keySet().containsAll(e.columns)) {
                continue;
            }
            long count = 1;
            for (String c : e.columns) {
                count *= fixed.get(c).size();
            }
            if (count > MAX_INDEX_KEYS || hasFloatColumn(schema, e.columns)) {
                continue;
            }
            Set<Long> covered = e.coveredIds();
            if (tooStale(snapshot, covered)) {
                continue;
            }
            // The first index the planner would use answers, or Spark does: a later one would
            // be a different plan from the Python planner's.
            if (count > Long.parseLong(conf("maxKeys", "1000"))) {
                return null;
            }
            List<Object[]> keys = product(e.columns, fixed);
            Set<Long> liveCovered = new HashSet<>();
            List<DeltaLog.AddFile> scan = new ArrayList<>();
            Set<Integer> dataBuckets = e.columns.equals(snapshot.indexColumns())
                ? buckets(keys, e.columns, schema, snapshot.numBuckets()) : null;
            long scanBytes = 0;
            for (DeltaLog.AddFile a : snapshot.files) {
                if (covered.contains(a.fileId)) {
                    liveCovered.add(a.fileId);
                } else if (dataBuckets == null || a.bucket == null || dataBuckets.contains(a.bucket)) {
                    scan.add(a);
                    scanBytes += a.size;
                }
            }
            if (scanBytes > Long.parseLong(conf("maxScanBytes", String.valueOf(32L << 20)))) {
                return null;
            }
            return new Plan(e, keys, liveCovered, scan);
        }
        return null;
    }

    /**
     * Per index name, the state that serves a read of {@code snapshot}: its state there, or at
     * the newest version, whichever leaves fewer live bytes unindexed (same columns, kind and
     * bucket count only; {@code serving_states} of the Python planner). Only indexes whose
     * columns the filter fixes are weighed (the others cannot answer).
     */
    private static List<IndexLog.Entry> servingStates(DeltaLog.Snapshot snapshot, Map<String, List<Object>> fixed) {
        Map<String, IndexLog.Entry> held = snapshot.indexes == null ? Map.of() : snapshot.indexes;
        Map<String, IndexLog.Entry> newest = snapshot.newestIndexes == null ? null : snapshot.newestIndexes.get();
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

    private static double unindexedBytes(DeltaLog.Snapshot snapshot, IndexLog.Entry e) {
        if (!e.readable()) {
            return Double.POSITIVE_INFINITY;
        }
        Set<Long> covered = e.coveredIds();
        long bytes = 0;
        for (DeltaLog.AddFile a : snapshot.files) {
            if (!covered.contains(a.fileId)) {
                bytes += a.size;
            }
        }
        return bytes;
    }

    private static boolean hasFloatColumn(StructType schema, List<String> columns) {
        for (String c : columns) {
            DataType t = schema.apply(c).dataType();
            if (t instanceof FloatType || t instanceof DoubleType) {
                return true;  // -0.0 / NaN: left to Spark's scan
            }
        }
        return false;
    }

    /** The hybrid-scan limits of the table ({@code indexeddf.hybridScan.*}). */
    private static boolean tooStale(DeltaLog.Snapshot snapshot, Set<Long> covered) {
        long live = 0;
        long appended = 0;
        for (DeltaLog.AddFile a : snapshot.files) {
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
        double maxAppended = ratio(snapshot, "indexeddf.hybridScan.maxAppendedRatio", 0.3);
        double maxDeleted = ratio(snapshot, "indexeddf.hybridScan.maxDeletedRatio", 0.2);
        double appendedRatio = appended / (double) Math.max(1, live);
        double deletedRatio = gone / (double) Math.max(1, live - appended + gone);
        return appendedRatio > maxAppended || deletedRatio > maxDeleted;
    }

    private static double ratio(DeltaLog.Snapshot snapshot, String key, double dflt) {
        String v = snapshot.configuration(key);
        return v == null ? dflt : Double.parseDouble(v.trim());
    }

    private static List<Object[]> product(List<String> columns, Map<String, List<Object>> fixed) {
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

    /** Spark's hash of a key (its columns folded in order), as the writer computed it. */
    static int hash(Object[] key, List<String> columns, StructType schema, int seed) {
        List<Expression> lits = new ArrayList<>();
        for (int i = 0; i < key.length; i++) {
            lits.add(new Literal(key[i], schema.apply(columns.get(i)).dataType()));
        }
        return (Integer) new Murmur3Hash(CollectionConverters.asScala(lits).toList(), seed).eval(null);
    }

    private static Set<Integer> buckets(List<Object[]> keys, List<String> columns, StructType schema, int n) {
        Set<Integer> out = new HashSet<>();
        for (Object[] k : keys) {
            out.add(Math.floorMod(hash(k, columns, schema, BUCKET_SEED), n));
        }
        return out;
    }

    // -- execution ------------------------------------------------------------------------
    /** The rows of the plan that satisfy {@code condition}, or null when too many row groups. */
    private List<InternalRow> execute(Plan plan, DeltaLog.Snapshot snapshot, StructType schema, StructType required,
                                      Expression condition, List<Attribute> output, Configuration conf)
            throws IOException {
        Map<Long, TreeSet<Integer>> candidates = probe(plan, snapshot.root, schema, conf);
        Map<Long, DeltaLog.AddFile> byId = new HashMap<>();
        for (DeltaLog.AddFile a : snapshot.files) {
            byId.put(a.fileId, a);
        }
        // (file, row group) -> row offsets inside it
        List<Object[]> groups = new ArrayList<>();
        for (Map.Entry<Long, TreeSet<Integer>> e : candidates.entrySet()) {
            DeltaLog.AddFile a = byId.get(e.getKey());
            ParquetRows.Footer footer = ParquetRows.footer(a.location, conf);
            TreeMap<Integer, Set<Long>> byGroup = new TreeMap<>();
            for (int row : e.getValue()) {
                int g = footer.rowGroupOf(row);
                byGroup.computeIfAbsent(g, k -> new HashSet<>()).add(row - footer.rowBounds[g]);
            }
            for (Map.Entry<Integer, Set<Long>> g : byGroup.entrySet()) {
                groups.add(new Object[] {a, footer, g.getKey(), g.getValue()});
            }
        }
        long maxRows = Long.parseLong(conf("maxRows", "100000"));
        long candidateRows = 0;
        for (TreeSet<Integer> r : candidates.values()) {
            candidateRows += r.size();
        }
        if (groups.size() > Integer.parseInt(conf("maxRowGroups", "64")) || candidateRows > maxRows) {
            return null;
        }
        // Interpreted: generating code for a filter that holds the key literals would compile
        // anew for every key (tens of ms); the few candidate rows cost microseconds.
        BasePredicate predicate = new InterpretedPredicate(bound(condition, output));
        predicate.initialize(0);
        List<InternalRow> out = new ArrayList<>();
        Seq<org.apache.spark.sql.sources.Filter> none = CollectionConverters.asScala(
            new ArrayList<org.apache.spark.sql.sources.Filter>()).toList();
        if (!groups.isEmpty()) {
            Function1<PartitionedFile, Iterator<InternalRow>> reader =
                ParquetRows.reader(session, schema, required, none, false, conf);
            for (Object[] g : groups) {
                DeltaLog.AddFile a = (DeltaLog.AddFile) g[0];
                ParquetRows.Footer footer = (ParquetRows.Footer) g[1];
                int group = (Integer) g[2];
                @SuppressWarnings("unchecked")
                Set<Long> wanted = (Set<Long>) g[3];
                Iterator<InternalRow> it = reader.apply(ParquetRows.split(a.location, footer.byteStart[group],
                    footer.byteLength[group], a.size, a.modificationTime));
                long i = 0;
                while (it.hasNext()) {
                    InternalRow row = it.next();
                    if (wanted.contains(i++) && predicate.eval(row)) {
                        out.add(row.copy());
                    }
                }
                if (out.size() > maxRows) {
                    return null;
                }
            }
        }
        if (!plan.scan.isEmpty()) {
            Function1<PartitionedFile, Iterator<InternalRow>> reader =
                ParquetRows.reader(session, schema, required, pushed(condition), false, conf);
            for (DeltaLog.AddFile a : plan.scan) {
                Iterator<InternalRow> it = reader.apply(ParquetRows.split(a.location, 0, a.size, a.size,
                    a.modificationTime));
                while (it.hasNext()) {
                    InternalRow row = it.next();
                    if (predicate.eval(row)) {
                        out.add(row.copy());
                    }
                }
                if (out.size() > maxRows) {
                    return null;  // rows of a key held in memory on the driver: Spark's scan is better
                }
            }
        }
        return out;
    }

    /** {@code condition} with its columns bound to their positions in the rows read. */
    private static Expression bound(Expression condition, List<Attribute> output) {
        return condition.transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression e) {
                return e instanceof AttributeReference && position(e, output) >= 0;
            }

            @Override
            public Expression apply(Expression e) {
                int i = position(e, output);
                return new BoundReference(i, e.dataType(), e.nullable());
            }
        });
    }

    private static int position(Expression e, List<Attribute> output) {
        for (int i = 0; i < output.size(); i++) {
            if (output.get(i).exprId().equals(((AttributeReference) e).exprId())) {
                return i;
            }
        }
        return -1;
    }

    /** Data file id -> candidate row ordinals, from the segments of the keys' index buckets. */
    private Map<Long, TreeSet<Integer>> probe(Plan plan, org.apache.hadoop.fs.Path root, StructType schema,
                                              Configuration conf) throws IOException {
        IndexLog.Entry index = plan.index;
        Map<Integer, List<Integer>> hashesByBucket = new TreeMap<>();
        for (Object[] k : plan.keys) {
            int bucket = Math.floorMod(hash(k, index.columns, schema, BUCKET_SEED), index.numBuckets);
            hashesByBucket.computeIfAbsent(bucket, b -> new ArrayList<>())
                .add(hash(k, index.columns, schema, KEY_HASH_SEED));
        }
        Map<Long, TreeSet<Integer>> out = new TreeMap<>();
        if (plan.liveCovered.isEmpty()) {
            return out;
        }
        long maxBytes = Long.parseLong(session.conf().get("spark.indexeddf.cache.maxBytes",
            String.valueOf(IndexSegments.DEFAULT_MAX_BYTES)));
        for (IndexLog.IndexFile f : index.files) {
            List<Integer> hashes = hashesByBucket.get(f.bucket);
            if (hashes == null || !coversAny(f, plan.liveCovered)) {
                continue;
            }
            IndexSegments.Segment seg = IndexSegments.segment(session,
                new org.apache.hadoop.fs.Path(root, f.path), f.numEntries, conf, maxBytes);
            for (int h : hashes) {
                seg.probe(h, (fileId, row) -> {
                    if (plan.liveCovered.contains(fileId)) {
                        out.computeIfAbsent(fileId, x -> new TreeSet<>()).add(row);
                    }
                });
            }
        }
        return out;
    }

    private static boolean coversAny(IndexLog.IndexFile f, Set<Long> live) {
        for (long id : f.fileIds) {
            if (live.contains(id)) {
                return true;
            }
        }
        return false;
    }

    /** The conjuncts Parquet can use to skip row groups of scanned files. */
    private static Seq<org.apache.spark.sql.sources.Filter> pushed(Expression condition) {
        List<org.apache.spark.sql.sources.Filter> out = new ArrayList<>();
        for (Expression c : conjuncts(condition)) {
            Option<org.apache.spark.sql.sources.Filter> f = DataSourceStrategy$.MODULE$.translateFilter(c, false);
            if (f.isDefined()) {
                out.add(f.get());
            }
        }
        return CollectionConverters.asScala(out).toList();
    }
}

