package io.indexeddf.spark.plan;

import java.util.Map;

import io.indexeddf.spark.exec.TableRelation;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * {@code SELECT ... FROM indexeddf.`/path`}: the name resolved to a relation over the table's
 * newest version, as delta-spark resolves {@code delta.`/path`} itself rather than leaving it to
 * Spark's SQL-on-files rule ({@code ResolveSQLOnFile}), which hands a V1 provider no path.
 *
 * <p>The session extensions inject it as a hint-resolution rule: the analyzer's "Hints" batch
 * runs before its "Resolution" batch, where {@code ResolveSQLOnFile} is, so the name is a
 * relation before Spark's rule could see it (views and subqueries are analysed by the same
 * batches). Also injected as a resolution rule, for names a later rule brings in. The target of
 * an insert is not a child of the insert: {@link ResolveInsert} resolves it with {@link #relation}.
 *
 * <p>When the session catalog is {@code IndexedDFCatalog} (as {@code indexeddf.configure} sets
 * it), the catalog loads such names ({@link IndexedDFTable}, read through {@link V1Fallback}),
 * which gives them Spark's time travel; this rule then leaves them alone.
 */
public final class ResolvePath extends Rule<LogicalPlan> {
    private final SparkSession session;

    public ResolvePath(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (session.sessionState().catalogManager().v2SessionCatalog() instanceof IndexedDFTable.PathCatalog) {
            return plan;  // the session catalog loads indexeddf.`/path` (time travel included)
        }
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
        return ident.size() == 2 && TableRelation.NAME.equalsIgnoreCase(ident.head());
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
        return LogicalRelation$.MODULE$.apply(TableRelation.read(sqlContext, params, null), false);
    }
}
