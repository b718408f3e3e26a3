package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.InsertReplaceWhere;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.runtime.AbstractPartialFunction;

/**
 * {@code INSERT INTO} / {@code INSERT OVERWRITE} an indexeddf table ({@code CREATE TABLE ...
 * USING indexeddf LOCATION ...}, {@code indexeddf.`/path`}, {@code df.write.insertInto(name)})
 * as a commit of the Python writer, like {@code df.write.format("indexeddf")}.
 *
 * <p>The table reads as Spark's own file relation (for native Parquet scans), and Spark
 * would write an insert into such a relation as plain Parquet files in the table's folder:
 * an {@code INSERT INTO} lost its rows (files no commit names) and an {@code INSERT
 * OVERWRITE} deleted the folder, log and all. This resolution rule runs before Spark's own
 * (post-hoc) insert planning and gives the insert a relation that writes through the
 * connector's save path instead ({@link InsertableRelation}: Spark casts the rows to the
 * table's schema first, as for its own tables). {@code INSERT INTO ... REPLACE WHERE
 * <predicate>} is the write option {@code replaceWhere} (Delta's SQL form of it).
 */
public final class ResolveInsert extends Rule<LogicalPlan> {
    private final SparkSession session;

    public ResolveInsert(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        return plan.resolveOperatorsDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return p instanceof InsertIntoStatement && (tableOf((InsertIntoStatement) p) != null
                    || ResolvePath.namesPath(((InsertIntoStatement) p).table()));
            }

            @Override
            public LogicalPlan apply(LogicalPlan p) {
                InsertIntoStatement i = (InsertIntoStatement) p;
                // The target is not a child of the insert: the path rule does not see it.
                LogicalRelation lr = i.table() instanceof LogicalRelation ? (LogicalRelation) i.table()
                    : ResolvePath.relation(session, (UnresolvedRelation) i.table());
                if (!i.partitionSpec().isEmpty()) {
                    throw IndexedDFException.option("a PARTITION clause is not supported on indexeddf tables: "
                        + "rows go to the partitions their values name (when the table has partitions); insert "
                        + "without it, and replace a partition with INSERT INTO ... REPLACE WHERE <predicate>");
                }
                String replaceWhere = null;
                if (i.copy$default$8().isDefined()) {
                    if (!(i.copy$default$8().get() instanceof InsertReplaceWhere)) {
                        throw IndexedDFException.option("INSERT ... REPLACE ON / REPLACE USING is not supported on "
                            + "indexeddf tables: use INSERT INTO ... REPLACE WHERE <predicate>, or MERGE INTO");
                    }
                    // The Python writer parses the predicate against the table (replaceWhere).
                    replaceWhere = ((InsertReplaceWhere) i.copy$default$8().get()).cond().sql();
                }
                Writer writer = new Writer(session, lr, replaceWhere);
                LogicalRelation writable = lr.copy(writer, lr.output(), lr.catalogTable(), false, lr.stream());
                return i.copy(writable, i.partitionSpec(), i.copy$default$3(), i.query(), i.overwrite(),
                    i.copy$default$6(), i.copy$default$7(), scala.Option.empty(), i.copy$default$9());
            }
        });
    }

    /** The table an insert goes to, when it is an indexeddf table read through the connector. */
    private static Snapshot tableOf(InsertIntoStatement i) {
        return i.table() instanceof LogicalRelation ? DriverLookup.snapshotOf(i.table()) : null;
    }

    /**
     * The table as Spark's inserts see it: its schema, and a write through the connector's save
     * path; with {@code replaceWhere} ({@code INSERT INTO ... REPLACE WHERE}) a selective
     * overwrite of the rows it selects, as the {@code replaceWhere} write option makes one.
     */
    static final class Writer extends TableWriter {
        private final boolean replace;

        Writer(SparkSession session, LogicalRelation lr, String replaceWhere) {
            super(session, lr, ((HadoopFsRelation) lr.relation()).dataSchema());
            replace = replaceWhere != null;
            if (replace) {
                options.put("replaceWhere", replaceWhere);
            }
        }

        @Override
        public void insert(Dataset<Row> data, boolean overwrite) {
            save(data, overwrite || replace ? SaveMode.Overwrite : SaveMode.Append, true);
        }
    }
}
