package io.indexeddf.spark;

import java.util.Map;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * Session extensions ({@code spark.sql.extensions=io.indexeddf.spark.IndexedDFExtensions},
 * which {@code indexeddf.configure(builder)} sets): resolves
 * {@code SELECT ... FROM indexeddf.`/path`} to the table at that path. Spark's own
 * SQL-on-files rule gives a V1 provider no path (only the options), so the connector
 * resolves these names itself. {@link ResolveInsert} makes {@code INSERT INTO} / {@code INSERT
 * OVERWRITE} such a table a commit of the writer. It also adds {@link DriverLookup}, which answers index lookups
 * on the driver with no Spark job, and {@link IndexedJoin}, which answers the table's side of
 * a join with a small other side as an index lookup of that side's keys.
 */
public final class IndexedDFExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new ResolvePath(session);
            }
        });
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new ResolveInsert(session);
            }
        });
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new FreshCatalogReads(session);
            }
        });
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new RefuseAddColumns(session);
            }
        });
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new CreateEmptyTable();
            }
        });
        extensions.injectOptimizerRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new DriverLookup(session);
            }
        });
        extensions.injectOptimizerRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new IndexedJoin(session);
            }
        });
        return BoxedUnit.UNIT;
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
    static final class FreshCatalogReads extends Rule<LogicalPlan> {
        private final SparkSession session;

        FreshCatalogReads(SparkSession session) {
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
     * {@code ALTER TABLE name ADD COLUMNS} on an indexeddf catalog table: refused. Spark allows it
     * for Parquet-based providers (the connector is one) and would change only the catalog
     * entry, not the table's log, which made the table unreadable through that entry.
     */
    static final class RefuseAddColumns extends Rule<LogicalPlan> {
        private final SparkSession session;

        RefuseAddColumns(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            if (plan instanceof org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand) {
                org.apache.spark.sql.catalyst.TableIdentifier name =
                    ((org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand) plan).table();
                scala.Option<String> provider;
                try {
                    provider = session.sessionState().catalog().getTableMetadata(name).provider();
                } catch (org.apache.spark.sql.AnalysisException e) {
                    return plan;  // no such table: Spark's own command says so
                }
                if (provider.isDefined() && (IndexedDFProvider.NAME.equalsIgnoreCase(provider.get())
                        || IndexedDFProvider.class.getName().equals(provider.get()))) {
                    throw IndexedDFException.option("ALTER TABLE " + name.unquotedString() + " ADD COLUMNS would "
                        + "change only the catalog entry, not the indexeddf table's log. Write the new columns "
                        + "with an overwrite that replaces the schema (IndexedTable.overwrite(data, "
                        + "overwrite_schema=True)), then create the entry again (DROP TABLE, CREATE TABLE ... "
                        + "USING indexeddf LOCATION ...).");
                }
            }
            return plan;
        }
    }

    /** {@code indexeddf.`/path`} as a relation over the table's newest version. */
    static final class ResolvePath extends Rule<LogicalPlan> {
        private final SparkSession session;

        ResolvePath(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            return plan.resolveOperatorsDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                @Override
                public boolean isDefinedAt(LogicalPlan p) {
                    return namesPath(p);
                }

                @Override
                public LogicalPlan apply(LogicalPlan p) {
                    return relation(session, (UnresolvedRelation) p);
                }
            });
        }

        /** Whether {@code p} is a relation named {@code indexeddf.`/path`}. */
        static boolean namesPath(LogicalPlan p) {
            if (!(p instanceof UnresolvedRelation)) {
                return false;
            }
            Seq<String> ident = ((UnresolvedRelation) p).multipartIdentifier();
            return ident.size() == 2 && IndexedDFProvider.NAME.equalsIgnoreCase(ident.head());
        }

        /** The table {@code indexeddf.`/path`} names, at its newest version. */
        static LogicalRelation relation(SparkSession session, UnresolvedRelation u) {
            Map<String, String> options = new java.util.LinkedHashMap<>();
            for (Map.Entry<String, String> e : u.options().asCaseSensitiveMap().entrySet()) {
                if (!e.getKey().startsWith("__")) {  // Spark's own marks (an insert's write privileges)
                    options.put(e.getKey(), e.getValue());
                }
            }
            options.put("path", u.multipartIdentifier().last());
            scala.collection.immutable.Map<String, String> params =
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
            SQLContext sqlContext = session.sqlContext();
            return LogicalRelation$.MODULE$.apply(new IndexedDFProvider().createRelation(sqlContext, params), false);
        }
    }
}
