package io.indexeddf.spark.plan;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.spark.exec.ColumnMapping;
import io.indexeddf.spark.exec.TableRelation;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.V2TableWithV1Fallback;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.V1Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.SaveMode;
import io.indexeddf.spark.exec.PythonWriter;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An indexeddf table as Spark's catalog API hands it out (delta-spark's {@code DeltaTableV2}):
 * what {@code IndexedDFCatalog.loadTable} returns for a catalog entry with provider
 * {@code indexeddf} and for {@code indexeddf.`/path`}. Its schema, partitioning (identity
 * transforms of the partition columns, then {@code bucket(n, index columns)}) and properties
 * are those of one version of the table's log, replayed when the table is loaded: the catalog
 * entry holds the location (and storage options) only, and never stands between a statement
 * and the log. The version is the newest at load, or the one {@code VERSION AS OF} /
 * {@code TIMESTAMP AS OF} / a {@code @v} suffix names ({@link #at}).
 *
 * <p>Reads never scan it as a V2 table: the analyzer rule {@link V1Fallback} replaces a
 * {@code DataSourceV2Relation} over it with the connector's V1 relation at the same version
 * ({@link #relation}), the one every read rule and change path knows (driver lookups, indexed
 * joins, bucketed scans, deletion vectors, {@link ResolveInsert}, {@link ResolveChanges}).
 */
public final class IndexedDFTable implements V2TableWithV1Fallback, SupportsWrite {
    /**
     * A session catalog that resolves {@code indexeddf.`/path`} itself ({@code IndexedDFCatalog}):
     * with one, {@link ResolvePath} leaves such names to it, so time travel on paths goes
     * through Spark's own resolution.
     */
    public interface PathCatalog {
    }

    /** Delta's time-travel suffixes of a table name: {@code @v<version>} and {@code @yyyyMMddHHmmssSSS} (UTC). */
    private static final java.util.regex.Pattern AT_VERSION = java.util.regex.Pattern.compile("^(.+)@v(\\d+)$");
    private static final java.util.regex.Pattern AT_TIME = java.util.regex.Pattern.compile("^(.+)@(\\d{17})$");

    private final String name;
    private final String path;
    private final String storageOptions;
    private final CatalogTable entry;
    private final Snapshot snapshot;
    private final boolean timeTravel;

    private IndexedDFTable(String name, String path, String storageOptions, CatalogTable entry, Snapshot snapshot,
                           boolean timeTravel) {
        this.name = name;
        this.path = path;
        this.storageOptions = storageOptions;
        this.entry = entry;
        this.snapshot = snapshot;
        this.timeTravel = timeTravel;
    }

    /** The table a catalog entry with provider {@code indexeddf} names, at its newest version. */
    public static IndexedDFTable ofEntry(CatalogTable entry) {
        String path = CatalogTables.location(entry, "reading " + entry.identifier().unquotedString());
        return load(entry.identifier().unquotedString(), path, CatalogTables.storageOptions(entry), entry, null, null);
    }

    /** The table at {@code path} ({@code indexeddf.`/path`}), at its newest version. */
    public static IndexedDFTable ofPath(String path) {
        return load(TableRelation.NAME + ".`" + path + "`", path, null, null, null, null);
    }

    /** Whether a name ends in one of Delta's time-travel suffixes ({@code @v3}, {@code @20240101000000000}). */
    public static boolean hasTimeTravelSuffix(String name) {
        return AT_VERSION.matcher(name).matches() || AT_TIME.matcher(name).matches();
    }

    /** {@code name} without its time-travel suffix. */
    public static String withoutTimeTravelSuffix(String name) {
        java.util.regex.Matcher v = AT_VERSION.matcher(name);
        if (v.matches()) {
            return v.group(1);
        }
        java.util.regex.Matcher t = AT_TIME.matcher(name);
        return t.matches() ? t.group(1) : name;
    }

    /**
     * This table at the version a time-travel suffix of {@code suffixed} names ({@code @v3}:
     * version 3; {@code @yyyyMMddHHmmssSSS}: the newest version committed at or before that
     * UTC time), as Delta reads {@code delta.`/path@v3`}.
     */
    public IndexedDFTable atSuffix(String suffixed) {
        java.util.regex.Matcher v = AT_VERSION.matcher(suffixed);
        if (v.matches()) {
            return at(Long.valueOf(v.group(2)), null);
        }
        java.util.regex.Matcher t = AT_TIME.matcher(suffixed);
        if (t.matches()) {
            java.time.LocalDateTime time = java.time.LocalDateTime.parse(t.group(2),
                java.time.format.DateTimeFormatter.ofPattern("yyyyMMddHHmmssSSS"));
            return at(null, time.toInstant(java.time.ZoneOffset.UTC).toString());
        }
        return this;
    }

    /**
     * This table at {@code version}, or at the newest version committed at or before
     * {@code timestamp} (an ISO 8601 time, or milliseconds since the epoch): a version that
     * does not exist is {@code VersionNotFoundError}, as the Python reader says it.
     */
    public IndexedDFTable at(Long version, String timestamp) {
        if (timeTravel) {
            throw IndexedDFException.option(name + " names a version twice (a @v suffix and VERSION / TIMESTAMP AS "
                + "OF): give one");
        }
        return load(name, path, storageOptions, entry, version, timestamp);
    }

    private static IndexedDFTable load(String name, String path, String storageOptions, CatalogTable entry,
                                       Long version, String timestamp) {
        Configuration conf = SparkSession.active().sessionState().newHadoopConf();
        DeltaLog log = DeltaLog.open(TableRelation.tableRoot(path, conf), conf);
        Long v = timestamp != null ? Long.valueOf(log.versionAt(timestamp)) : version;
        if (v != null && (v < 0 || v > log.latestVersion())) {
            // The Python reader's error, naming the table as the statement does.
            throw new IndexedDFException("VersionNotFoundError", path + " has versions up to " + log.latestVersion()
                + "; version " + v + " does not exist");
        }
        return new IndexedDFTable(name, path, storageOptions, entry, log.snapshot(v), version != null || timestamp != null);
    }

    /** The table location as the Python writer takes it. */
    public String path() {
        return path;
    }

    /** The catalog entry's {@code storageOptions}, or null. */
    public String storageOptions() {
        return storageOptions;
    }

    /** The catalog entry, or null for {@code indexeddf.`/path`}. */
    public CatalogTable entry() {
        return entry;
    }

    /** The version of the table's log this table was loaded at (Spark's {@code Table.version}). */
    @Override
    public String version() {
        return Long.toString(snapshot.version);
    }

    /** The snapshot this table was loaded at. */
    public Snapshot snapshot() {
        return snapshot;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return ColumnMapping.tableSchema(snapshot);
    }

    /** The partition columns (identity transforms), then the index columns' {@code bucket(n, ...)}. */
    @Override
    public Transform[] partitioning() {
        List<Transform> out = new ArrayList<>();
        for (String c : snapshot.partitionColumns()) {
            out.add(Expressions.identity(c));
        }
        List<String> index = snapshot.indexColumns();
        if (!index.isEmpty()) {
            out.add(Expressions.bucket(snapshot.numBuckets(), index.toArray(new String[0])));
        }
        return out.toArray(new Transform[0]);
    }

    /**
     * The log's {@code metaData.configuration}, and what Spark's catalog API reads from a
     * table's properties: {@code provider}, {@code location}, {@code external} (a path, or an
     * entry made with {@code LOCATION}) and {@code comment} (the log's description).
     */
    @Override
    public Map<String, String> properties() {
        Map<String, String> out = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = snapshot.metadata.path("configuration").fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            if (!e.getValue().isNull()) {
                out.put(e.getKey(), e.getValue().asText());
            }
        }
        out.put("provider", TableRelation.NAME);
        out.put("location", snapshot.root.toString());
        if (entry == null || entry.tableType().name().equals("EXTERNAL")) {
            out.put("external", "true");
        }
        JsonNode description = snapshot.metadata.get("description");
        if (description != null && !description.isNull()) {
            out.put("comment", description.asText());
        }
        return out;
    }

    /**
     * Batch reads (through {@link V1Fallback}, never a V2 scan) and the writes of
     * {@code df.writeTo(name)}: {@code append()} and {@code overwrite(condition)} through the
     * Python writer ({@link #newWriteBuilder}); {@code overwritePartitions()} is written by
     * {@link TableStatements.DynamicOverwrite}.
     */
    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.V1_BATCH_WRITE, TableCapability.TRUNCATE,
            TableCapability.OVERWRITE_BY_FILTER);
    }

    /**
     * A write of {@code df.writeTo(name)} (Spark's {@code AppendData} / {@code
     * OverwriteByExpression}), as Delta's {@code WriteIntoDeltaBuilder}: a {@code V1Write}
     * whose insert is one commit of the Python writer, as {@code write.format("indexeddf")}
     * makes it: an append; an overwrite of every row ({@code overwrite(lit(True))}); or an
     * overwrite of the rows a condition selects (the {@code replaceWhere} option, with the
     * condition as Spark's SQL of it). The write's options ({@code .option(...)}) are the
     * writer's ({@code mergeSchema}, ...).
     */
    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        Map<String, String> options = new LinkedHashMap<>(info.options().asCaseSensitiveMap());
        options.put("path", path);
        if (storageOptions != null) {
            options.put("storageOptions", storageOptions);
        }
        return new Writes(options);
    }

    /** What {@link #newWriteBuilder} builds: the write's mode and options. */
    private final class Writes implements SupportsOverwriteV2 {
        private final Map<String, String> options;
        private SaveMode mode = SaveMode.Append;

        Writes(Map<String, String> options) {
            this.options = options;
        }

        @Override
        public WriteBuilder truncate() {
            mode = SaveMode.Overwrite;
            return this;
        }

        @Override
        public WriteBuilder overwrite(Predicate[] predicates) {
            List<String> sql = new ArrayList<>();
            for (Predicate p : predicates) {
                String text = new org.apache.spark.sql.connector.util.V2ExpressionSQLBuilder().build(p);
                if (!"TRUE".equalsIgnoreCase(text.trim())) {
                    sql.add("(" + text + ")");
                }
            }
            mode = SaveMode.Overwrite;
            if (!sql.isEmpty()) {
                options.put("replaceWhere", String.join(" AND ", sql));
            }
            return this;
        }

        @Override
        public V1Write build() {
            return () -> (data, overwrite) -> {
                PythonWriter.saveRows(data.sparkSession().sqlContext(), overwrite ? SaveMode.Overwrite : mode,
                    scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options)), data, false);
            };
        }
    }

    /**
     * The catalog entry: Spark falls back to it for {@code readStream.table(name)}, which it
     * turns into the provider's streaming source ({@code IndexedDFSource}), and for
     * {@code writeStream.toTable(name)}, which it turns into the provider's sink. For
     * {@code indexeddf.`/path`}, which no catalog holds, an entry made here as delta-spark's
     * {@code DeltaTableV2.v1Table} makes one for {@code delta.`/path`}: an external table of
     * provider {@code indexeddf} at that location with the version's schema, so a path is read
     * (and written) as a stream as a catalog table is.
     */
    @Override
    public CatalogTable v1Table() {
        if (entry != null) {
            return entry;
        }
        java.util.Map<String, String> storage = new LinkedHashMap<>();
        if (storageOptions != null) {
            storage.put("storageOptions", storageOptions);
        }
        org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat format =
            org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat$.MODULE$.apply(
                Option.apply(snapshot.root.toUri()), Option.empty(), Option.empty(), Option.empty(), false,
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(storage)), Option.empty());
        org.apache.spark.sql.catalyst.catalog.CatalogTable$ t = org.apache.spark.sql.catalyst.catalog.CatalogTable$.MODULE$;
        return t.apply(new org.apache.spark.sql.catalyst.TableIdentifier(path, Option.apply(TableRelation.NAME)),
            org.apache.spark.sql.catalyst.catalog.CatalogTableType.EXTERNAL(), format, schema(),
            Option.apply(TableRelation.NAME), CollectionConverters.asScala(snapshot.partitionColumns()).toList(),
            t.apply$default$7(), t.apply$default$8(), t.apply$default$9(), t.apply$default$10(), t.apply$default$11(),
            t.apply$default$12(), t.apply$default$13(), t.apply$default$14(), t.apply$default$15(), t.apply$default$16(),
            t.apply$default$17(), t.apply$default$18(), t.apply$default$19(), t.apply$default$20(), t.apply$default$21(),
            t.apply$default$22());
    }

    /**
     * The connector's V1 relation over this table's version, with {@code output} as its
     * attributes when they are the table's columns (so a plan resolved against the V2
     * relation stays resolved), and {@code options} a read takes ({@code maxPartitionBytes}). With
     * {@code readChangeFeed} in the options it is the table's change data feed over the range they
     * give ({@code ChangeFeedRelation}), with the feed's columns.
     */
    public LogicalRelation relation(SparkSession session, Seq<AttributeReference> output, Map<String, String> options) {
        Map<String, String> params = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            String k = e.getKey().toLowerCase(java.util.Locale.ROOT);
            if (!k.startsWith("__") && !k.equals("versionasof") && !k.equals("timestampasof") && !k.equals("path")) {
                params.put(e.getKey(), e.getValue());
            }
        }
        params.put("path", path);
        if (storageOptions != null) {
            params.put("storageOptions", storageOptions);
        }
        if (!io.indexeddf.spark.exec.ChangeFeedRelation.requested(params)) {
            params.put("versionAsOf", Long.toString(snapshot.version));
        }
        BaseRelation relation = TableRelation.read(session.sqlContext(),
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(params)), null);
        Option<CatalogTable> catalogTable = Option.apply(entry);
        List<AttributeReference> given = new ArrayList<>(CollectionConverters.asJava(output));
        StructType schema = relation.schema();
        boolean same = given.size() == schema.size();
        for (int i = 0; same && i < given.size(); i++) {
            same = given.get(i).name().equals(schema.fields()[i].name())
                && given.get(i).dataType().sameType(schema.fields()[i].dataType());
        }
        if (!same) {
            return entry == null
                ? org.apache.spark.sql.execution.datasources.LogicalRelation$.MODULE$.apply(relation, false)
                : org.apache.spark.sql.execution.datasources.LogicalRelation$.MODULE$.apply(relation, entry);
        }
        return new LogicalRelation(relation, output, catalogTable, false, Option.empty());
    }
}
