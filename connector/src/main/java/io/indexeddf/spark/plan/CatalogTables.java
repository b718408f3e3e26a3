package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.SnapshotFileIndex;
import io.indexeddf.spark.exec.TableRelation;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.CommentOnTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SetTableProperties;
import org.apache.spark.sql.catalyst.plans.logical.ShowTableProperties;
import org.apache.spark.sql.catalyst.plans.logical.UnsetTableProperties;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.catalog.V1Table;
import org.apache.spark.sql.execution.command.AlterTableSetPropertiesCommand;
import org.apache.spark.sql.execution.command.AlterTableUnsetPropertiesCommand;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * Analyzer rules for indexeddf tables in Spark's catalog ({@code CREATE TABLE ... USING
 * indexeddf}): the entry never stands between a query and the table's log. Each query reads
 * the newest version ({@link FreshReads}) with the schema of the log ({@link SchemaFromLog});
 * table properties are the log's ({@link TableProperties}); {@code ADD COLUMNS} commits to the
 * log ({@link RefuseAddColumns}). Inserts into such tables are {@link ResolveInsert}'s,
 * creating one is {@link CreateEmptyTable}'s.
 */
public final class CatalogTables {
    private CatalogTables() {
    }

    /**
     * The table location of an indexeddf catalog entry, as the Python writer takes it (local
     * tables as plain paths, others as URLs); {@code what} names the statement in the error
     * when the entry names none.
     */
    static String location(org.apache.spark.sql.catalyst.catalog.CatalogTable entry, String what) {
        if (entry.storage().locationUri().isEmpty()) {
            throw IndexedDFException.option(what + ": the catalog entry names no location");
        }
        java.net.URI uri = entry.storage().locationUri().get();
        return "file".equals(uri.getScheme()) ? uri.getPath() : uri.toString();
    }

    /** The entry's {@code storageOptions} option ({@code CREATE TABLE ... OPTIONS}), or null. */
    static String storageOptions(org.apache.spark.sql.catalyst.catalog.CatalogTable entry) {
        String out = null;
        for (java.util.Map.Entry<String, String> e : scala.jdk.javaapi.CollectionConverters
                .asJava(entry.storage().properties()).entrySet()) {
            if (e.getKey().equalsIgnoreCase("storageOptions")) {
                out = e.getValue();
            }
        }
        return out;
    }

    /** The catalog entry {@code name} when it is an indexeddf table, else null (no such table: Spark says so). */
    static org.apache.spark.sql.catalyst.catalog.CatalogTable entryOf(SparkSession session,
            org.apache.spark.sql.catalyst.TableIdentifier name) {
        org.apache.spark.sql.catalyst.catalog.CatalogTable entry;
        try {
            entry = session.sessionState().catalog().getTableMetadata(name);
        } catch (org.apache.spark.sql.AnalysisException e) {
            return null;
        }
        return TableRelation.isProvider(entry.provider()) ? entry : null;
    }

    /**
     * Reads of a table always have the table's schema, from its log
     * ({@link TableRelation#read}); this rule refuses those that were handed another one by
     * {@code spark.read.schema(...)}, with {@code SchemaMismatchError}. A catalog entry's copy
     * of the schema is handed to every read of the entry as well: those reads go on with the
     * log's schema, so an entry never goes stale when another writer changes the table's schema
     * ({@code mergeSchema}, {@code add_columns}, an overwrite that replaces it).
     */
    public static final class SchemaFromLog extends Rule<LogicalPlan> {
        public SchemaFromLog(SparkSession session) {
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            plan.foreach(new scala.runtime.AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan p) {
                    if (p instanceof LogicalRelation && ((LogicalRelation) p).catalogTable().isEmpty()
                            && ((LogicalRelation) p).relation() instanceof HadoopFsRelation
                            && ((HadoopFsRelation) ((LogicalRelation) p).relation()).location()
                                instanceof SnapshotFileIndex) {
                        String refused = ((SnapshotFileIndex) ((HadoopFsRelation) ((LogicalRelation) p).relation())
                            .location()).refusedSchema();
                        if (refused != null) {
                            throw new IndexedDFException("SchemaMismatchError", refused);
                        }
                    }
                    return BoxedUnit.UNIT;
                }
            });
            return plan;
        }
    }

    /**
     * Table properties of an indexeddf catalog table are the table's log's
     * ({@code metaData.configuration}), never the entry's: {@code ALTER TABLE name SET
     * TBLPROPERTIES (...)} and {@code UNSET TBLPROPERTIES [IF EXISTS] (...)} commit to the log
     * ({@link PropertiesCommand}: validated as {@code IndexedTable.set_properties} validates them,
     * unknown {@code indexeddf.*} and {@code delta.*} names refused), and {@code SHOW
     * TBLPROPERTIES name [(key)]} lists the log's configuration ({@link ShowPropertiesCommand}).
     * {@code COMMENT ON TABLE} sets the property {@code comment}: the log's description.
     * The same statements on {@code indexeddf.`/path`} (no entry: Spark would say the table
     * does not exist) do the same.
     */
    public static final class TableProperties extends Rule<LogicalPlan> {
        private final SparkSession session;

        public TableProperties(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            LogicalPlan loaded = ofLoadedTable(plan);
            if (loaded != null) {
                return loaded;
            }
            if (plan instanceof AlterTableSetPropertiesCommand && !((AlterTableSetPropertiesCommand) plan).isView()) {
                AlterTableSetPropertiesCommand set = (AlterTableSetPropertiesCommand) plan;
                CatalogTable entry = entryOf(session, set.tableName());
                if (entry != null) {
                    String what = "ALTER TABLE " + set.tableName().unquotedString() + " SET TBLPROPERTIES";
                    return PropertiesCommand.set(location(entry, what), storageOptions(entry),
                        CollectionConverters.asJava(set.properties()), set.tableName());
                }
            } else if (plan instanceof AlterTableUnsetPropertiesCommand
                    && !((AlterTableUnsetPropertiesCommand) plan).isView()) {
                AlterTableUnsetPropertiesCommand unset = (AlterTableUnsetPropertiesCommand) plan;
                CatalogTable entry = entryOf(session, unset.tableName());
                if (entry != null) {
                    String what = "ALTER TABLE " + unset.tableName().unquotedString() + " UNSET TBLPROPERTIES";
                    return PropertiesCommand.unset(location(entry, what), storageOptions(entry),
                        CollectionConverters.asJava(unset.propKeys()), unset.ifExists(), unset.tableName());
                }
            } else if (plan instanceof ShowTableProperties) {
                ShowTableProperties show = (ShowTableProperties) plan;
                String key = show.propertyKey().isDefined() ? show.propertyKey().get() : null;
                if (show.table() instanceof ResolvedTable && ((ResolvedTable) show.table()).table() instanceof V1Table) {
                    CatalogTable entry = ((V1Table) ((ResolvedTable) show.table()).table()).v1Table();
                    if (TableRelation.isProvider(entry.provider())) {
                        return new ShowPropertiesCommand(CollectionConverters.asJava(show.output()),
                            location(entry, "SHOW TBLPROPERTIES " + entry.identifier().unquotedString()), key,
                            entry.identifier().unquotedString());
                    }
                }
                String path = pathOf(show.table());
                if (path != null) {
                    return new ShowPropertiesCommand(CollectionConverters.asJava(show.output()), path, key,
                        TableRelation.NAME + ".`" + path + "`");
                }
            } else if (plan instanceof CommentOnTable && ((CommentOnTable) plan).table() instanceof ResolvedTable
                    && ((ResolvedTable) ((CommentOnTable) plan).table()).table() instanceof V1Table) {
                // COMMENT ON TABLE sets the property comment: the table's description.
                CommentOnTable comment = (CommentOnTable) plan;
                CatalogTable entry = ((V1Table) ((ResolvedTable) comment.table()).table()).v1Table();
                if (TableRelation.isProvider(entry.provider())) {
                    String path = location(entry, "COMMENT ON TABLE " + entry.identifier().unquotedString());
                    return comment.comment() == null
                        ? PropertiesCommand.unset(path, storageOptions(entry), java.util.List.of("comment"), true,
                            entry.identifier())
                        : PropertiesCommand.set(path, storageOptions(entry), java.util.Map.of("comment",
                            comment.comment()), entry.identifier());
                }
            } else if (plan instanceof SetTableProperties) {
                String path = pathOf(((SetTableProperties) plan).table());
                if (path != null) {
                    return PropertiesCommand.set(path, null,
                        CollectionConverters.asJava(((SetTableProperties) plan).properties()), null);
                }
            } else if (plan instanceof UnsetTableProperties) {
                UnsetTableProperties unset = (UnsetTableProperties) plan;
                String path = pathOf(unset.table());
                if (path != null) {
                    return PropertiesCommand.unset(path, null, CollectionConverters.asJava(unset.propertyKeys()),
                        unset.ifExists(), null);
                }
            }
            return plan;
        }

        /**
         * The statement on a table {@code IndexedDFCatalog} loaded ({@link IndexedDFTable}: a
         * catalog entry or a path), or null when {@code plan} is no such statement.
         */
        private static LogicalPlan ofLoadedTable(LogicalPlan plan) {
            if (plan instanceof SetTableProperties) {
                IndexedDFTable t = loaded(((SetTableProperties) plan).table());
                return t == null ? null : PropertiesCommand.set(t.path(), t.storageOptions(),
                    CollectionConverters.asJava(((SetTableProperties) plan).properties()), identifier(t));
            } else if (plan instanceof UnsetTableProperties) {
                UnsetTableProperties unset = (UnsetTableProperties) plan;
                IndexedDFTable t = loaded(unset.table());
                return t == null ? null : PropertiesCommand.unset(t.path(), t.storageOptions(),
                    CollectionConverters.asJava(unset.propertyKeys()), unset.ifExists(), identifier(t));
            } else if (plan instanceof ShowTableProperties) {
                ShowTableProperties show = (ShowTableProperties) plan;
                IndexedDFTable t = loaded(show.table());
                return t == null ? null : new ShowPropertiesCommand(CollectionConverters.asJava(show.output()),
                    t.path(), show.propertyKey().isDefined() ? show.propertyKey().get() : null, t.name());
            } else if (plan instanceof CommentOnTable) {
                CommentOnTable comment = (CommentOnTable) plan;
                IndexedDFTable t = loaded(comment.table());
                if (t == null) {
                    return null;
                }
                return comment.comment() == null
                    ? PropertiesCommand.unset(t.path(), t.storageOptions(), java.util.List.of("comment"), true,
                        identifier(t))
                    : PropertiesCommand.set(t.path(), t.storageOptions(), java.util.Map.of("comment",
                        comment.comment()), identifier(t));
            } else if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.AddColumns) {
                org.apache.spark.sql.catalyst.plans.logical.AddColumns add =
                    (org.apache.spark.sql.catalyst.plans.logical.AddColumns) plan;
                IndexedDFTable t = loaded(add.table());
                return t == null ? null
                    : new AddColumnsCommand(AddColumnsCommand.OnPath.fields(add.columnsToAdd()), t.path(),
                        t.storageOptions(), null);
            }
            return null;
        }

        /** The table under a resolved statement's target, when the catalog loaded an indexeddf table. */
        private static IndexedDFTable loaded(LogicalPlan table) {
            return table instanceof ResolvedTable && ((ResolvedTable) table).table() instanceof IndexedDFTable
                ? (IndexedDFTable) ((ResolvedTable) table).table() : null;
        }

        private static org.apache.spark.sql.catalyst.TableIdentifier identifier(IndexedDFTable t) {
            return t.entry() == null ? null : t.entry().identifier();
        }

        /** The path of {@code indexeddf.`/path`} as a statement names its table, or null. */
        private static String pathOf(LogicalPlan table) {
            scala.collection.immutable.Seq<String> ident = table instanceof UnresolvedTable
                ? ((UnresolvedTable) table).multipartIdentifier()
                : table instanceof UnresolvedTableOrView ? ((UnresolvedTableOrView) table).multipartIdentifier() : null;
            return ident != null && ident.size() == 2 && TableRelation.NAME.equalsIgnoreCase(ident.head())
                ? ident.last() : null;
        }
    }

    /**
     * A catalog table ({@code CREATE TABLE ... USING indexeddf LOCATION ...}) reads its newest
     * version at each query, as a path does at each load. Spark keeps a catalog table's
     * relation, and with it the version it read, for the whole session (its table relation
     * cache): a query after an {@code INSERT}, or after any other writer's commit, read the
     * old version until {@code REFRESH TABLE}. Once the relation is in a query's plan, this rule
     * drops that cache entry, so the next query loads the table again; the plan being analysed
     * keeps the relation it has (a DataFrame keeps its version).
     */
    public static final class FreshReads extends Rule<LogicalPlan> {
        private final SparkSession session;

        public FreshReads(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            plan.foreach(new scala.runtime.AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan p) {
                    if (p instanceof LogicalRelation
                            && ((LogicalRelation) p).catalogTable().isDefined()
                            && DriverLookup.snapshotOf(p) != null) {
                        session.sessionState().catalog().invalidateCachedTable(
                            ((LogicalRelation) p).catalogTable().get().identifier());
                    }
                    return BoxedUnit.UNIT;
                }
            });
            return plan;
        }
    }

    /**
     * {@code ALTER TABLE name ADD COLUMNS} on an indexeddf catalog table: an
     * {@link AddColumnsCommand}, one metadata commit to the table's log and then Spark's own
     * update of the catalog entry. Left to Spark, which allows it for Parquet-based providers
     * (the connector is one), it changed only the catalog entry, not the table's log, and the
     * table became unreadable through that entry. (The class keeps the name it had when it
     * refused the statement.)
     */
    public static final class RefuseAddColumns extends Rule<LogicalPlan> {
        private final SparkSession session;

        public RefuseAddColumns(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            if (plan instanceof org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand) {
                org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand alter =
                    (org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand) plan;
                org.apache.spark.sql.catalyst.catalog.CatalogTable entry;
                try {
                    entry = session.sessionState().catalog().getTableMetadata(alter.table());
                } catch (org.apache.spark.sql.AnalysisException e) {
                    return plan;  // no such table: Spark's own command says so
                }
                if (TableRelation.isProvider(entry.provider())) {
                    String path = location(entry, "ALTER TABLE " + alter.table().unquotedString() + " ADD COLUMNS");
                    String storageOptions = storageOptions(entry);
                    return AddColumnsCommand.ofCatalog(alter, path, storageOptions);
                }
            }
            return plan;
        }
    }
}
