package io.indexeddf.spark.plan;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import io.indexeddf.spark.exec.CheckConstraints;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableRelation;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.plans.logical.AddCheckConstraint;
import org.apache.spark.sql.catalyst.plans.logical.DropConstraint;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.functions;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Delta's {@code ALTER TABLE t ADD CONSTRAINT name CHECK (expr)} and {@code ALTER TABLE t DROP
 * CONSTRAINT [IF EXISTS] name} on an indexeddf table ({@code t}, {@code db.t} or
 * {@code indexeddf.`/path`}): Spark's own parser reads both, and the connector's parser turns
 * them into this command when they name an indexeddf table ({@link #ofStatement}).
 *
 * <p>ADD checks the table's rows first, with Catalyst: the constraint's SQL, parsed by the
 * session's parser, over the table's rows at its newest version; a constraint that is no
 * condition is refused ({@code DELTA_NON_BOOLEAN_CHECK_CONSTRAINT}), and so is one that rows
 * break ({@code DELTA_NEW_CHECK_CONSTRAINT_VIOLATION}, {@code ConstraintViolationError}, naming
 * how many). Then the Python API's {@code add_constraint} commits {@code delta.constraints.<name>}
 * (the name in lower case) on that version, upgrading the protocol to writer 3 or the
 * feature {@code checkConstraints}; the commit reads every file, so a write committed since the
 * check fails it. DROP commits the configuration without the constraint
 * ({@code drop_constraint}); a name the table lacks is {@code ConstraintNotFoundError} unless
 * {@code IF EXISTS}. Both run through the Python data source as the maintenance statements do
 * ({@code _operation}, {@code indexeddf/spark/operation.py}).
 */
public final class ConstraintCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** The table's name parts, as the statement names it. */
    private final List<String> table;
    private final String name;
    /** The constraint's SQL (ADD), or null (DROP). */
    private final String expression;
    private final boolean ifExists;

    /**
     * The statement on the table {@code table} names (its parts): ADD of constraint {@code name}
     * with the SQL {@code expression}, or DROP ({@code expression} null; {@code ifExists}).
     */
    public ConstraintCommand(List<String> table, String name, String expression, boolean ifExists) {
        super(List.of());
        this.table = table;
        this.name = name;
        this.expression = expression;
        this.ifExists = ifExists;
    }

    /**
     * {@code plan} (what Spark's parser made of a statement) as this command when it is {@code
     * ADD CONSTRAINT ... CHECK} or {@code DROP CONSTRAINT} on an indexeddf table (the path
     * identifier, or a catalog entry whose provider is indexeddf); else {@code plan} itself.
     */
    public static LogicalPlan ofStatement(LogicalPlan plan) {
        if (plan instanceof AddCheckConstraint) {
            // Its child is Spark's own check of the table's rows: a filter over the table.
            AddCheckConstraint add = (AddCheckConstraint) plan;
            LogicalPlan table = add.child();
            while (table.children().size() == 1 && !(table instanceof UnresolvedRelation)) {
                table = table.children().head();
            }
            List<String> parts = table instanceof UnresolvedRelation
                ? CollectionConverters.asJava(((UnresolvedRelation) table).multipartIdentifier())
                : table instanceof UnresolvedTable
                    ? CollectionConverters.asJava(((UnresolvedTable) table).multipartIdentifier()) : null;
            return parts != null && isIndexedDF(parts) ? new ConstraintCommand(parts,
                add.checkConstraint().userProvidedName(), add.checkConstraint().condition(), false) : plan;
        }
        if (plan instanceof DropConstraint && ((DropConstraint) plan).table() instanceof UnresolvedTable) {
            DropConstraint drop = (DropConstraint) plan;
            List<String> parts = CollectionConverters.asJava(((UnresolvedTable) drop.table()).multipartIdentifier());
            return isIndexedDF(parts) ? new ConstraintCommand(parts, drop.name(), null, drop.ifExists()) : plan;
        }
        return plan;
    }

    private static boolean isIndexedDF(List<String> parts) {
        if (parts.size() == 2 && TableRelation.NAME.equalsIgnoreCase(parts.get(0))) {
            return true;
        }
        scala.Option<org.apache.spark.sql.SparkSession> active = org.apache.spark.sql.SparkSession.getActiveSession();
        if (active.isEmpty()) {
            return false;
        }
        try {
            SqlTable.resolve(active.get(), null, parts, "ADD CONSTRAINT");
            return true;
        } catch (IndexedDFException e) {
            return false;  // no such entry, or another provider's: Spark's own statement
        }
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        String what = "ALTER TABLE " + String.join(".", table) + (expression != null ? " ADD" : " DROP")
            + " CONSTRAINT";
        SqlTable t = SqlTable.resolve(session, null, table, what);
        String shown = t.qualifiedName != null ? t.qualifiedName : TableRelation.NAME + ".`" + t.path + "`";
        Map<String, Object> op = new LinkedHashMap<>();
        op.put("name", name);
        op.put("table", shown);
        if (expression != null) {
            op.put("operation", "addConstraint");
            op.put("expression", expression);
            op.put("checkedVersion", check(session, t, shown));
        } else {
            if (!has(t.log(session).snapshot(null), name)) {
                if (ifExists) {
                    return CollectionConverters.asScala(List.<Row>of()).toList();  // nothing to drop: no commit
                }
                throw new IndexedDFException("ConstraintNotFoundError", "[DELTA_CONSTRAINT_DOES_NOT_EXIST] Cannot drop "
                    + "nonexistent constraint " + name.toLowerCase(Locale.ROOT) + " from table " + shown + ". To avoid "
                    + "throwing an error, use DROP CONSTRAINT IF EXISTS.");
            }
            op.put("operation", "dropConstraint");
            op.put("ifExists", ifExists);
        }
        Map<String, String> options = new LinkedHashMap<>();
        options.put("path", t.path);
        if (t.storageOptions != null) {
            options.put("storageOptions", t.storageOptions);
        }
        try {
            options.put("_operation", DeltaLog.JSON.writeValueAsString(op));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IndexedDFException("IndexedDFError", "cannot write the statement as JSON: " + e, e);
        }
        // One row reaches the writer's commit through one task; it carries nothing.
        PythonWriter.save(session.sqlContext(), SaveMode.Append,
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options)),
            session.range(1).toDF());
        t.invalidate(session);
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    /** Whether the table has constraint {@code name} (names compare without case: delta-rs keeps a name's). */
    private static boolean has(Snapshot snapshot, String name) {
        for (String c : CheckConstraints.of(snapshot).keySet()) {
            if (c.equalsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    /** Checks the newest version's rows against the new constraint; returns that version. */
    private long check(SparkSession session, SqlTable t, String shown) {
        Snapshot snapshot = t.log(session).snapshot(null);
        String lower = name.toLowerCase(Locale.ROOT);
        String old = null;
        for (Map.Entry<String, String> c : CheckConstraints.of(snapshot).entrySet()) {
            if (c.getKey().equalsIgnoreCase(lower)) {  // delta-rs keeps the case a name was given in
                old = c.getValue();
            }
        }
        if (old != null) {
            throw new IndexedDFException("ConstraintExistsError", "[DELTA_CONSTRAINT_ALREADY_EXISTS] Constraint '"
                + lower + "' already exists. Please delete the old constraint first (ALTER TABLE " + shown
                + " DROP CONSTRAINT " + lower + "). Old constraint: " + old);
        }
        org.apache.spark.sql.DataFrameReader reader = session.read().format(TableRelation.NAME)
            .option("versionAsOf", Long.toString(snapshot.version));
        if (t.storageOptions != null) {
            reader = reader.option("storageOptions", t.storageOptions);
        }
        Dataset<Row> rows = reader.load(t.path);
        CheckConstraints.requireBoolean(rows, lower, expression);
        long bad = rows.filter(functions.not(functions.coalesce(functions.expr(expression), functions.lit(false))))
            .count();
        if (bad > 0) {
            throw new IndexedDFException("ConstraintViolationError", "[" + Spec.NEW_CONSTRAINT_VIOLATION + "] " + bad
                + " rows in " + shown + " violate the new CHECK constraint (" + expression + "). Fix or delete "
                + "those rows, then add the constraint again.");
        }
        return snapshot.version;
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {table, name, expression, ifExists};
    }
}
