package io.indexeddf.spark;

import java.util.Map;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
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
 * resolves these names itself. It also adds {@link DriverLookup}, which answers index lookups
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
                    if (!(p instanceof UnresolvedRelation)) {
                        return false;
                    }
                    Seq<String> ident = ((UnresolvedRelation) p).multipartIdentifier();
                    return ident.size() == 2 && IndexedDFProvider.NAME.equalsIgnoreCase(ident.head());
                }

                @Override
                public LogicalPlan apply(LogicalPlan p) {
                    UnresolvedRelation u = (UnresolvedRelation) p;
                    Map<String, String> options = new java.util.LinkedHashMap<>(u.options().asCaseSensitiveMap());
                    options.put("path", u.multipartIdentifier().last());
                    scala.collection.immutable.Map<String, String> params =
                        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
                    SQLContext sqlContext = session.sqlContext();
                    return LogicalRelation$.MODULE$.apply(new IndexedDFProvider().createRelation(sqlContext, params),
                        false);
                }
            });
        }
    }
}
