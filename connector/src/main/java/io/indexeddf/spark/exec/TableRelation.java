package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.catalyst.catalog.BucketSpec;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;

/**
 * The relation Spark reads for a version of a table: the provider's read path, the path rule
 * of {@code indexeddf.`/path`} and SQL inserts all come here. It replays the table's Delta
 * log ({@link DeltaLog}) and hands Spark a {@link HadoopFsRelation} over exactly the
 * snapshot's live files ({@link SnapshotFileIndex}): Spark's own vectorized Parquet reads with
 * column pruning and filter pushdown (rows deleted by deletion vectors dropped by
 * {@link DeletionVectorFormat}), and, when every file carries its bucket, the table's
 * bucketing ({@link BucketSpec}) so bucket pruning and bucketed joins work. Also the options
 * and table locations the provider takes (Hadoop schemes for fsspec URLs). A read with
 * {@code readChangeFeed} is the table's change data feed instead ({@link ChangeFeedRelation}).
 */
public final class TableRelation {
    /** The format name ({@code IndexedDFProvider.shortName()}). */
    public static final String NAME = "indexeddf";
    /** The name the Python data source is registered under next to the provider. */
    public static final String PYTHON_NAME = "indexeddf_python";
    /** The provider's class, as a catalog entry may name it ({@code USING io.indexeddf.spark.IndexedDFProvider}). */
    public static final String PROVIDER_CLASS = "io.indexeddf.spark.IndexedDFProvider";

    public static final List<String> READ_OPTIONS =
        Arrays.asList("path", "storageOptions", "versionAsOf", "timestampAsOf", "maxPartitionBytes",
            // A catalog table made by CREATE TABLE ... OPTIONS (...) AS SELECT or saveAsTable hands
            // the options that created it to every read; the log decides these, reads ignore them.
            "indexColumns", "numBuckets", "name", "description", "tableProperties", "__partition_columns",
            // Delta's change data feed (ChangeFeedRelation).
            io.indexeddf.log.Spec.CHANGE_FEED_OPTION, io.indexeddf.log.Spec.CHANGE_FEED_OPTION_ALIAS,
            "startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp");
    private static final Pattern BUCKET_SUFFIX = Pattern.compile("_(\\d+)\\.parquet$");
    private static final Pattern URL = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$");
    private static final Map<String, String> HADOOP_SCHEMES = Map.of(
        "s3", "s3a", "s3a", "s3a", "gs", "gs", "gcs", "gs", "hdfs", "hdfs", "abfs", "abfs", "abfss", "abfss",
        "file", "file");

    private TableRelation() {
    }

    /** Whether a catalog entry's provider ({@code USING ...}) is this connector. */
    public static boolean isProvider(Option<String> provider) {
        return provider.isDefined() && (NAME.equalsIgnoreCase(provider.get()) || PROVIDER_CLASS.equals(provider.get()));
    }

    /**
     * The relation over the version the read options name ({@code path}, {@code versionAsOf} /
     * {@code timestampAsOf}), always with the table's schema as its log has it. {@code given},
     * when not null, is a schema the read was handed: {@code .schema(...)} of a
     * {@code spark.read}, or the copy a catalog entry keeps (Spark hands it to every read of the
     * entry). When it is not the table's (nullability aside: every column a Spark write makes is
     * nullable in the log), the relation's file index says so
     * ({@link SnapshotFileIndex#refusedSchema()}) and the analyzer rule
     * {@code CatalogTables.SchemaFromLog} refuses the read with {@code SchemaMismatchError},
     * unless a catalog entry made it: an entry's copy goes stale whenever another writer changes
     * the schema, and never stands between a query and the log.
     */
    public static BaseRelation read(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters,
                                    StructType given) {
        Map<String, String> opts = canonical(parameters, READ_OPTIONS, "read.format('indexeddf')", true);
        org.apache.spark.sql.classic.SparkSession session = classic(sqlContext);
        Configuration conf = session.sessionState().newHadoopConf();
        Path root = tableRoot(requirePath(opts), conf);
        if (ChangeFeedRelation.requested(opts)) {
            return ChangeFeedRelation.read(session, root, conf, opts);
        }
        for (String range : ChangeFeedRelation.RANGE_OPTIONS) {
            if (opts.get(range) != null) {
                throw IndexedDFException.option("option " + range + " bounds a read of the change data feed: add "
                    + "option('" + io.indexeddf.log.Spec.CHANGE_FEED_OPTION + "', 'true') to read it, or drop " + range
                    + " (versionAsOf / timestampAsOf read one version of the table)");
            }
        }
        DeltaLog log = DeltaLog.open(root, conf);
        Long version = timeTravel(opts, log);
        Snapshot snapshot = log.snapshot(version);
        StructType schema = ColumnMapping.tableSchema(snapshot);
        Option<BucketSpec> bucketing = bucketSpec(snapshot, schema);
        scala.collection.immutable.Map<String, String> noOptions = scala.collection.immutable.Map$.MODULE$.empty();
        // Versions without deletion vectors read exactly as Spark reads Parquet (columnar batches).
        // A column-mapped table's files are read through DeletionVectorFormat too, which renames
        // the columns to their physical names (a file without a DV is read as it is).
        ParquetFileFormat format = SnapshotFileIndex.hasDeletionVectors(snapshot) || ColumnMapping.mapped(schema)
            ? new DeletionVectorFormat() : new TableParquetFormat();
        // A partitioned table's data schema keeps its partition columns where the table has
        // them: Spark then reads those columns from the partition values and keeps the
        // table's column order (HadoopFsRelation merges overlapping columns in place).
        SnapshotFileIndex files = new SnapshotFileIndex(snapshot, schema);
        if (given != null && !sameSchema(given, schema)) {
            files.refuseSchema(schemaMismatch(given, schema, root, snapshot.version));
        }
        return new HadoopFsRelation(files, files.partitionSchema(), schema, bucketing, format, noOptions, session);
    }

    /**
     * The relation over {@code files} (live files some commits added, each with its deletion
     * vector), read as {@code snapshot}'s table: its schema, partitioning and column mapping.
     * A stream's micro-batch ({@code io.indexeddf.spark.IndexedDFSource}); not bucketed (a
     * batch holds any few files of any buckets).
     */
    public static HadoopFsRelation files(org.apache.spark.sql.classic.SparkSession session, Snapshot snapshot,
                                         List<AddFile> files) {
        StructType schema = ColumnMapping.tableSchema(snapshot);
        boolean vectors = false;
        for (AddFile a : files) {
            vectors |= a.deletionVector != null;
        }
        ParquetFileFormat format = vectors || ColumnMapping.mapped(schema)
            ? new DeletionVectorFormat() : new TableParquetFormat();
        SnapshotFileIndex index = new SnapshotFileIndex(snapshot, schema, files);
        scala.collection.immutable.Map<String, String> noOptions = scala.collection.immutable.Map$.MODULE$.empty();
        return new HadoopFsRelation(index, index.partitionSchema(), schema, Option.empty(), format, noOptions,
            session);
    }

    private static Long timeTravel(Map<String, String> opts, DeltaLog log) {
        String v = opts.get("versionAsOf");
        String ts = opts.get("timestampAsOf");
        boolean hasV = v != null && !v.trim().isEmpty();
        boolean hasTs = ts != null && !ts.trim().isEmpty();
        if (hasV && hasTs) {
            throw IndexedDFException.option("give versionAsOf or timestampAsOf, not both");
        }
        if (hasTs) {
            return log.versionAt(ts);
        }
        if (!hasV) {
            return null;
        }
        try {
            long version = Long.parseLong(v.trim());
            if (version < 0) {
                throw IndexedDFException.option("option versionAsOf must be in >= 0, got " + version);
            }
            return version;
        } catch (NumberFormatException e) {
            throw IndexedDFException.option("option versionAsOf must be an integer, got '" + v + "'");
        }
    }

    /**
     * Whether a given schema is the table's: the same column names, in order, of the same
     * types. Nullability is not compared (the log makes every column a Spark write gives it
     * nullable, whatever the frame said), nor nested fields' metadata (column mapping's, which a
     * catalog entry may hold from an older connector).
     */
    public static boolean sameSchema(StructType given, StructType table) {
        boolean ok = given.fields().length == table.fields().length;
        for (int i = 0; ok && i < given.fields().length; i++) {
            StructField g = given.fields()[i];
            StructField t = table.fields()[i];
            ok = g.name().equals(t.name())
                && ColumnMapping.nullableShape(g.dataType()).equals(ColumnMapping.nullableShape(t.dataType()));
        }
        return ok;
    }

    private static String schemaMismatch(StructType given, StructType table, Path root, long version) {
        return "the schema to read (" + given.simpleString() + ") is not the schema of " + root + " at version "
            + version + " (" + table.simpleString() + "): .schema(...) may only repeat the table's schema; "
            + "load the table without .schema()";
    }

    /** {@code lr} reading the same files without the bucketing (same output attributes). */
    public static LogicalRelation unbucketed(LogicalRelation lr) {
        HadoopFsRelation r = (HadoopFsRelation) lr.relation();
        HadoopFsRelation plain = new HadoopFsRelation(r.location(), r.partitionSchema(), r.dataSchema(),
            Option.empty(), r.fileFormat(), r.options(), r.sparkSession());
        return lr.copy(plain, lr.output(), lr.catalogTable(), lr.isStreaming(), lr.stream());
    }

    /**
     * The table's bucketing, when Spark can be told it: every live file has its bucket and a
     * name ending in {@code _<bucket>.parquet} (where Spark reads a file's bucket from), and no
     * index column is floating point (Spark normalises -0.0 and NaN in join keys; a file's
     * bucket hashes the raw value). When every live file is also in index-column order (the
     * {@code indexeddf.sorted} tag), the index columns are the sort columns too: with
     * {@code spark.sql.legacy.bucketedTableScan.outputOrdering} (which
     * {@code indexeddf.configure} sets) a scan whose buckets are single files reports that
     * ordering, so a merge join on the key sorts only the other side. Spark itself checks
     * the single files; several files in a bucket (appends) just mean Spark sorts.
     */
    public static Option<BucketSpec> bucketSpec(Snapshot snapshot, StructType schema) {
        List<String> columns = snapshot.indexColumns();
        int numBuckets = snapshot.numBuckets();
        for (String c : columns) {
            if (!Arrays.asList(schema.fieldNames()).contains(c)) {
                return Option.empty();
            }
            DataType t = schema.apply(c).dataType();
            if (t instanceof FloatType || t instanceof DoubleType) {
                return Option.empty();
            }
        }
        for (io.indexeddf.log.AddFile a : snapshot.files) {
            if (a.bucket == null || a.bucket < 0 || a.bucket >= numBuckets) {
                return Option.empty();
            }
            Matcher m = BUCKET_SUFFIX.matcher(a.location.getName());
            if (!m.find() || Integer.parseInt(m.group(1)) != a.bucket) {
                return Option.empty();
            }
        }
        boolean sorted = snapshot.files.stream().allMatch(a -> a.sorted);
        Seq<String> sortColumns = CollectionConverters.asScala(sorted ? columns : new ArrayList<String>()).toList();
        return Option.apply(new BucketSpec(numBuckets, CollectionConverters.asScala(columns).toList(), sortColumns));
    }

    public static org.apache.spark.sql.classic.SparkSession classic(SQLContext sqlContext) {
        return (org.apache.spark.sql.classic.SparkSession) sqlContext.sparkSession();
    }

    /** The option {@code path}, refused when absent. */
    public static String requirePath(Map<String, String> opts) {
        String path = opts.get("path");
        if (path == null || path.trim().isEmpty()) {
            throw IndexedDFException.option("indexeddf reads one table location, given by .load(path) or "
                + "option('path', ...); none was given (several paths are not supported)");
        }
        return path;
    }

    /** The table's root as a qualified Hadoop path (s3:// is read as s3a://, gcs:// as gs://). */
    public static Path tableRoot(String url, Configuration conf) {
        String location = url;
        Matcher m = URL.matcher(url);
        if (m.matches()) {
            String scheme = m.group(1).toLowerCase(Locale.ROOT);
            if (scheme.equals("memory") || scheme.equals("memfs")) {
                throw IndexedDFException.option(url + " is in fsspec's in-memory filesystem, which exists only in "
                    + "one Python process; Spark reads and writes in its own processes. Use a local or shared "
                    + "location.");
            }
            String mapped = HADOOP_SCHEMES.getOrDefault(scheme, scheme);
            location = mapped + "://" + m.group(2);
        }
        Path p = new Path(location);
        try {
            return p.getFileSystem(conf).makeQualified(p);
        } catch (org.apache.hadoop.fs.UnsupportedFileSystemException e) {
            throw noFileSystem(url, p, e.getMessage(), e);
        } catch (IOException e) {
            throw IndexedDFException.option("Spark's Hadoop filesystems cannot open " + url + ": " + e.getMessage());
        } catch (RuntimeException e) {
            // Hadoop names a class for s3a:// (and others) that pyspark does not ship: the
            // class lookup fails with ClassNotFoundException wrapped in a RuntimeException.
            for (Throwable c = e; c != null; c = c.getCause()) {
                if (c instanceof ClassNotFoundException) {
                    throw noFileSystem(url, p, c.getMessage(), e);
                }
            }
            throw e;
        }
    }

    /**
     * The session has no Hadoop file system for the table's scheme (s3a:// needs hadoop-aws,
     * which pyspark does not ship): say both ways out, Hadoop's and the Python source's.
     */
    private static IndexedDFException noFileSystem(String url, Path p, String why, Throwable cause) {
        String scheme = p.toUri().getScheme();
        return new IndexedDFException("UnsupportedStorageError", "the connector reads " + url
            + " through Hadoop's file systems, and this session has none for " + scheme + ":// (" + why + "). "
            + "Either put Hadoop's module for it on the session (for s3a:// the hadoop-aws jar of Hadoop "
            + org.apache.hadoop.util.VersionInfo.getVersion() + " and its AWS SDK bundle, in spark.jars) and set "
            + "its fs." + scheme + ".* settings (credentials, endpoint), or read through indexeddf's Python data "
            + "source, which reaches the table with fsspec: spark.read.format(\"" + PYTHON_NAME + "\")"
            + ".option(\"storageOptions\", '{...}').load(\"" + url + "\") (no column pruning, no index "
            + "lookups on the driver). Writes through format(\"indexeddf\") already go through the Python "
            + "writer and take storageOptions.", cause);
    }

    /** Options keyed by canonical names; unknown names refused as the Python source does. */
    public static Map<String, String> canonical(scala.collection.immutable.Map<String, String> parameters, List<String> known,
                                         String what, boolean properties) {
        Map<String, String> canon = new LinkedHashMap<>();
        for (String k : known) {
            canon.put(k.toLowerCase(Locale.ROOT), k);
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : CollectionConverters.asJava(parameters).entrySet()) {
            String low = e.getKey().toLowerCase(Locale.ROOT);
            if (canon.containsKey(low)) {
                out.put(canon.get(low), e.getValue());
            } else if (properties && low.startsWith("indexeddf.")) {
                out.put(e.getKey(), e.getValue());
            } else if (low.equals("paths")) {
                throw IndexedDFException.option(what + " takes one table location, got several: " + e.getValue());
            } else {
                throw IndexedDFException.option("unknown option '" + low + "' for " + what + "; known options: "
                    + String.join(", ", known) + (properties ? ", indexeddf.<table property>" : ""));
            }
        }
        return out;
    }

}
