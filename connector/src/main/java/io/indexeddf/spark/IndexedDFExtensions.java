package io.indexeddf.spark;

import io.indexeddf.spark.plan.AddColumnsCommand;
import io.indexeddf.spark.plan.BucketedOutcome;
import io.indexeddf.spark.plan.CatalogTables;
import io.indexeddf.spark.plan.ColumnChanges;
import io.indexeddf.spark.plan.CreateEmptyTable;
import io.indexeddf.spark.plan.DriverLookup;
import io.indexeddf.spark.plan.IndexedJoin;
import io.indexeddf.spark.plan.MergeStars;
import io.indexeddf.spark.plan.ResolveChanges;
import io.indexeddf.spark.plan.ResolveInsert;
import io.indexeddf.spark.plan.ReplaceTables;
import io.indexeddf.spark.plan.ResolvePath;
import io.indexeddf.spark.plan.TableChanges;
import io.indexeddf.spark.plan.TableStatements;
import io.indexeddf.spark.plan.UnneededBuckets;
import io.indexeddf.spark.plan.V1Fallback;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkPlan;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Session extensions ({@code spark.sql.extensions=io.indexeddf.spark.IndexedDFExtensions},
 * which {@code indexeddf.configure(builder)} sets): resolves
 * {@code SELECT ... FROM indexeddf.`/path`} to the table at that path ({@link ResolvePath}, a
 * hint-resolution rule, so it runs before Spark's SQL-on-files rule, which gives a V1 provider
 * no path) when the session catalog is not {@link IndexedDFCatalog}; {@link V1Fallback} reads the tables that
 * catalog loads through the connector's V1 relation. The Catalyst rules are in {@code io.indexeddf.spark.plan}. The analyzer rules for
 * SQL commands: {@link ResolveInsert} (inserts commit through the writer), {@link ResolveChanges}
 * (DELETE, UPDATE and MERGE INTO planned by Spark, written by its tasks), {@link CreateEmptyTable} (CREATE TABLE with columns),
 * {@link CatalogTables} (catalog entries read the newest version with the log's schema; ALTER TABLE ADD COLUMNS
 * commits the new columns, on {@code indexeddf.`/path`} too: {@link AddColumnsCommand.OnPath}; SET / UNSET / SHOW
 * TBLPROPERTIES are the log's), {@link ColumnChanges} (RENAME COLUMN, DROP COLUMNS), {@link TableStatements} (TRUNCATE TABLE, SHOW PARTITIONS), and the
 * hint-resolution rule {@link ReplaceTables} (REPLACE TABLE, CREATE OR REPLACE TABLE and
 * {@code writeTo().replace()} / {@code createOrReplace()} through Spark's staging catalog API). The
 * optimizer rules: {@link DriverLookup}, which answers index lookups on the driver with no
 * Spark job, and {@link IndexedJoin}, which answers the table's side of a join with a small
 * other side as an index lookup of that side's keys. The parser {@link IndexedDFSqlParser} adds Delta's
 * statements ({@code DESCRIBE HISTORY}, {@code DESCRIBE DETAIL}, {@code OPTIMIZE}, {@code VACUUM},
 * {@code RESTORE}, {@code CONVERT TO DELTA}, {@code CONVERT TO INDEXEDDF}, {@code SHOW INDEXES}) and the index statements ({@code CREATE INDEX}, {@code DROP INDEX}, {@code REFRESH INDEX}),
 * and hands every other text to Spark's. The table functions {@link TableChanges} are Delta's
 * {@code table_changes} and {@code table_changes_by_path} (the change data feed). The query-stage preparation rule
 * {@link UnneededBuckets} reads a table's scan unbucketed where nothing uses its bucketing. The planner
 * strategy {@link io.indexeddf.spark.plan.LookupRows} plans a driver lookup's rows with no code generated.
 */
public final class IndexedDFExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        // Delta's statements and the index statements; all other text is Spark's.
        extensions.injectParser(new scala.runtime.AbstractFunction2<SparkSession,
                org.apache.spark.sql.catalyst.parser.ParserInterface,
                org.apache.spark.sql.catalyst.parser.ParserInterface>() {
            @Override
            public org.apache.spark.sql.catalyst.parser.ParserInterface apply(SparkSession session,
                    org.apache.spark.sql.catalyst.parser.ParserInterface delegate) {
                return new IndexedDFSqlParser(delegate);
            }
        });
        // Analyzer rules (each session builds its own). indexeddf.`/path` first: the "Hints"
        // batch runs before the "Resolution" batch and its ResolveSQLOnFile.
        extensions.injectHintResolutionRule(rule(ResolvePath::new));
        // Before Spark expands a MERGE's * clauses: which ones evolve the schema.
        extensions.injectHintResolutionRule(rule(MergeStars::new));
        // REPLACE TABLE / CREATE OR REPLACE TABLE: before ResolveSessionCatalog refuses them.
        extensions.injectHintResolutionRule(rule(ReplaceTables::new));
        // Reads of a table by name with readChangeFeed: its feed, before Spark resolves its columns.
        extensions.injectHintResolutionRule(rule(TableChanges.ResolveReads::new));
        extensions.injectResolutionRule(rule(ResolvePath::new));
        extensions.injectResolutionRule(rule(V1Fallback::new));
        extensions.injectResolutionRule(rule(ResolveInsert::new));
        extensions.injectResolutionRule(rule(ResolveChanges::new));
        extensions.injectResolutionRule(rule(CatalogTables.FreshReads::new));
        extensions.injectResolutionRule(rule(CatalogTables.SchemaFromLog::new));
        extensions.injectResolutionRule(rule(CatalogTables.TableProperties::new));
        extensions.injectResolutionRule(rule(TableStatements::new));
        extensions.injectResolutionRule(rule(CatalogTables.RefuseAddColumns::new));
        extensions.injectResolutionRule(rule(AddColumnsCommand.OnPath::new));
        extensions.injectResolutionRule(rule(ColumnChanges::new));
        extensions.injectResolutionRule(rule(session -> new CreateEmptyTable()));
        // Delta's table functions of the change data feed.
        extensions.injectTableFunction(TableChanges.function(false));
        extensions.injectTableFunction(TableChanges.function(true));
        // Optimizer rules.
        extensions.injectOptimizerRule(rule(DriverLookup::new));
        extensions.injectOptimizerRule(rule(IndexedJoin::new));
        // Planning: a driver lookup's rows, already unsafe, with no code generated for them.
        extensions.injectPlannerStrategy(new AbstractFunction1<SparkSession, org.apache.spark.sql.execution.SparkStrategy>() {
            @Override
            public org.apache.spark.sql.execution.SparkStrategy apply(SparkSession session) {
                return new io.indexeddf.spark.plan.LookupRows();
            }
        });
        // Physical plans (adaptive execution): after Spark's own choice of bucketed scans.
        extensions.injectQueryStagePrepRule(new AbstractFunction1<SparkSession, Rule<SparkPlan>>() {
            @Override
            public Rule<SparkPlan> apply(SparkSession session) {
                return new UnneededBuckets();
            }
        });
        extensions.injectQueryStagePrepRule(new AbstractFunction1<SparkSession, Rule<SparkPlan>>() {
            @Override
            public Rule<SparkPlan> apply(SparkSession session) {
                return new BucketedOutcome();
            }
        });
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
}
