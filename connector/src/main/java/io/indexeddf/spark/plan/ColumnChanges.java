package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.FieldName;
import org.apache.spark.sql.catalyst.analysis.ResolvedFieldName;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.DropColumns;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.RenameColumn;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ALTER TABLE t RENAME COLUMN a TO b} and {@code ALTER TABLE t DROP COLUMN[S] [IF EXISTS]
 * (c, ...)} on an indexeddf table: one metadata commit to the table's log, made by the Python
 * API's {@code IndexedTable.rename_column} / {@code drop_columns} through
 * {@link TableOperationCommand} (so Spark's {@code AlterTableExec}, which would hand them to the
 * catalog's {@code alterTable} and wrap its typed errors, never sees them). Delta's rules, checked
 * there: the table needs column mapping ({@code delta.columnMapping.mode} = {@code name} or
 * {@code id}; without it the error says how to turn it on), a rename changes only the logical
 * name (a partition column's too: files and {@code partitionValues} keep its physical name), a
 * drop removes the field from the schema and leaves every file as it is; index and bucketing
 * columns are refused with the reason, and so is dropping a partition column. Nested struct fields
 * ({@code RENAME COLUMN s.a TO b}, {@code DROP COLUMN s.a}) too.
 *
 * <p>On a table the catalog loaded ({@code IndexedDFCatalog}: a catalog entry or
 * {@code indexeddf.`/path`}) Spark has resolved the columns, so their names are the table's (its
 * case) and a missing one is Spark's own error ({@code DROP COLUMNS IF EXISTS} leaves it out). On
 * {@code indexeddf.`/path`} in a session whose catalog is another, the names are as written and
 * the Python side resolves them.
 */
public final class ColumnChanges extends Rule<LogicalPlan> {
    public ColumnChanges(SparkSession session) {
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (plan instanceof RenameColumn) {
            RenameColumn rename = (RenameColumn) plan;
            Target t = target(rename.table(), List.of(rename.column()));
            return t == null ? plan
                : TableOperationCommand.renameColumn(t.path, t.name, names(rename.column()), rename.newName());
        }
        if (plan instanceof DropColumns) {
            DropColumns drop = (DropColumns) plan;
            List<FieldName> columns = CollectionConverters.asJava(drop.columnsToDrop());
            Target t = target(drop.table(), columns);
            if (t == null) {
                return plan;
            }
            List<List<String>> dropped = new ArrayList<>();
            for (FieldName c : columns) {
                dropped.add(names(c));
            }
            return TableOperationCommand.dropColumns(t.path, t.name, dropped, drop.ifExists());
        }
        return plan;
    }

    /** The table as {@link SqlTable#resolve} takes it: a path, or a name. */
    private static final class Target {
        final String path;
        final List<String> name;

        Target(String path, List<String> name) {
            this.path = path;
            this.name = name;
        }
    }

    /**
     * The indexeddf table a statement changes, or null: another table's, or one whose columns
     * Spark has not resolved yet (the rule sees the statement again once it has).
     */
    private static Target target(LogicalPlan table, List<FieldName> columns) {
        if (table instanceof ResolvedTable && ((ResolvedTable) table).table() instanceof IndexedDFTable) {
            for (FieldName c : columns) {
                if (!(c instanceof ResolvedFieldName)) {
                    return null;
                }
            }
            IndexedDFTable t = (IndexedDFTable) ((ResolvedTable) table).table();
            CatalogTable entry = t.entry();
            if (entry == null) {
                return new Target(t.path(), null);
            }
            List<String> name = new ArrayList<>();
            if (entry.identifier().database().isDefined()) {
                name.add(entry.identifier().database().get());
            }
            name.add(entry.identifier().table());
            return new Target(null, name);
        }
        if (table instanceof UnresolvedTable) {
            Seq<String> ident = ((UnresolvedTable) table).multipartIdentifier();
            if (ident.size() == 2 && TableRelation.NAME.equalsIgnoreCase(ident.head())) {
                return new Target(ident.last(), null);
            }
        }
        return null;
    }

    private static List<String> names(FieldName field) {
        return new ArrayList<>(CollectionConverters.asJava(field.name()));
    }
}
