package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.LookupLimits;
import io.indexeddf.log.AddFile;
import io.indexeddf.log.Snapshot;
import io.indexeddf.spark.exec.IndexSegments;
import io.indexeddf.spark.exec.LookupPlanner;
import io.indexeddf.spark.exec.LookupRDD;
import io.indexeddf.spark.exec.LookupReader;
import io.indexeddf.spark.exec.ProbeRDD;
import io.indexeddf.spark.exec.RowGroupReader;
import io.indexeddf.spark.exec.RowMetadata;
import io.indexeddf.spark.exec.SnapshotFileIndex;
import io.indexeddf.spark.exec.TableRelation;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.StructType;
import scala.Option;
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
 * <p>More keys than {@code spark.indexeddf.driverLookup.maxKeys} run as Spark tasks that
 * probe the index themselves, in the executors ({@link ProbeRDD}). Few keys past the driver's
 * other limits (more row groups than {@code .maxRowGroups}, more matching rows than {@code
 * .maxRows}, more unindexed bytes to scan than {@code .maxScanBytes}) run as tasks that read
 * what the driver's probe found ({@link LookupRDD}). Spark's bucket-pruned Parquet scan
 * answers instead when the lookup would read more than {@code
 * spark.indexeddf.lookup.maxReadFraction} of the version's live bytes (the driver's probe
 * counts them; for probing tasks, {@link ReadEstimate}; a table of at most {@code
 * maxScanBytes} is cheap to read on the driver either way); when reading the index fails;
 * and when no index is usable (state, staleness, columns not fixed, floating-point index
 * columns, an index file deleted since the version read, the log's index state unknown).
 * Such a scan of a long IN list is read unbucketed ({@link #withoutWastedPruning}).
 */
public final class DriverLookup extends Rule<LogicalPlan> {
    static final String CONF = LookupLimits.CONF;

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(DriverLookup.class);

    private final SparkSession session;

    public DriverLookup(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!Boolean.parseBoolean(conf("enabled", "true"))
                && !Boolean.parseBoolean(session.conf().get("spark.indexeddf.lookupTasks.enabled", "true"))) {
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
                    answered = withoutWastedPruning(filter);  // Spark's scan answers: spare it a useless cost
                }
                if (answered == null) {
                    return p;
                }
                return project == null ? answered : new Project(project.projectList(), answered);
            }
        });
    }

    /**
     * The relation's Spark {@code _metadata} column among {@code output}, or null (a change names
     * its rows by {@code _metadata.indexeddf_file_id} and {@code row_index}).
     */
    static Attribute metadataColumn(List<Attribute> output) {
        for (Attribute a : output) {
            if (org.apache.spark.sql.catalyst.expressions.FileSourceMetadataAttribute$.MODULE$.isValid(a.metadata())) {
                return a;
            }
        }
        return null;
    }

    /**
     * Values of the bucket column from which Spark's bucket pruning of a scan costs more than
     * the bucketing can save when they touch every bucket: it builds a projection for each
     * value ({@code BucketingUtils.getBucketIdFromValue}), about 0.2 ms each (1 s of planning
     * for an IN of 5,000 keys).
     */
    static final int WASTED_PRUNING_VALUES = 1000;

    /**
     * The filter over the same relation without its bucketing, when the filter fixes the
     * bucket column to at least {@link #WASTED_PRUNING_VALUES} values that fall in every
     * bucket (pruning would keep every file and cost seconds); else null. Operators above
     * that need the table's partitioning then shuffle the filtered rows.
     */
    static LogicalPlan withoutWastedPruning(Filter filter) {
        LogicalRelation lr = (LogicalRelation) filter.child();
        HadoopFsRelation r = (HadoopFsRelation) lr.relation();
        if (r.bucketSpec().isEmpty() || r.bucketSpec().get().bucketColumnNames().size() != 1) {
            return null;
        }
        int numBuckets = r.bucketSpec().get().numBuckets();
        List<String> column = List.of(r.bucketSpec().get().bucketColumnNames().head());
        List<Object> values = LookupPlanner.fixedValues(filter.condition(),
            new ArrayList<>(CollectionConverters.asJava(lr.output()))).get(column.get(0));
        if (values == null || values.size() < WASTED_PRUNING_VALUES) {
            return null;
        }
        List<Object[]> keys = new ArrayList<>();
        for (Object v : values) {
            keys.add(new Object[] {v});
        }
        return LookupPlanner.buckets(keys, column, r.dataSchema(), numBuckets).size() < numBuckets ? null
            : new Filter(filter.condition(), TableRelation.unbucketed(lr));
    }

    private String conf(String key, String dflt) {
        return session.conf().get(CONF + key, dflt);
    }

    static Snapshot snapshotOf(LogicalPlan p) {
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
    LogicalPlan answer(Filter filter, Project project) {
        Expression condition = filter.condition();
        if (!condition.deterministic() || SubqueryExpression$.MODULE$.hasSubquery(condition)) {
            return null;
        }
        LogicalRelation lr = (LogicalRelation) filter.child();
        HadoopFsRelation rel = (HadoopFsRelation) lr.relation();
        Snapshot snapshot = snapshotOf(lr);
        // A partitioned table's files lack its partition columns: read as nullable, then
        // filled from each file's partition values (LookupReader).
        StructType schema = io.indexeddf.spark.exec.Partitions.readable(rel.dataSchema(), snapshot);
        List<Attribute> output = new ArrayList<>(CollectionConverters.asJava(lr.output()));
        // Spark's _metadata (a change's target rows name their file and ordinal by it): the
        // lookup gives it after the data columns, from the file and the index's row ordinal.
        Attribute metaColumn = metadataColumn(output);
        if (metaColumn != null) {
            output.remove(metaColumn);
            if (condition.references().contains(metaColumn)) {
                return null;
            }
        }
        if ((snapshot.indexes == null && snapshot.newestIndexes() == null) || output.size() != schema.size()) {
            return null;
        }

        LookupLimits limits = new LookupLimits(session);
        Map<String, List<Object>> fixed = LookupPlanner.fixedValues(condition, output);
        LookupPlanner.Plan plan = LookupPlanner.plan(snapshot, schema, fixed, limits);
        if (plan == null) {
            return null;
        }
        io.indexeddf.spark.exec.Partitions.prune(plan.scan, condition, snapshot, schema);
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
        RowMetadata meta = null;
        if (metaColumn != null && (project == null || project.references().contains(metaColumn))) {
            meta = RowMetadata.of((StructType) metaColumn.dataType(), required);
            if (meta == null || !plan.scan.isEmpty()) {
                return null;  // unindexed files are Spark's to scan with their _metadata
            }
            read.add(metaColumn);
        }
        Configuration hadoopConf = hadoopConf(session);
        boolean local = ((org.apache.spark.sql.classic.SparkSession) session).sparkContext().isLocal();
        try {
            if (plan.manyKeys && !(limits.rowCache && local && limits.driver)) {
                return probeTasks(plan, snapshot, schema, required, condition, read, meta, hadoopConf, limits);
            }
            LookupReader.Pieces pieces = LookupReader.pieces(session, plan, snapshot, schema, hadoopConf, limits);
            long live = liveBytes(snapshot);
            // The index pays when it skips most of the table: reading most of it through the
            // index is slower than Spark's parallel scan (a small table is cheap either way).
            // With the row cache, the rows read stay decoded in memory and later lookups jump
            // to them: the index always pays then.
            boolean skipsMost = limits.rowCache || pieces.bytes <= limits.maxReadFraction * live;
            if (!skipsMost && live > limits.maxScanBytes) {
                return null;
            }
            // The key and row-group limits bound the driver's decoding: rows all in the row
            // cache cost the driver no decoding, only their copies (maxRows still bounds those).
            // In local mode the driver's JVM is the only executor, so decoding here (on as many
            // threads as cores) costs what tasks would and fills the same row cache; answering
            // here from the first run keeps one plan for every run of a repeated query, instead
            // of tasks first and a different plan (compiled anew) once the cache is warm.
            RowGroupReader groups = RowGroupReader.of(session, schema, required, hadoopConf);
            boolean cached = limits.rowCache && (local || groups.holdsAll(pieces.rowGroups));
            if (limits.driver && (cached || (!plan.manyKeys && pieces.groupCount <= limits.maxRowGroups))
                    && pieces.candidateRows <= limits.maxRows && pieces.scanBytes <= limits.maxScanBytes) {
                List<InternalRow> rows = LookupReader.readHere(session, pieces, groups, schema, required, condition,
                    read, meta, hadoopConf, limits.maxRows);
                if (rows != null) {
                    // The rows satisfy the whole condition already: no Filter stays above them.
                    return LookupRows.relation(read, rows);
                }
            }
            return skipsMost && limits.tasks
                ? tasks(pieces, groups, schema, required, condition, read, meta, hadoopConf) : null;
        } catch (FileNotFoundException e) {
            return null;  // an index file vacuumed since this version: Spark's scan answers
        } catch (IOException | RuntimeException e) {
            // The data files are the truth: whatever went wrong with the index, Spark's scan of
            // them answers right, so a lookup problem never fails the query.
            LOG.warn("indexeddf: the index lookup on " + snapshot.root + " failed (" + e
                + "); Spark's scan answers instead", e);
            return null;
        }
    }

    /** Per session: the SQL settings and Hadoop entries a configuration was built with, and it. */
    private static final Map<String, Object[]> HADOOP_CONFS = java.util.Collections.synchronizedMap(
        new java.util.LinkedHashMap<String, Object[]>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Object[]> e) {
                return size() > 8;
            }
        });

    /**
     * The session's Hadoop configuration ({@code newHadoopConf}: the context's plus the session's
     * settings), built again only when the session's SQL settings or the number of the context's
     * Hadoop entries changed: building one copies about a thousand entries (milliseconds a
     * query). Callers only read it.
     */
    static Configuration hadoopConf(SparkSession session) {
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        scala.collection.immutable.Map<String, String> settings = classic.sessionState().conf().getAllConfs();
        int entries = classic.sparkContext().hadoopConfiguration().size();
        String key = classic.sessionUUID();
        Object[] held = HADOOP_CONFS.get(key);
        if (held != null && held[0].equals(settings) && (int) held[1] == entries) {
            return (Configuration) held[2];
        }
        Configuration conf = classic.sessionState().newHadoopConf();
        HADOOP_CONFS.put(key, new Object[] {settings, entries, conf});
        return conf;
    }

    private static long liveBytes(Snapshot snapshot) {
        long live = 0;
        for (AddFile a : snapshot.files) {
            live += a.size;
        }
        return live;
    }

    /**
     * A lookup of many keys as Spark tasks that probe the index themselves ({@link ProbeRDD}),
     * or null (Spark's scan) when it is expected to read more than {@code maxReadFraction} of
     * the live bytes ({@link ReadEstimate}: the driver probes nothing to know).
     */
    private LogicalPlan probeTasks(LookupPlanner.Plan plan, Snapshot snapshot, StructType schema,
                                   StructType required, Expression condition, List<Attribute> read,
                                   RowMetadata meta, Configuration conf, LookupLimits limits) throws IOException {
        if (!limits.tasks
                || !(limits.rowCache
                     || ReadEstimate.bytes(plan, snapshot, schema, conf) <= limits.maxReadFraction * liveBytes(snapshot))) {
            return null;
        }
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        int n = classic.sparkContext().defaultParallelism() * 2;
        ProbeRDD rdd = new ProbeRDD(classic.sparkContext(), ProbeRDD.shares(plan, snapshot, schema, n),
            ProbeRDD.scanShares(plan.scan, n), IndexSegments.entryReader(session, conf),
            // unset: each executor's own default (a quarter of its heap), not the driver's
            session.conf().contains("spark.indexeddf.cache.maxBytes") ? limits.cacheMaxBytes : -1,
            RowGroupReader.of(session, schema, required, conf),
            plan.scan.isEmpty() ? null : LookupReader.scanReader(session, schema, required, condition, conf,
                plan.scan.stream().anyMatch(a -> a.deletionVector != null)),
            LookupReader.bound(condition, read), meta);
        return relation(rdd, read);
    }

    /** The rows of {@code rdd} as a plan (the columns {@code read}, no ordering or partitioning claimed). */
    private LogicalPlan relation(RDD<InternalRow> rdd, List<Attribute> read) {
        Seq<org.apache.spark.sql.catalyst.expressions.SortOrder> unordered =
            CollectionConverters.asScala(new ArrayList<org.apache.spark.sql.catalyst.expressions.SortOrder>()).toList();
        return new org.apache.spark.sql.execution.LogicalRDD(CollectionConverters.asScala(read).toList(), rdd,
            new org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning(0), unordered, false, Option.empty(),
            (org.apache.spark.sql.classic.SparkSession) session, Option.empty(), Option.empty(), false);
    }

    /** The lookup as Spark tasks that read only the candidate row groups (and the unindexed files). */
    private LogicalPlan tasks(LookupReader.Pieces pieces, RowGroupReader groups, StructType schema, StructType required,
                              Expression condition, List<Attribute> read, RowMetadata meta, Configuration conf) {
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        LookupRDD rdd = new LookupRDD(classic.sparkContext(), pieces, classic.sparkContext().defaultParallelism() * 2,
            groups,
            pieces.scans.isEmpty() ? null
                : LookupReader.scanReader(session, schema, required, condition, conf, pieces.dvScans),
            LookupReader.bound(condition, read), meta);
        return relation(rdd, read);
    }
}
