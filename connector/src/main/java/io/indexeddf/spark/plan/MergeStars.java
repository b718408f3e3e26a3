package io.indexeddf.spark.plan;

import java.util.ArrayList;
import java.util.List;

import io.indexeddf.spark.exec.PythonWriter;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.InsertStarAction;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeAction;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.UpdateStarAction;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Which WHEN clauses of a MERGE were written {@code UPDATE SET *} / {@code INSERT *}: the
 * clauses that evolve the schema in {@code MERGE WITH SCHEMA EVOLUTION} (and in a plain MERGE
 * with {@code spark.indexeddf.schema.autoMerge.enabled}), as in Delta, where the source's
 * columns the table lacks join it.
 *
 * <p>Spark resolves a {@code *} clause into the target's columns, each from the source column of
 * its name, as soon as both sides are resolved, in the same analyzer batch as
 * {@link ResolveChanges}: after that an {@code UPDATE SET *} looks like an assignment of every
 * column, and the source's other columns are gone from it. Spark itself evolves the schema only
 * for a V2 relation ({@code DataSourceV2Relation}) whose table has the
 * {@code AUTOMATIC_SCHEMA_EVOLUTION} capability, through its catalog's {@code alterTable}
 * ({@code WriteWithSchemaEvolution.schemaEvolutionEnabled}); an indexeddf table is a V1 relation
 * (and {@code indexeddf.`/path`} is in no catalog), so Spark resolves its {@code *} clauses as for
 * any MERGE. This rule, a hint-resolution rule (the "Hints" batch runs before "Resolution"), tags
 * each MERGE with the positions of its {@code *} clauses while they are still {@code *};
 * TreeNode tags follow a plan node through the analyzer's rewrites of it.
 */
public final class MergeStars extends Rule<LogicalPlan> {
    static final TreeNodeTag<List<String>> STARS = new TreeNodeTag<>("indexeddf.merge.starClauses");

    public MergeStars(SparkSession session) {
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        plan.foreach(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
            @Override
            public BoxedUnit apply(LogicalPlan p) {
                if (p instanceof MergeIntoTable && p.getTagValue(STARS).isEmpty()) {
                    MergeIntoTable m = (MergeIntoTable) p;
                    List<String> stars = new ArrayList<>();
                    add(stars, "matched", m.matchedActions());
                    add(stars, "not_matched", m.notMatchedActions());
                    p.setTagValue(STARS, stars);
                }
                return BoxedUnit.UNIT;
            }
        });
        return plan;
    }

    private static void add(List<String> stars, String when, scala.collection.immutable.Seq<MergeAction> actions) {
        int i = 0;
        for (MergeAction a : CollectionConverters.asJava(actions)) {
            if (a instanceof UpdateStarAction || a instanceof InsertStarAction) {
                stars.add(key(when, i));
            }
            i++;
        }
    }

    static String key(String when, int position) {
        return when + "/" + position;
    }

    /** Whether the MERGE evolves the schema: {@code WITH SCHEMA EVOLUTION}, or the session's autoMerge. */
    static boolean evolves(SparkSession session, MergeIntoTable m) {
        return m.withSchemaEvolution()
            || "true".equalsIgnoreCase(session.conf().get(PythonWriter.AUTO_MERGE_CONF, "false").trim());
    }

    /** The {@code *} clauses of a resolved MERGE, or null when the analyzer lost the tag. */
    static List<String> of(MergeIntoTable m) {
        scala.Option<List<String>> stars = m.getTagValue(STARS);
        return stars.isDefined() ? stars.get() : null;
    }
}
