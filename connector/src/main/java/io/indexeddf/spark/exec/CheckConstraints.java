package io.indexeddf.spark.exec;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.log.Spec;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Delta's CHECK constraints ({@code delta.constraints.<name>} in the table's configuration) in
 * the plans Spark writes, evaluated by Catalyst, as delta-spark's {@code DeltaInvariantCheckerExec}
 * evaluates them: each constraint's SQL is parsed by the session's parser ({@code functions.expr})
 * against the written rows, and a row for which it is false or NULL fails the job with Delta's
 * {@code DELTA_VIOLATE_CONSTRAINT_WITH_VALUES} message naming the row's values of the columns the
 * constraint reads ({@code ConstraintViolationError}). Nothing is committed then: the Python
 * writer commits on the driver only after every task succeeded.
 *
 * <p>The check is a filter whose condition is never false (it raises instead) and is not
 * deterministic, so Spark's optimizer keeps it above every join, aggregate and limit of the
 * written query: only rows that are written are checked.
 */
public final class CheckConstraints {
    private CheckConstraints() {
    }

    /** The constraints of a table's snapshot, name to SQL, in the log's order. */
    public static Map<String, String> of(Snapshot snapshot) {
        Map<String, String> out = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = snapshot.metadata.path("configuration").fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            if (e.getKey().startsWith(Spec.CONSTRAINT_PREFIX) && e.getValue().isTextual()) {
                out.put(e.getKey().substring(Spec.CONSTRAINT_PREFIX.length()), e.getValue().asText());
            }
        }
        return out;
    }

    /**
     * {@code data}, a write of table rows to the table at {@code path}, with a check of every
     * constraint the table has now; the constraints checked go into {@code opts} as the Python
     * writer's {@link Spec#CHECKED_CONSTRAINTS_OPTION}, so its tasks do not check them again
     * (one added meanwhile is checked there). {@code data} itself when there is no table yet
     * or it has no constraint.
     */
    public static Dataset<Row> forWrite(org.apache.spark.sql.SparkSession session, String path, Dataset<Row> data,
                                        Map<String, String> opts) {
        org.apache.hadoop.conf.Configuration conf = session.sessionState().newHadoopConf();
        Map<String, String> constraints;
        StructType table;
        try {
            Snapshot snapshot = DeltaLog.open(TableRelation.tableRoot(path, conf), conf).snapshot(null);
            constraints = of(snapshot);
            if (constraints.isEmpty()) {
                return data;
            }
            table = ColumnMapping.tableSchema(snapshot);
        } catch (RuntimeException e) {
            return data;  // no table yet (or none the connector reads): the Python writer's tasks check
        }
        List<Column> original = new ArrayList<>();
        java.util.Set<String> present = new java.util.HashSet<>();
        for (String c : data.columns()) {
            original.add(data.col(quoted(c)));
            present.add(c.toLowerCase(Locale.ROOT));
        }
        Dataset<Row> withAll = data;
        for (StructField f : table.fields()) {  // columns the write leaves out are NULL in the table
            if (!present.contains(f.name().toLowerCase(Locale.ROOT))) {
                withAll = withAll.withColumn(f.name(), functions.lit(null).cast(f.dataType()));
            }
        }
        Dataset<Row> checked = withAll.filter(check(withAll, constraints, null));
        try {
            opts.put(Spec.CHECKED_CONSTRAINTS_OPTION, DeltaLog.JSON.writeValueAsString(constraints));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IndexedDFException("IndexedDFError", "cannot write the constraints as JSON: " + e, e);
        }
        List<Column> back = new ArrayList<>();
        for (String c : data.columns()) {
            back.add(checked.col(quoted(c)));
        }
        return checked.select(back.toArray(new Column[0]));
    }

    /**
     * The filter condition that checks {@code constraints} on the rows of {@code rows} (true
     * for every row it lets through; a row that breaks one fails the task). {@code only}: a
     * condition selecting the rows to check (the others pass), or null for all.
     */
    public static Column check(Dataset<Row> rows, Map<String, String> constraints, Column only) {
        Column all = functions.lit(true);
        for (Map.Entry<String, String> c : constraints.entrySet()) {
            Column holds = functions.coalesce(functions.expr(c.getValue()), functions.lit(false));
            Column one = functions.when(holds, functions.lit(true))
                .otherwise(RAISE.apply(message(rows, c.getKey(), c.getValue())));
            all = all.and(one);
        }
        return only == null ? all : functions.when(only, all).otherwise(functions.lit(true));
    }

    /**
     * The analysed type of constraint {@code sql} over {@code rows}' columns: Spark's error for
     * SQL that does not parse or names a column the table lacks, and Delta's when it is no
     * condition ({@code DELTA_NON_BOOLEAN_CHECK_CONSTRAINT}).
     */
    public static void requireBoolean(Dataset<Row> rows, String name, String sql) {
        org.apache.spark.sql.types.DataType t = rows.select(functions.expr(sql)).schema().fields()[0].dataType();
        if (!t.equals(DataTypes.BooleanType)) {
            throw IndexedDFException.option("[DELTA_NON_BOOLEAN_CHECK_CONSTRAINT] CHECK constraint '" + name + "' ("
                + sql + ") should be a boolean expression; it gives " + t.simpleString());
        }
    }

    /** Delta's message for a row that breaks constraint {@code name}, with the row's values of the columns it reads. */
    private static Column message(Dataset<Row> rows, String name, String sql) {
        List<Column> parts = new ArrayList<>();
        parts.add(functions.lit("[" + Spec.CONSTRAINT_VIOLATION + "] CHECK constraint " + name + " (" + sql
            + ") violated by row with values:"));
        for (String column : referenced(rows, sql)) {
            parts.add(functions.lit("\n - " + column + " : "));
            parts.add(functions.coalesce(rows.col(quoted(column)).cast(DataTypes.StringType), functions.lit("null")));
        }
        return functions.concat(parts.toArray(new Column[0]));
    }

    /** The columns of {@code rows} that {@code sql} reads, in the rows' order. */
    private static List<String> referenced(Dataset<Row> rows, String sql) {
        LogicalPlan analyzed = rows.select(functions.expr(sql)).queryExecution().analyzed();
        java.util.Set<String> used = new java.util.HashSet<>();
        if (analyzed instanceof Project) {
            for (Attribute a : CollectionConverters.asJava(
                    ((org.apache.spark.sql.catalyst.expressions.Expression) ((Project) analyzed).projectList().head())
                        .references().toSeq())) {
                used.add(a.name());
            }
        }
        List<String> out = new ArrayList<>();
        for (String c : rows.columns()) {
            if (used.contains(c)) {
                out.add(c);
            }
        }
        return out;
    }

    private static String quoted(String column) {
        return "`" + column.replace("`", "``") + "`";
    }

    /** Throws the typed violation with the message it is given (never returns). */
    static final class Raise implements UDF1<String, Boolean> {
        private static final long serialVersionUID = 1L;

        @Override
        public Boolean call(String message) {
            throw new IndexedDFException("ConstraintViolationError", message);
        }
    }

    /** {@link Raise} as a non-deterministic UDF: the optimizer keeps the check where it is written. */
    private static final UserDefinedFunction RAISE =
        functions.udf(new Raise(), DataTypes.BooleanType).asNondeterministic();
}
