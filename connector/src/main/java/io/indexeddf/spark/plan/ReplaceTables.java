package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.TableRelation;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedIdentifier;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTable;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.TableSpecBase;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.catalog.CatalogManager;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * {@code REPLACE TABLE t ... USING indexeddf}, {@code CREATE OR REPLACE TABLE t ...} (with or
 * without {@code AS SELECT}) and {@code df.writeTo(t).using("indexeddf").replace()} /
 * {@code .createOrReplace()} on an indexeddf table or {@code indexeddf.`/path`}, run by Spark's
 * own V2 commands ({@code AtomicReplaceTableExec}, {@code AtomicReplaceTableAsSelectExec}) through
 * the staging catalog {@link StagedReplace.Catalog}, as delta-spark's {@code DeltaCatalog}
 * ({@code stageReplace} / {@code stageCreateOrReplace}) runs Delta's.
 *
 * <p>Why a rule: {@code IndexedDFCatalog} is a {@code DelegatingCatalogExtension}, for which
 * Spark's {@code ResolveSessionCatalog} turns table statements into its V1 commands and refuses
 * {@code REPLACE TABLE} of a V1 provider. This hint-resolution rule runs before that (the "Hints"
 * batch precedes "Resolution") and resolves the statement's name to the session catalog's
 * staging view of it, which Spark plans as a V2 catalog. A statement names an indexeddf table
 * when its {@code USING} is {@code indexeddf}, or, without {@code USING}, when the table it names
 * is one.
 */
public final class ReplaceTables extends Rule<LogicalPlan> {
    private final SparkSession session;

    public ReplaceTables(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        CatalogManager manager = session.sessionState().catalogManager();
        CatalogPlugin sessionCatalog = manager.v2SessionCatalog();
        if (!(sessionCatalog instanceof TableCatalog) || !(sessionCatalog instanceof IndexedDFTable.PathCatalog)) {
            return plan;
        }
        return plan.resolveOperatorsDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return target(p, manager, (TableCatalog) sessionCatalog) != null;
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                Identifier ident = target(p, manager, (TableCatalog) sessionCatalog);
                LogicalPlan name = new ResolvedIdentifier(new StagedReplace.Catalog((TableCatalog) sessionCatalog),
                    ident, ResolvedIdentifier.$lessinit$greater$default$3());
                List<LogicalPlan> children = new ArrayList<>(CollectionConverters.asJava(p.children()));
                children.set(0, name);
                return p.withNewChildren(CollectionConverters.asScala(children).toSeq());
            }
        });
    }

    /** The session catalog identifier a replace statement on an indexeddf table names, else null. */
    private static Identifier target(LogicalPlan p, CatalogManager manager, TableCatalog catalog) {
        LogicalPlan name;
        TableSpecBase spec;
        if (p instanceof ReplaceTable) {
            name = ((ReplaceTable) p).name();
            spec = ((ReplaceTable) p).tableSpec();
        } else if (p instanceof ReplaceTableAsSelect) {
            name = ((ReplaceTableAsSelect) p).name();
            spec = ((ReplaceTableAsSelect) p).tableSpec();
        } else {
            return null;
        }
        if (!(name instanceof UnresolvedIdentifier)) {
            return null;
        }
        Identifier ident = sessionIdentifier(CollectionConverters.asJava(((UnresolvedIdentifier) name).nameParts()),
            manager);
        if (ident == null) {
            return null;
        }
        Option<String> provider = spec.provider();
        if (provider.isDefined()) {
            return TableRelation.isProvider(provider) ? ident : null;
        }
        try {  // no USING: ours when the table it replaces is an indexeddf table
            Table existing = catalog.loadTable(ident);
            return existing instanceof IndexedDFTable ? ident : null;
        } catch (Exception e) {
            return null;
        }
    }

    /**
     * The identifier in the session catalog that {@code parts} names ({@code t}, {@code db.t},
     * {@code spark_catalog.db.t}, {@code indexeddf.`/path`}), or null for a name of another catalog.
     */
    static Identifier sessionIdentifier(List<String> parts, CatalogManager manager) {
        List<String> rest = new ArrayList<>(parts);
        if (rest.size() > 1 && rest.get(0).equalsIgnoreCase(CatalogManager.SESSION_CATALOG_NAME())) {
            rest.remove(0);
        } else if (rest.size() > 1 && !rest.get(0).equalsIgnoreCase(TableRelation.NAME)
                && manager.isCatalogRegistered(rest.get(0))) {
            return null;
        } else if (rest.size() == 1
                && !manager.currentCatalog().name().equalsIgnoreCase(CatalogManager.SESSION_CATALOG_NAME())) {
            return null;
        }
        if (rest.size() == 1) {
            return Identifier.of(manager.currentNamespace(), rest.get(0));
        }
        if (rest.size() == 2) {
            return Identifier.of(new String[] {rest.get(0)}, rest.get(1));
        }
        return null;
    }
}
