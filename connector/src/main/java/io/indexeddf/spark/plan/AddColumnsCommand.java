package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.plans.logical.AddColumns;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.QualifiedColType;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ALTER TABLE ... ADD COLUMNS (...)} on an indexeddf table, as Spark runs it (eagerly,
 * once): one metadata commit to the table's log through the Python writer (the private write
 * option {@code _addColumns}: the columns as Spark's JSON, comments in their metadata), which
 * refuses with a typed error what {@code IndexedTable.add_columns} refuses. No data file is
 * written. On a catalog table Spark's own command then gives the catalog entry the new schema
 * (the commit comes first, so that a refused change leaves the entry as it was); a table named
 * {@code indexeddf.`/path`} has no entry: its log is all there is ({@link OnPath}).
 */
public final class AddColumnsCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final StructType columns;
    private final String path;
    private final String storageOptions;
    /** Spark's command updating the catalog entry, or null for a path. */
    private final AlterTableAddColumnsCommand alter;

    public AddColumnsCommand(StructType columns, String path, String storageOptions, AlterTableAddColumnsCommand alter) {
        super(List.of());  // no result rows
        this.columns = columns;
        this.path = path;
        this.storageOptions = storageOptions;
        this.alter = alter;
    }

    /** The command of a catalog table's {@code ALTER TABLE}, as Spark resolved it. */
    public static AddColumnsCommand ofCatalog(AlterTableAddColumnsCommand alter, String path, String storageOptions) {
        StructType columns = new StructType(CollectionConverters.asJava(alter.colsToAdd()).toArray(new StructField[0]));
        return new AddColumnsCommand(columns, path, storageOptions, alter);
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("path", path);
        if (storageOptions != null) {
            options.put("storageOptions", storageOptions);
        }
        options.put("_addColumns", columns.json());
        scala.collection.immutable.Map<String, String> params =
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
        // One row reaches the writer's commit through one task; it carries nothing.
        PythonWriter.save(session.sqlContext(), SaveMode.Append, params, session.range(1).toDF());
        if (alter != null) {
            alter.run(session);
            session.sessionState().catalog().invalidateCachedTable(alter.table());
        }
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    /**
     * {@code ALTER TABLE indexeddf.`/path` ADD COLUMNS (...)}: Spark's parser names the table
     * with an {@code UnresolvedTable} (not the {@code UnresolvedRelation} of a query, which
     * {@link ResolvePath} resolves), and no catalog knows the name, so Spark would say the
     * table does not exist. This rule turns the statement into an {@link AddColumnsCommand}
     * with the path. What Spark refuses for a V1 table's {@code ADD COLUMNS} is refused here
     * too, with the reason: a nested field, {@code NOT NULL}, a position, a default value.
     */
    public static final class OnPath extends Rule<LogicalPlan> {
        public OnPath(SparkSession session) {
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            if (plan instanceof AddColumns && ((AddColumns) plan).table() instanceof UnresolvedTable) {
                Seq<String> ident = ((UnresolvedTable) ((AddColumns) plan).table()).multipartIdentifier();
                if (ident.size() == 2 && TableRelation.NAME.equalsIgnoreCase(ident.head())) {
                    return new AddColumnsCommand(fields(((AddColumns) plan).columnsToAdd()), ident.last(), null, null);
                }
            }
            return plan;
        }

        static StructType fields(Seq<QualifiedColType> columns) {
            List<StructField> out = new ArrayList<>();
            for (QualifiedColType c : CollectionConverters.asJava(columns)) {
                String name = String.join(".", CollectionConverters.asJava(c.name()));
                // productElement(6) is the default value: "default" is a Java keyword.
                String refused = c.path().isDefined() ? "a nested field (add the whole struct column instead)"
                    : !c.nullable() ? "NOT NULL (rows written before the column have no value for it)"
                    : c.position().isDefined() ? "FIRST / AFTER (new columns go at the end, as Delta's ADD COLUMNS "
                        + "without column mapping puts them)"
                    : ((scala.Option<?>) c.productElement(6)).isDefined() ? "DEFAULT (rows written before the column read it as NULL)"
                    : null;
                if (refused != null) {
                    throw IndexedDFException.option("ALTER TABLE ... ADD COLUMNS " + name + ": an indexeddf table "
                        + "does not take " + refused);
                }
                MetadataBuilder metadata = new MetadataBuilder();
                if (c.comment().isDefined()) {
                    metadata.putString("comment", c.comment().get());
                }
                out.add(new StructField(c.colName(), c.dataType(), true, metadata.build()));
            }
            return new StructType(out.toArray(new StructField[0]));
        }
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {columns, path, storageOptions, alter};
    }
}
