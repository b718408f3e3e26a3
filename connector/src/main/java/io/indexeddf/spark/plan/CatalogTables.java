package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.TableRelation;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.runtime.BoxedUnit;

/**
 * Analyzer rules for indexeddf tables in Spark's catalog ({@code CREATE TABLE ... USING
 * indexeddf}): the entry never stands between a query and the table's log. Inserts into
 * such tables are {@link ResolveInsert}'s, creating one is {@link CreateEmptyTable}'s.
 */
public final class CatalogTables {
    private CatalogTables() {
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
                    if (entry.storage().locationUri().isEmpty()) {
                        throw IndexedDFException.option("ALTER TABLE " + alter.table().unquotedString()
                            + " ADD COLUMNS: the catalog entry names no location");
                    }
                    java.net.URI uri = entry.storage().locationUri().get();
                    String storageOptions = null;
                    for (java.util.Map.Entry<String, String> e : scala.jdk.javaapi.CollectionConverters
                            .asJava(entry.storage().properties()).entrySet()) {
                        if (e.getKey().equalsIgnoreCase("storageOptions")) {
                            storageOptions = e.getValue();
                        }
                    }
                    // The Python writer takes local tables as plain paths, others as URLs.
                    String path = "file".equals(uri.getScheme()) ? uri.getPath() : uri.toString();
                    return AddColumnsCommand.ofCatalog(alter, path, storageOptions);
                }
            }
            return plan;
        }
    }
}
