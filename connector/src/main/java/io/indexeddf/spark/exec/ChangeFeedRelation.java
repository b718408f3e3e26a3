package io.indexeddf.spark.exec;

import io.indexeddf.log.ChangeFeed;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.PrunedFilteredScan;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A read of a table's change data feed ({@code spark.read.format("indexeddf")
 * .option("readChangeFeed", "true").option("startingVersion", a)}, a catalog table read with
 * those options, {@code table_changes}), as delta-spark's {@code DeltaCDFRelation}: the table's
 * columns, then {@code _change_type} (string), {@code _commit_version} (long) and
 * {@code _commit_timestamp} (timestamp), one row per changed row of each commit of the range
 * ({@link ChangeFeed} says which files hold them).
 *
 * <p>The rows are read by Spark's own Parquet scan in its tasks ({@link #plan}): the change data
 * files in one relation (their rows carry {@code _change_type}), the added and removed files in
 * another (their change type a partition value of {@link ChangeFileIndex}), deletion vectors,
 * partition values and column mapping applied as for the table's own reads, the two unioned.
 * A streaming micro-batch is the same plan over the files of its commits. A batch read is a
 * {@link PrunedFilteredScan}, as Delta's is: the columns and the filters Spark hands it go into
 * that plan (a filter on {@code _commit_version} or a partition column skips files; Spark
 * applies every filter again above the scan). A filter that fixes every index column with
 * equalities or IN lists (at most {@code MAX_INDEX_KEYS} keys) reads only the files of the keys'
 * buckets ({@link #ofKeyBuckets}): files carry their bucket (an add's, or a change data file's of
 * one bucket, in the tags), as the Python reader's {@code changes(keys=...)} prunes them.
 */
public final class ChangeFeedRelation extends BaseRelation implements PrunedFilteredScan {
    /** The columns the feed adds to the table's, in their order. */
    public static final StructType FEED_COLUMNS = new StructType()
        .add(Spec.CHANGE_TYPE_COLUMN, DataTypes.StringType, true)
        .add(Spec.COMMIT_VERSION_COLUMN, DataTypes.LongType, true)
        .add(Spec.COMMIT_TIMESTAMP_COLUMN, DataTypes.TimestampType, true);

    /** The read options of the feed's range (Delta's names). */
    public static final List<String> RANGE_OPTIONS =
        List.of("startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp");

    private final org.apache.spark.sql.classic.SparkSession session;
    private final ChangeFeed feed;
    private final StructType schema;

    private ChangeFeedRelation(org.apache.spark.sql.classic.SparkSession session, ChangeFeed feed) {
        this.session = session;
        this.feed = feed;
        this.schema = schemaOf(feed.snapshot);
    }

    /**
     * Whether read options (names in any case) ask for the change data feed
     * ({@code readChangeFeed} or Delta's alias {@code readChangeData}).
     */
    public static boolean requested(Map<String, String> opts) {
        return flag(opts, Spec.CHANGE_FEED_OPTION) || flag(opts, Spec.CHANGE_FEED_OPTION_ALIAS);
    }

    private static boolean flag(Map<String, String> opts, String name) {
        String v = null;
        for (Map.Entry<String, String> e : opts.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                v = e.getValue();
            }
        }
        if (v == null || v.trim().isEmpty()) {
            return false;
        }
        String t = v.trim().toLowerCase(Locale.ROOT);
        if (!t.equals("true") && !t.equals("false")) {
            throw IndexedDFException.option("option " + name + " must be true or false, got '" + v + "'");
        }
        return t.equals("true");
    }

    /** The feed of the table at {@code root} over the range the options give, as a relation. */
    public static ChangeFeedRelation read(org.apache.spark.sql.classic.SparkSession session, Path root,
                                          Configuration conf, Map<String, String> opts) {
        for (String tt : List.of("versionAsOf", "timestampAsOf")) {
            String v = opts.get(tt);
            if (v != null && !v.trim().isEmpty()) {
                throw IndexedDFException.option("a read of the change data feed does not take " + tt + ": give its "
                    + "range with startingVersion / endingVersion (or startingTimestamp / endingTimestamp)");
            }
        }
        ChangeFeed feed = ChangeFeed.read(DeltaLog.open(root, conf), opts.get("startingVersion"),
            opts.get("startingTimestamp"), opts.get("endingVersion"), opts.get("endingTimestamp"));
        return new ChangeFeedRelation(session, feed);
    }

    /** The feed's schema over a snapshot's table: its columns, then {@link #FEED_COLUMNS}. */
    public static StructType schemaOf(Snapshot snapshot) {
        StructType out = ColumnMapping.tableSchema(snapshot);
        for (StructField f : FEED_COLUMNS.fields()) {
            if (out.getFieldIndex(f.name()).isDefined()) {
                throw IndexedDFException.option("the table " + snapshot.root + " has a column " + f.name() + ", a name "
                    + "the change data feed adds to each row: rename the column to read the feed");
            }
            out = out.add(f);
        }
        return out;
    }

    /**
     * The plan that reads {@code changes} as rows of the feed of {@code snapshot}'s table
     * ({@link #schemaOf}); {@code streaming}: a micro-batch's plan.
     */
    public static LogicalPlan plan(org.apache.spark.sql.classic.SparkSession session, Snapshot snapshot,
                                   List<ChangeFeed.Change> changes, boolean streaming) {
        StructType table = ColumnMapping.tableSchema(snapshot);
        StructType tablePartitions = Partitions.schema(snapshot, table);
        List<ChangeFeed.Change> changeData = new ArrayList<>();
        List<ChangeFeed.Change> addsAndRemoves = new ArrayList<>();
        for (ChangeFeed.Change c : changes) {
            (c.isChangeData() ? changeData : addsAndRemoves).add(c);
        }
        List<LogicalPlan> parts = new ArrayList<>();
        if (!addsAndRemoves.isEmpty()) {
            parts.add(scan(session, snapshot, table, tablePartitions, addsAndRemoves, false, streaming));
        }
        if (!changeData.isEmpty()) {
            StructType withType = table.add(FEED_COLUMNS.fields()[0]);
            parts.add(scan(session, snapshot, withType, tablePartitions, changeData, true, streaming));
        }
        if (parts.isEmpty()) {
            List<Attribute> output = new ArrayList<>();
            for (StructField f : schemaOf(snapshot).fields()) {
                output.add(org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttribute(f));
            }
            return new LocalRelation(CollectionConverters.asScala(output).toSeq(),
                CollectionConverters.asScala(new ArrayList<org.apache.spark.sql.catalyst.InternalRow>()).toSeq(),
                streaming, Option.empty());
        }
        if (parts.size() == 1) {
            return parts.get(0);
        }
        return new Union(CollectionConverters.asScala(parts).toSeq(), false, false);
    }

    private static LogicalPlan scan(org.apache.spark.sql.classic.SparkSession session, Snapshot snapshot,
                                    StructType dataSchema, StructType tablePartitions, List<ChangeFeed.Change> changes,
                                    boolean changeData, boolean streaming) {
        boolean vectors = false;
        for (ChangeFeed.Change c : changes) {
            vectors |= c.file.deletionVector != null || c.selected != null;
        }
        ParquetFileFormat format = vectors || ColumnMapping.mapped(dataSchema)
            ? new DeletionVectorFormat() : new ParquetFileFormat();
        ChangeFileIndex index = new ChangeFileIndex(snapshot, tablePartitions, changes, changeData);
        scala.collection.immutable.Map<String, String> noOptions = scala.collection.immutable.Map$.MODULE$.empty();
        HadoopFsRelation relation = new HadoopFsRelation(index, index.partitionSchema(), dataSchema, Option.empty(),
            format, noOptions, session);
        return LogicalRelation$.MODULE$.apply(relation, streaming);
    }

    /** The version range read (the start and end Delta's options resolve to). */
    public ChangeFeed feed() {
        return feed;
    }

    @Override
    public SQLContext sqlContext() {
        return session.sqlContext();
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public boolean needConversion() {
        return false;
    }

    @Override
    public Filter[] unhandledFilters(Filter[] filters) {
        return filters;  // applied in the plan to skip files; Spark applies them again
    }

    @Override
    public RDD<Row> buildScan(String[] requiredColumns, Filter[] filters) {
        org.apache.spark.sql.classic.Dataset<Row> df = org.apache.spark.sql.classic.Dataset.ofRows(session,
            plan(session, feed.snapshot, ofKeyBuckets(feed, schema, filters), false));
        java.util.Set<String> names = new java.util.HashSet<>(java.util.Arrays.asList(schema.fieldNames()));
        for (Filter f : filters) {
            if (!names.containsAll(java.util.Arrays.asList(f.references()))) {
                continue;  // a nested field: Spark's filter above the scan
            }
            Column c = column(f);
            if (c != null) {
                df = df.filter(c);
            }
        }
        Column[] cols = new Column[requiredColumns.length];
        for (int i = 0; i < cols.length; i++) {
            cols[i] = df.col("`" + requiredColumns[i].replace("`", "``") + "`");
        }
        @SuppressWarnings("unchecked")
        RDD<Row> rows = (RDD<Row>) (RDD<?>) df.select(cols).queryExecution().toRdd();
        return rows;
    }

    /**
     * The changes of {@code feed} whose files can hold a row the {@code filters} keep: when they
     * fix every index column to a few values (equalities, {@code <=>}, IN lists, joined by AND),
     * a file of another bucket than the keys' is left out. Files without a bucket (another
     * engine's, or a change data file of several buckets) stay; so does every file when the
     * filters fix no key, or a floating-point index column (-0.0 and NaN hash apart from the
     * values they equal).
     */
    static List<ChangeFeed.Change> ofKeyBuckets(ChangeFeed feed, StructType schema, Filter[] filters) {
        List<String> columns = feed.snapshot.indexColumns();
        Map<String, List<Object>> fixed = new java.util.LinkedHashMap<>();
        for (Filter f : filters) {
            fixedValues(f, fixed);
        }
        if (columns.isEmpty() || !fixed.keySet().containsAll(columns)
                || LookupPlanner.hasFloatColumn(schema, columns)) {
            return feed.changes;
        }
        long keys = 1;
        for (String c : columns) {
            keys *= fixed.get(c).size();
        }
        if (keys > LookupPlanner.MAX_INDEX_KEYS) {
            return feed.changes;
        }
        java.util.Set<Integer> buckets = LookupPlanner.buckets(LookupPlanner.product(columns, fixed), columns, schema,
            feed.snapshot.numBuckets());
        List<ChangeFeed.Change> out = new ArrayList<>();
        for (ChangeFeed.Change c : feed.changes) {
            if (c.file.bucket == null || buckets.contains(c.file.bucket)) {
                out.add(c);
            }
        }
        return out;
    }

    /** Adds to {@code fixed} the values (Catalyst's) that {@code f}'s conjuncts fix a column to. */
    private static void fixedValues(Filter f, Map<String, List<Object>> fixed) {
        String column = null;
        List<Object> values = new ArrayList<>();
        if (f instanceof org.apache.spark.sql.sources.And) {
            fixedValues(((org.apache.spark.sql.sources.And) f).left(), fixed);
            fixedValues(((org.apache.spark.sql.sources.And) f).right(), fixed);
            return;
        } else if (f instanceof org.apache.spark.sql.sources.EqualTo) {
            org.apache.spark.sql.sources.EqualTo e = (org.apache.spark.sql.sources.EqualTo) f;
            column = e.attribute();
            if (e.value() != null) {  // col = NULL is never true: no key
                values.add(catalyst(e.value()));
            }
        } else if (f instanceof org.apache.spark.sql.sources.EqualNullSafe) {
            org.apache.spark.sql.sources.EqualNullSafe e = (org.apache.spark.sql.sources.EqualNullSafe) f;
            column = e.attribute();
            values.add(catalyst(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.In) {
            org.apache.spark.sql.sources.In e = (org.apache.spark.sql.sources.In) f;
            column = e.attribute();
            for (Object v : e.values()) {
                if (v != null) {  // a NULL in an IN list matches nothing
                    values.add(catalyst(v));
                }
            }
        } else if (f instanceof org.apache.spark.sql.sources.IsNull) {
            column = ((org.apache.spark.sql.sources.IsNull) f).attribute();
            values.add(null);
        }
        // Two conjuncts on one column: either value set holds every row the filters keep.
        if (column != null && (!fixed.containsKey(column) || fixed.get(column).size() > values.size())) {
            fixed.put(column, values);
        }
    }

    private static Object catalyst(Object value) {
        return org.apache.spark.sql.catalyst.CatalystTypeConverters$.MODULE$.convertToCatalyst(value);
    }

    /** A data source filter as a column expression, or null when it is none of the common ones. */
    private static Column column(Filter f) {
        if (f instanceof org.apache.spark.sql.sources.EqualTo) {
            org.apache.spark.sql.sources.EqualTo e = (org.apache.spark.sql.sources.EqualTo) f;
            return col(e.attribute()).equalTo(functions.lit(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.GreaterThan) {
            org.apache.spark.sql.sources.GreaterThan e = (org.apache.spark.sql.sources.GreaterThan) f;
            return col(e.attribute()).gt(functions.lit(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.GreaterThanOrEqual) {
            org.apache.spark.sql.sources.GreaterThanOrEqual e = (org.apache.spark.sql.sources.GreaterThanOrEqual) f;
            return col(e.attribute()).geq(functions.lit(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.LessThan) {
            org.apache.spark.sql.sources.LessThan e = (org.apache.spark.sql.sources.LessThan) f;
            return col(e.attribute()).lt(functions.lit(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.LessThanOrEqual) {
            org.apache.spark.sql.sources.LessThanOrEqual e = (org.apache.spark.sql.sources.LessThanOrEqual) f;
            return col(e.attribute()).leq(functions.lit(e.value()));
        } else if (f instanceof org.apache.spark.sql.sources.In) {
            org.apache.spark.sql.sources.In e = (org.apache.spark.sql.sources.In) f;
            Column[] values = new Column[e.values().length];
            for (int i = 0; i < values.length; i++) {
                values[i] = functions.lit(e.values()[i]);
            }
            return col(e.attribute()).isin((Object[]) values);
        } else if (f instanceof org.apache.spark.sql.sources.And) {
            Column l = column(((org.apache.spark.sql.sources.And) f).left());
            Column r = column(((org.apache.spark.sql.sources.And) f).right());
            return l == null ? r : r == null ? l : l.and(r);
        }
        return null;  // left to Spark's filter above the scan
    }

    private static Column col(String attribute) {
        return functions.col("`" + attribute.replace("`", "``") + "`");
    }

    @Override
    public String toString() {
        return "IndexedDFChangeFeed[" + feed.snapshot.root + " v" + feed.start + "-" + feed.end + "]";
    }
}
