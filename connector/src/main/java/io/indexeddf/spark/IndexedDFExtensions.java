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
 * resolves these names itself. The analyzer rules for SQL commands: {@link ResolveInsert}
 * (inserts commit through the writer), {@link CreateEmptyTable} (CREATE TABLE with columns),
 * {@link CatalogTables} (catalog entries read the newest version; no ADD COLUMNS). The
 * optimizer rules: {@link DriverLookup}, which answers index lookups on the driver with no
 * Spark job, and {@link IndexedJoin}, which answers the table's side of a join with a small
 * other side as an index lookup of that side's keys.
 */
public final class IndexedDFExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        // Analyzer rules (each session builds its own).
        extensions.injectResolutionRule(rule(ResolvePath::new));
        extensions.injectResolutionRule(rule(ResolveInsert::new));
        extensions.injectResolutionRule(rule(CatalogTables.FreshReads::new));
        extensions.injectResolutionRule(rule(CatalogTables.RefuseAddColumns::new));
        extensions.injectResolutionRule(rule(session -> new CreateEmptyTable()));
        // Optimizer rules.
        extensions.injectOptimizerRule(rule(DriverLookup::new));
        extensions.injectOptimizerRule(rule(IndexedJoin::new));
        return BoxedUnit.UNIT;
    }

    /** A rule builder as Spark's extension points take one (a Scala function of the session). */
    private static AbstractFunction1<SparkSession, Rule<LogicalPlan>> rule(
            java.util.function.Function<SparkSession, Rule<LogicalPlan>> make) {
        return new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return make.apply(session);
            }
        };
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
