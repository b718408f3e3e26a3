package io.indexeddf.spark.plan;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableRelation;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTableType;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.StagedTable;
import org.apache.spark.sql.connector.catalog.StagingTableCatalog;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.CatalogV2Util;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.V1Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The table a {@code REPLACE TABLE} / {@code CREATE OR REPLACE TABLE} stages, as delta-spark's
 * {@code StagedDeltaTableV2}: Spark's {@code AtomicReplaceTableAsSelectExec} writes the query into
 * it (a {@code V1Write} that keeps the DataFrame), then calls {@link #commitStagedChanges}, which
 * makes the replace one commit of the Python writer: the new schema, partitioning, index columns
 * and properties and the query's rows replace the table's in a new version (its history stays,
 * older versions can still be read), recorded with Delta's operation name ({@code REPLACE TABLE},
 * {@code CREATE OR REPLACE TABLE}, each {@code ... AS SELECT} when it had a query). A missing
 * table is created ({@code CREATE OR REPLACE}), with a catalog entry for a name; Spark refuses
 * {@code REPLACE} of a missing table itself.
 *
 * <p>The statement's {@code CLUSTERED BY (c) INTO n BUCKETS} (or {@code OPTIONS (indexColumns,
 * numBuckets)}) gives the index columns and bucket count, else they stay the table's;
 * {@code PARTITIONED BY} the partition columns; {@code TBLPROPERTIES} the table properties (the
 * old ones are replaced, as in Delta); {@code COMMENT} the description.
 */
final class StagedReplace implements StagedTable, SupportsWrite {
    /** Spark's reserved table properties, which are no table property of the log. */
    private static final Set<String> RESERVED = Set.of(TableCatalog.PROP_PROVIDER, TableCatalog.PROP_LOCATION,
        TableCatalog.PROP_COMMENT, TableCatalog.PROP_OWNER, TableCatalog.PROP_EXTERNAL,
        TableCatalog.PROP_IS_MANAGED_LOCATION, "collation");

    private final TableCatalog catalog;
    private final Identifier ident;
    private final StructType schema;
    private final Transform[] partitions;
    private final Map<String, String> properties;
    private final boolean orCreate;
    private final Map<String, String> writeOptions = new LinkedHashMap<>();
    private Dataset<Row> data;

    StagedReplace(TableCatalog catalog, Identifier ident, Column[] columns, Transform[] partitions,
                  Map<String, String> properties, boolean orCreate) {
        this.catalog = catalog;
        this.ident = ident;
        this.schema = CatalogV2Util.v2ColumnsToStructType(columns);
        this.partitions = partitions;
        this.properties = new LinkedHashMap<>(properties);
        this.orCreate = orCreate;
    }

    @Override
    public String name() {
        return ident.toString();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return schema;
    }

    @Override
    public Transform[] partitioning() {
        return partitions;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.V1_BATCH_WRITE, TableCapability.TRUNCATE);
    }

    /** The query's write: the DataFrame is kept and written by {@link #commitStagedChanges}. */
    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        writeOptions.putAll(info.options().asCaseSensitiveMap());
        return new Builder();
    }

    private final class Builder implements SupportsTruncate {
        @Override
        public WriteBuilder truncate() {
            return this;
        }

        @Override
        public V1Write build() {
            return () -> (rows, overwrite) -> data = rows;
        }
    }

    @Override
    public void commitStagedChanges() {
        SparkSession session = SparkSession.active();
        boolean path = isPath(ident);
        Table existing = null;
        try {
            existing = catalog.loadTable(ident);
        } catch (NoSuchTableException e) {
            existing = null;
        } catch (IndexedDFException e) {
            if (!"TableNotFoundError".equals(e.errorName)) {
                throw e;
            }
        }
        if (existing != null && !(existing instanceof IndexedDFTable)) {
            throw IndexedDFException.option(operation() + " " + ident + ": the table there is not an indexeddf "
                + "table; drop it first (DROP TABLE), then create the indexeddf table");
        }
        String location = properties.get(TableCatalog.PROP_LOCATION);
        IndexedDFTable table = (IndexedDFTable) existing;
        String target;
        if (table != null) {
            target = table.path();
            if (location != null && !samePlace(location, target)) {
                throw IndexedDFException.option(operation() + " " + ident + ": LOCATION '" + location + "' is not "
                    + "the table's location (" + target + "); drop LOCATION, or drop the table first");
            }
        } else if (path) {
            target = ident.name();
        } else if (location != null) {
            target = location;
        } else {
            java.net.URI uri = session.sessionState().catalog().defaultTablePath(tableIdentifier());
            target = "file".equals(uri.getScheme()) ? uri.getPath() : uri.toString();
        }
        Map<String, String> options = writerOptions(table, target);
        Dataset<Row> rows = data != null ? data : session.createDataFrame(new ArrayList<Row>(), schema);
        StructType written = PythonWriter.save(session.sqlContext(), SaveMode.Overwrite,
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options)), rows).schema();
        if (!path && table == null) {
            register(session, target, location != null, written);
        } else if (!path) {
            session.sessionState().catalog().invalidateCachedTable(tableIdentifier());
        }
    }

    /** Nothing is written before {@link #commitStagedChanges}: nothing to undo. */
    @Override
    public void abortStagedChanges() {
    }

    /** Delta's operation name of this statement. */
    private String operation() {
        return (orCreate ? "CREATE OR " : "") + "REPLACE TABLE" + (data != null ? " AS SELECT" : "");
    }

    private TableIdentifier tableIdentifier() {
        return new TableIdentifier(ident.name(), Option.apply(ident.namespace().length == 1 ? ident.namespace()[0]
            : null), Option.apply(org.apache.spark.sql.connector.catalog.CatalogManager.SESSION_CATALOG_NAME()));
    }

    private static boolean samePlace(String a, String b) {
        return new org.apache.hadoop.fs.Path(a).toUri().getPath().replaceAll("/+$", "")
            .equals(new org.apache.hadoop.fs.Path(b).toUri().getPath().replaceAll("/+$", ""));
    }

    /** The Python writer's options for this replace. */
    private Map<String, String> writerOptions(IndexedDFTable table, String target) {
        Map<String, String> options = new LinkedHashMap<>();
        Map<String, String> tableProperties = new TreeMap<>();
        for (Map.Entry<String, String> e : properties.entrySet()) {
            String k = e.getKey();
            if (k.startsWith(TableCatalog.OPTION_PREFIX)) {
                options.put(k.substring(TableCatalog.OPTION_PREFIX.length()), e.getValue());
            } else if (!RESERVED.contains(k)) {
                tableProperties.put(k, e.getValue());
            }
        }
        options.putAll(writeOptions);
        options.put("path", target);
        if (table != null && table.storageOptions() != null) {
            options.put("storageOptions", table.storageOptions());
        }
        if (properties.get(TableCatalog.PROP_COMMENT) != null) {
            options.put("description", properties.get(TableCatalog.PROP_COMMENT));
        }
        List<String> partitionColumns = new ArrayList<>();
        for (Transform t : partitions) {
            if ("identity".equals(t.name())) {
                partitionColumns.add(column(t.references()[0]));
            } else if ("bucket".equals(t.name())) {
                List<String> columns = new ArrayList<>();
                for (NamedReference r : t.references()) {
                    columns.add(column(r));
                }
                options.put("indexColumns", String.join(",", columns));
                options.put("numBuckets", String.valueOf(((Literal<?>) t.arguments()[0]).value()));
            } else {
                throw IndexedDFException.option(operation() + " " + ident + ": " + t.describe() + " is not supported: "
                    + "indexeddf tables are partitioned by columns (PARTITIONED BY) and bucketed by their index "
                    + "columns (CLUSTERED BY (c) INTO n BUCKETS)");
            }
        }
        try {
            options.put(CreateEmptyTable.PARTITION_COLUMNS, DeltaLog.JSON.writeValueAsString(partitionColumns));
            if (!tableProperties.isEmpty()) {
                options.put("tableProperties", DeltaLog.JSON.writeValueAsString(tableProperties));
            }
            Map<String, Object> spec = new LinkedHashMap<>();
            spec.put("operation", operation());
            spec.put("orCreate", orCreate);
            spec.put("isManaged", table != null ? table.entry() != null
                && "MANAGED".equals(table.entry().tableType().name())
                : !isPath(ident) && properties.get(TableCatalog.PROP_LOCATION) == null);
            options.put("_replaceTable", DeltaLog.JSON.writeValueAsString(spec));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
        return options;
    }

    /** Whether {@code ident} is {@code indexeddf.`/path`}. */
    private static boolean isPath(Identifier ident) {
        return ident.namespace().length == 1 && TableRelation.NAME.equalsIgnoreCase(ident.namespace()[0]);
    }

    private static String column(NamedReference r) {
        return String.join(".", r.fieldNames());
    }

    /**
     * The catalog entry of a table {@code CREATE OR REPLACE} created: its provider, location and
     * (as {@code CREATE TABLE ... AS SELECT} records it) the written table's schema.
     */
    private void register(SparkSession session, String target, boolean external, StructType written) {
        java.net.URI uri = new org.apache.hadoop.fs.Path(target).toUri();
        if (uri.getScheme() == null) {
            uri = new java.io.File(target).toURI();
        }
        CatalogStorageFormat storage = CatalogStorageFormat.empty().copy(Option.apply(uri),
            Option.empty(), Option.empty(), Option.empty(), false, scala.collection.immutable.Map$.MODULE$.empty(),
            Option.empty());
        CatalogTable entry = new CatalogTable(tableIdentifier(),
            external ? CatalogTableType.EXTERNAL() : CatalogTableType.MANAGED(), storage, written,
            Option.apply(TableRelation.NAME), CatalogTable.$lessinit$greater$default$6(),
            CatalogTable.$lessinit$greater$default$7(), CatalogTable.$lessinit$greater$default$8(),
            CatalogTable.$lessinit$greater$default$9(), CatalogTable.$lessinit$greater$default$10(),
            CatalogTable.$lessinit$greater$default$11(), CatalogTable.$lessinit$greater$default$12(),
            CatalogTable.$lessinit$greater$default$13(), CatalogTable.$lessinit$greater$default$14(),
            CatalogTable.$lessinit$greater$default$15(), CatalogTable.$lessinit$greater$default$16(),
            CatalogTable.$lessinit$greater$default$17(), CatalogTable.$lessinit$greater$default$18(),
            CatalogTable.$lessinit$greater$default$19(), CatalogTable.$lessinit$greater$default$20(),
            CatalogTable.$lessinit$greater$default$21(), CatalogTable.$lessinit$greater$default$22());
        session.sessionState().catalog().createTable(entry, false, false);
    }

    /**
     * The session catalog as Spark's V2 replace commands use it: a {@code StagingTableCatalog}
     * whose {@code stageReplace} / {@code stageCreateOrReplace} stage a {@link StagedReplace};
     * every other call is the session catalog's ({@code IndexedDFCatalog}).
     */
    static final class Catalog implements StagingTableCatalog {
        private final TableCatalog base;

        Catalog(TableCatalog base) {
            this.base = base;
        }

        @Override
        public void initialize(String name, CaseInsensitiveStringMap options) {
        }

        @Override
        public String name() {
            return base.name();
        }

        @Override
        public Identifier[] listTables(String[] namespace) throws org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException {
            return base.listTables(namespace);
        }

        @Override
        public Table loadTable(Identifier ident) throws NoSuchTableException {
            return base.loadTable(ident);
        }

        /** Whether the table exists; a path without a table's log does not. */
        @Override
        public boolean tableExists(Identifier ident) {
            try {
                return base.loadTable(ident) != null;
            } catch (NoSuchTableException e) {
                return false;
            } catch (IndexedDFException e) {
                if ("TableNotFoundError".equals(e.errorName)) {
                    return false;
                }
                throw e;
            }
        }

        @Override
        public Table createTable(Identifier ident, Column[] columns, Transform[] partitions,
                                 Map<String, String> properties)
                throws org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException,
                org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException {
            return base.createTable(ident, columns, partitions, properties);
        }

        @Override
        public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
            return base.alterTable(ident, changes);
        }

        @Override
        public boolean dropTable(Identifier ident) {
            return base.dropTable(ident);
        }

        @Override
        public void renameTable(Identifier oldIdent, Identifier newIdent)
                throws NoSuchTableException, org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException {
            base.renameTable(oldIdent, newIdent);
        }

        @Override
        public void invalidateTable(Identifier ident) {
            base.invalidateTable(ident);
        }

        /** {@code REPLACE TABLE}: the table must exist (Spark checks before it asks). */
        @Override
        public StagedTable stageReplace(Identifier ident, Column[] columns, Transform[] partitions,
                                        Map<String, String> properties) {
            return new StagedReplace(base, ident, columns, partitions, properties, false);
        }

        /** {@code CREATE OR REPLACE TABLE}. */
        @Override
        public StagedTable stageCreateOrReplace(Identifier ident, Column[] columns, Transform[] partitions,
                                                Map<String, String> properties) {
            return new StagedReplace(base, ident, columns, partitions, properties, true);
        }

        /** {@code CREATE TABLE} stays the session catalog's (Spark's V1 commands): never staged here. */
        @Override
        public StagedTable stageCreate(Identifier ident, Column[] columns, Transform[] partitions,
                                       Map<String, String> properties) {
            throw IndexedDFException.option("CREATE TABLE " + ident + " is not staged: create indexeddf tables with "
                + "CREATE TABLE ... USING indexeddf");
        }
    }
}
