package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;
import io.indexeddf.spark.exec.LookupPlanner;
import io.indexeddf.spark.exec.LookupReader;
import io.indexeddf.spark.exec.PackedRows;
import io.indexeddf.spark.exec.ProbeRows;
import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.plans.Inner$;
import org.apache.spark.sql.catalyst.plans.JoinType;
import org.apache.spark.sql.catalyst.plans.LeftAnti$;
import org.apache.spark.sql.catalyst.plans.LeftOuter$;
import org.apache.spark.sql.catalyst.plans.LeftSemi$;
import org.apache.spark.sql.catalyst.plans.RightOuter$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Plain Spark joins through the index (runtime filtering): {@code
 * spark.read.format("indexeddf").load(p).join(probe, "k")} reads only the rows of the keys the
 * probe holds, without {@code t.join}.
 *
 * <p>When one side of an equi-join is an indexeddf table, some index of it has only join
 * columns, and the other side is small (at most {@code spark.indexeddf.indexedJoin.maxProbeBytes}
 * by Spark's size estimate, by default Spark's broadcast threshold, or marked for broadcast
 * by a hint; and at most {@code .maxProbeRows} rows), the rule runs that side once, as
 * a broadcast join would, and answers the table's side as an index lookup of the distinct keys
 * found ({@link DriverLookup#answer}: on the driver with no job, or tasks that read only the
 * candidate row groups). The join stays Spark's, over the collected rows (a
 * {@link LocalRelation}), so every join condition, type and null rule is Spark's own; the
 * table's side only loses rows no key can match, so the rule applies only where unmatched
 * table rows are dropped (inner and semi joins; the table as the right side of a left outer
 * or anti join, as the left side of a right outer join). Where the lookup would read too much
 * ({@code lookup.maxReadFraction}, docs/spark.md), the table's side stays Spark's scan,
 * without the bucketing that a broadcast join does not use.
 *
 * <p>The probe side runs while the query is optimized, once per query plan ({@link ProbeRows}:
 * a small Parquet scan is read in this JVM with no job): a DataFrame joined once and collected
 * many times reuses the rows of its first run, as it reuses the table version it loaded.
 */
public final class IndexedJoin extends Rule<LogicalPlan> {
    static final String CONF = "spark.indexeddf.indexedJoin.";

    private final SparkSession session;
    private final DriverLookup lookup;
    /**
     * Marks a probe side already tried and left as it is (the optimizer applies its rules
     * until nothing changes, so the rule sees the same join again): never run twice. A tag on
     * the plan node, not a set of plans: comparing plans would hash every collected row.
     */
    private static final TreeNodeTag<Object> TRIED = new TreeNodeTag<>("indexeddf.indexedJoin.tried");
    /**
     * Marks a table side whose probe was run and whose lookup was declined: a fresh copy of the
     * relation, so the mark stays with this query's plan. The probe side cannot carry it: later
     * rules wrap the collected rows (the inferred {@code IS NOT NULL} filter) or rebuild them, and
     * without the mark every pass of the optimizer would run the probe and plan the lookup again.
     */
    private static final TreeNodeTag<Object> DECLINED = new TreeNodeTag<>("indexeddf.indexedJoin.declined");

    public IndexedJoin(SparkSession session) {
        this.session = session;
        this.lookup = new DriverLookup(session);
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!Boolean.parseBoolean(conf("enabled", "true"))) {
            return plan;
        }
        return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return p instanceof Join && ((Join) p).condition().isDefined();
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                Join j = (Join) p;
                LogicalPlan out = rewrite(j, true);
                return out != null ? out : (out = rewrite(j, false)) != null ? out : j;
            }
        });
    }

    /**
     * {@code maxProbeBytes}: by default the size up to which Spark broadcasts a join side
     * ({@code spark.sql.autoBroadcastJoinThreshold}; -1 there turns the rule off too).
     */
    private long maxProbeBytes() {
        Option<String> set = session.conf().getOption(CONF + "maxProbeBytes");
        String v = set.isDefined() ? set.get() : null;
        if (v == null) {
            return ((org.apache.spark.sql.classic.SparkSession) session).sessionState().conf().autoBroadcastJoinThreshold();
        }
        return v.trim().startsWith("-") ? -1 : org.apache.spark.network.util.JavaUtils.byteStringAsBytes(v.trim());
    }

    private String conf(String key, String dflt) {
        return session.conf().get(CONF + key, dflt);
    }

    /** The table's side of a join as the optimizer leaves it: [Project] [Filter] relation. */
    private static final class TableSide {
        final Project project;
        final Filter filter;
        final LogicalPlan relation;
        final Snapshot snapshot;

        private TableSide(Project project, Filter filter, LogicalPlan relation, Snapshot snapshot) {
            this.project = project;
            this.filter = filter;
            this.relation = relation;
            this.snapshot = snapshot;
        }

        /**
         * This side over a copy of its relation marked {@link #DECLINED}. {@code unbucketed}: the
         * copy reads the same files without the bucketing, as the small side is broadcast and one
         * task per bucket would only add tasks (Spark keeps a bucketed scan under a broadcast join
         * whenever an operator above needs a distribution, and whenever its bucket pruning ran);
         * else the copy equals the relation in every way.
         */
        LogicalPlan declined(boolean unbucketed) {
            LogicalRelation lr = (LogicalRelation) relation;
            LogicalRelation copy = unbucketed ? TableRelation.unbucketed(lr)
                : lr.copy(lr.relation(), lr.output(), lr.catalogTable(), lr.isStreaming(), lr.stream());
            copy.setTagValue(DECLINED, Boolean.TRUE);
            return over(copy);
        }

        boolean wasDeclined() {
            return relation.getTagValue(DECLINED).isDefined();
        }

        private LogicalPlan over(LogicalPlan out) {
            if (filter != null) {
                out = new Filter(filter.condition(), out);
            }
            return project != null ? new Project(project.projectList(), out) : out;
        }

        static TableSide of(LogicalPlan p) {
            Project project = p instanceof Project ? (Project) p : null;
            LogicalPlan n = project != null ? project.child() : p;
            Filter filter = n instanceof Filter ? (Filter) n : null;
            n = filter != null ? filter.child() : n;
            Snapshot s = DriverLookup.snapshotOf(n);
            return s == null ? null : new TableSide(project, filter, n, s);
        }
    }

    /** The join with its {@code tableLeft} side answered through the index, or null. */
    private LogicalPlan rewrite(Join j, boolean tableLeft) {
        LogicalPlan table = tableLeft ? j.left() : j.right();
        LogicalPlan other = tableLeft ? j.right() : j.left();
        TableSide side = TableSide.of(table);
        if (side == null || side.wasDeclined() || !dropsUnmatched(j.joinType(), tableLeft)
                || other.getTagValue(TRIED).isDefined()
                || other.isStreaming() || !other.deterministic()) {
            return null;
        }
        List<Attribute> columns = CollectionConverters.asJava(side.relation.output());
        Map<Attribute, List<ProbeKey>> keys = keyPairs(j.condition().get(), columns, other);
        if (keys.isEmpty() || !indexOn(side.snapshot, keys.keySet())) {
            return null;
        }
        boolean hinted = broadcastHint(tableLeft ? j.hint().rightHint() : j.hint().leftHint());
        if (!hinted && other.stats().sizeInBytes().compareTo(scala.math.BigInt.apply(maxProbeBytes())) > 0) {
            other.setTagValue(TRIED, Boolean.TRUE);
            return null;
        }
        LocalRelation probe = ProbeRows.collect(session, other, Integer.parseInt(conf("maxProbeRows", "100000")),
            Math.max(0, maxProbeBytes()));
        if (probe == null) {  // too many rows: Spark's join as it was, never run again by this rule
            LogicalPlan declined = side.declined(false);
            return tableLeft ? j.copy(declined, other, j.joinType(), j.condition(), j.hint())
                : j.copy(other, declined, j.joinType(), j.condition(), j.hint());
        }
        Expression keyFilter = keyFilter(keys, probe);
        Filter filter = new Filter(side.filter == null ? keyFilter : new And(side.filter.condition(), keyFilter),
            side.relation);
        LogicalPlan answered = lookup.answer(filter, side.project);
        if (answered == null) {  // the index reads too much for these keys: Spark's scan joins them
            // Unbucketed only where Spark can broadcast the probe: a MERGE's outer join keeps the
            // source's rows, so Spark joins it by a shuffle, and a bucketed table then shuffles
            // only the source.
            answered = side.declined(j.hint().isEmpty() && buildsOther(j.joinType(), tableLeft));
        } else {
            if (answered instanceof LocalRelation && streamsTable(j.joinType(), tableLeft, (LocalRelation) answered, probe)) {
                answered = PackedRows.of(session, (LocalRelation) answered);
            }
            if (side.project != null) {
                answered = new Project(side.project.projectList(), answered);
            }
        }
        return tableLeft ? j.copy(answered, probe, j.joinType(), j.condition(), j.hint())
            : j.copy(probe, answered, j.joinType(), j.condition(), j.hint());
    }

    /** Whether the user marked the side small ({@code broadcast(df)}, {@code /*+ BROADCAST *\/}). */
    private static boolean broadcastHint(Option<org.apache.spark.sql.catalyst.plans.logical.HintInfo> hint) {
        return hint.isDefined() && hint.get().strategy().isDefined()
            && hint.get().strategy().get() == org.apache.spark.sql.catalyst.plans.logical.BROADCAST$.MODULE$;
    }

    /**
     * Whether the join's tasks will stream the table's answered rows (the other side being the
     * one Spark builds or broadcasts), and there are enough of them that shipping them packed
     * ({@link PackedRows}) beats a local relation's one object a row. Where the table's side is
     * the one built (the join type says so, or it is the smaller side of an inner join), a local
     * relation is collected with no job and stays one.
     */
    private static boolean streamsTable(JoinType t, boolean tableLeft, LocalRelation answered, LocalRelation probe) {
        if (answered.data().size() < PackedRows.MIN_ROWS_A_PART) {
            return false;
        }
        if (t == LeftSemi$.MODULE$) {
            return tableLeft;
        }
        return t == Inner$.MODULE$
            && answered.computeStats().sizeInBytes().compareTo(probe.computeStats().sizeInBytes()) > 0;
    }

    /** Whether Spark may build (broadcast) the side that is not the table's in a join of this
     * type: an outer, semi or anti join builds only the side whose unmatched rows it drops. */
    private static boolean buildsOther(JoinType t, boolean tableLeft) {
        if (t == Inner$.MODULE$) {
            return true;
        }
        return t == RightOuter$.MODULE$ ? !tableLeft : tableLeft;
    }

    /** Whether a join of this type drops the table side's rows that match nothing. */
    private static boolean dropsUnmatched(JoinType t, boolean tableLeft) {
        if (t == Inner$.MODULE$ || t == LeftSemi$.MODULE$) {
            return true;
        }
        if (t == LeftOuter$.MODULE$ || t == LeftAnti$.MODULE$) {
            return !tableLeft;
        }
        return t == RightOuter$.MODULE$ && tableLeft;
    }

    /** An expression of the other side a table column must equal; with {@code <=>}, nulls match too. */
    private record ProbeKey(Expression value, boolean nullSafe) {
    }

    /**
     * Table column -> the other side's expressions it must equal, from the condition's
     * conjuncts {@code column = expr} (or {@code <=>}) with a bare table column on one side and
     * only the other side's columns on the other.
     */
    private static Map<Attribute, List<ProbeKey>> keyPairs(Expression condition, List<Attribute> columns,
                                                              LogicalPlan other) {
        Map<Attribute, List<ProbeKey>> out = new LinkedHashMap<>();
        for (Expression c : LookupPlanner.conjuncts(condition)) {
            if (!(c instanceof EqualTo || c instanceof EqualNullSafe)) {
                continue;
            }
            for (int side = 0; side < 2; side++) {
                Expression mine = c.children().apply(side);
                Expression theirs = c.children().apply(1 - side);
                int at = LookupPlanner.indexOf(mine, columns);
                Attribute column = at < 0 ? null : columns.get(at);
                if (column != null && !theirs.references().isEmpty()
                        && theirs.references().subsetOf(other.outputSet())
                        && theirs.dataType().sameType(column.dataType())) {
                    out.computeIfAbsent(column, k -> new ArrayList<>())
                        .add(new ProbeKey(theirs, c instanceof EqualNullSafe));
                    break;
                }
            }
        }
        return out;
    }

    /** Whether some index of the table has only {@code keys} columns (else no lookup can serve). */
    private static boolean indexOn(Snapshot snapshot, Set<Attribute> keys) {
        Set<String> names = new LinkedHashSet<>();
        for (Attribute a : keys) {
            names.add(a.name());
        }
        List<Map<String, IndexLog.Entry>> states = new ArrayList<>();
        if (snapshot.indexes != null) {
            states.add(snapshot.indexes);
        }
        if (snapshot.newestIndexes() != null && snapshot.newestIndexes().get() != null) {
            states.add(snapshot.newestIndexes().get());
        }
        for (Map<String, IndexLog.Entry> s : states) {
            for (IndexLog.Entry e : s.values()) {
                if (e.readable() && names.containsAll(e.columns)) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The filter that keeps the table's rows some probe row can match: per key column, IN the
     * distinct non-null values of its expressions over the probe rows (or NULL too, for
     * {@code <=>}).
     */
    private static Expression keyFilter(Map<Attribute, List<ProbeKey>> keys, LocalRelation probe) {
        List<Attribute> probeColumns = CollectionConverters.asJava(probe.output());
        List<InternalRow> rows = CollectionConverters.asJava(probe.data());
        Expression out = null;
        for (Map.Entry<Attribute, List<ProbeKey>> k : keys.entrySet()) {
            for (ProbeKey key : k.getValue()) {
                boolean nullSafe = key.nullSafe();
                Expression value = LookupReader.bound(key.value(), probeColumns);
                Set<Object> values = new java.util.HashSet<>();
                boolean sawNull = false;
                for (InternalRow r : rows) {
                    Object v = value.eval(r);
                    if (v == null) {
                        sawNull = true;
                    } else {
                        values.add(v);
                    }
                }
                Expression f = new InSet(k.getKey(), CollectionConverters.asScala(values).toSet());
                if (nullSafe && sawNull) {
                    f = new Or(f, new IsNull(k.getKey()));
                }
                out = out == null ? f : new And(out, f);
            }
        }
        return out;
    }
}
