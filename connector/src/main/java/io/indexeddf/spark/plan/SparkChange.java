package io.indexeddf.spark.plan;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import io.indexeddf.spark.exec.CheckConstraints;
import io.indexeddf.spark.exec.PythonWriter;
import io.indexeddf.spark.exec.TableParquetFormat;
import io.indexeddf.spark.exec.TableRelation;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.plans.logical.Assignment;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code DELETE FROM}, {@code UPDATE ... SET} and {@code MERGE INTO} on an indexeddf table, planned
 * and evaluated by Spark (docs/spark-tables.md; a MERGE's join: {@link MergeOutcome}): the
 * command builds a Spark plan over the connector's
 * relation at the version the statement resolved, with the file id ({@code _metadata.indexeddf_file_id})
 * and Spark's {@code _metadata.row_index} of every row the condition (Catalyst's own evaluation, so
 * any function, UDF or subquery works) selects, and for UPDATE the new values of each such row
 * (the assignments, evaluated by Spark). The rows are repartitioned by their file, so one task
 * holds every changed row of a file, and written by the Python data source's tasks
 * ({@code indexeddf/spark/apply.py}): each writes its files' deletion vectors, or copies their
 * kept rows into new files, and the updated rows as new bucketed files with their index
 * entries (and a MERGE's inserts). The driver commits once, on the version read. The result row
 * is Delta's ({@code num_affected_rows}, and a MERGE's counts).
 */
public final class SparkChange extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** The outcome's columns before the target's: what happens to the row, its file and its ordinal. */
    static final String OP = "__indexeddf_op";
    static final String FILE = "__indexeddf_file";
    static final String ROW = "__indexeddf_row";
    /** The partition a changed row is written from, set only where {@link BucketedOutcome} lets
     * the tasks write the outcome where the join leaves it (null elsewhere): the write task
     * (indexeddf/spark/apply.py) writes each partition's rows as it ends, so a task that writes
     * several buckets holds one bucket's rows at a time. */
    static final String PART = "__indexeddf_part";
    /** The Python writer's option that makes a write the outcome of a change (indexeddf/spark/apply.py). */
    static final String APPLY_OPTION = "changeApply";

    private final LogicalRelation target;
    private final String operation;
    /** The plan of the changed rows ({@link #outcome}): a field, not an expression of the command,
     * so that Spark checks a subquery in the condition where it stands (a filter), not here. */
    private final LogicalPlan outcome;
    /** The commit's parameters for the table's history, as JSON (Delta's: the predicate as text). */
    private final String parameters;

    public SparkChange(LogicalRelation target, String operation, LogicalPlan outcome, String parameters) {
        super(ChangeCommand.resultColumns(operation));
        this.target = target;
        this.operation = operation;
        this.outcome = outcome;
        this.parameters = parameters;
    }

    /** A MERGE of {@code m}'s source into {@code target} (the plan: {@link MergeOutcome}). */
    static SparkChange merge(LogicalRelation target, org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable m) {
        return new SparkChange(target, "MERGE", MergeOutcome.of(target, m), MergeOutcome.parameters(target, m));
    }

    /**
     * A DELETE ({@code assignments} null) or an UPDATE of {@code target}, the rows where
     * {@code condition} holds (null: every row).
     */
    static SparkChange of(LogicalRelation target, String operation, Expression condition,
                          List<Assignment> assignments) {
        ObjectNode parameters = JsonNodeFactory.instance.objectNode();
        if (condition != null) {
            parameters.put("predicate", condition.sql());
        }
        return new SparkChange(target, operation, outcome(target, operation, condition, assignments),
            parameters.toString());
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        Snapshot snapshot = DriverLookup.snapshotOf(target);
        String resultFile = new File(System.getProperty("java.io.tmpdir"),
            "indexeddf-change-" + java.util.UUID.randomUUID() + ".json").getPath();
        Map<String, String> options = new LinkedHashMap<>(TableWriter.tableOptions(target));
        options.put(APPLY_OPTION, spec(session, snapshot.version, resultFile));
        PythonWriter.requirePythonSource((org.apache.spark.sql.classic.SparkSession) session);
        Dataset<Row> rows = org.apache.spark.sql.classic.Dataset.ofRows(
            (org.apache.spark.sql.classic.SparkSession) session, outcome);
        Map<String, String> constraints = CheckConstraints.of(snapshot);
        if (!constraints.isEmpty() && !"DELETE".equals(operation)) {
            // Updated and inserted rows keep the table's CHECK constraints, evaluated by Catalyst.
            rows = rows.filter(CheckConstraints.check(rows, constraints, rows.col(OP).isin("update", "insert")));
        }
        try {
            PythonWriter.save(session, rows.write().format(TableRelation.PYTHON_NAME).mode(SaveMode.Append).options(options));
        } catch (Exception e) {  // Spark's AnalysisException is a checked exception to Java
            throw PythonWriter.unwrapped(e);  // the typed error the statement's Python tasks raised
        }
        if (target.catalogTable().isDefined()) {  // the next query of the table reads the new version
            session.sessionState().catalog().invalidateCachedTable(target.catalogTable().get().identifier());
        }
        Row result;
        try {
            File f = new File(resultFile);
            JsonNode m = new ObjectMapper().readTree(Files.readString(f.toPath())).path("metrics");
            Files.deleteIfExists(f.toPath());
            result = ChangeCommand.resultRow(operation, m);
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "the " + operation + " committed, but its metrics could "
                + "not be read from " + resultFile + ": " + e + " (IndexedTable.history() has them)", e);
        }
        return CollectionConverters.asScala(List.of(result)).toList();
    }

    /** What the Python side needs besides the rows: the operation, the version read, where the metrics go, Delta's txn. */
    private String spec(SparkSession session, long version, String resultFile) {
        ObjectNode json = JsonNodeFactory.instance.objectNode();
        ChangeSpec.idempotency(session, json);
        json.put("operation", operation);
        json.put("readVersion", version);
        json.put("parameters", parameters);
        json.put("resultFile", resultFile);
        return json.toString();
    }

    /**
     * The plan of the changed rows: {@link #OP}, {@link #FILE}, {@link #ROW}, then (UPDATE)
     * the target's columns with their new values; repartitioned by file.
     */
    private static LogicalPlan outcome(LogicalRelation target, String operation, Expression condition,
                                       List<Assignment> assignments) {
        LogicalRelation withMeta = target.withMetadataColumns();
        LogicalPlan rows = condition == null ? withMeta : new Filter(condition, withMeta);
        List<NamedExpression> columns = new ArrayList<>();
        columns.add(alias(Literal.create(operation.toLowerCase(java.util.Locale.ROOT), DataTypes.StringType), OP));
        columns.addAll(rowId(withMeta));
        if (assignments != null) {
            // By expression id: the assignment's column may carry another qualifier than the relation's.
            Map<org.apache.spark.sql.catalyst.expressions.ExprId, Expression> set = new LinkedHashMap<>();
            for (Assignment a : assignments) {
                if (!(a.key() instanceof Attribute)) {
                    throw IndexedDFException.option("an indexeddf UPDATE sets whole columns; " + a.key().sql()
                        + " is not one (set the struct column to a new struct instead)");
                }
                set.put(((Attribute) a.key()).exprId(), a.value());
            }
            for (Attribute a : CollectionConverters.asJava(target.output())) {
                Expression value = set.get(a.exprId());
                columns.add(value == null ? a : alias(value, a.name()));
            }
        }
        columns.add(partColumn());
        Project project = new Project(CollectionConverters.asScala(columns).toList(), rows);
        Attribute file = project.output().apply(1);
        return new RepartitionByExpression(CollectionConverters.asScala(List.<Expression>of(file)).toList(), project,
            Option.empty(), Option.empty());
    }

    /** {@link #FILE} and {@link #ROW} of a relation with its metadata columns: the file's id
     * ({@code _metadata.indexeddf_file_id}, {@link TableParquetFormat}: a long per row, where the
     * file's path would be a long string that a MERGE's join carries for every target row it
     * reads) and Spark's {@code _metadata.row_index}. */
    static List<Alias> rowId(LogicalRelation withMeta) {
        Attribute meta = DriverLookup.metadataColumn(
            new ArrayList<Attribute>(CollectionConverters.asJava(withMeta.metadataOutput())));
        if (meta == null) {
            throw new IndexedDFException("IndexedDFError", "the table's relation gives no _metadata column; "
                + "a change cannot name the rows it changes");
        }
        StructType fields = (StructType) meta.dataType();
        String id = TableParquetFormat.FILE_ID;
        return List.of(
            alias(new GetStructField(meta, fields.fieldIndex(id), Option.apply(id)), FILE),
            alias(new GetStructField(meta, fields.fieldIndex("row_index"), Option.apply("row_index")), ROW));
    }

    /** {@link #PART}, null until {@link BucketedOutcome} sets it. */
    static Alias partColumn() {
        return alias(Literal.create(null, DataTypes.IntegerType), PART);
    }

    static Alias alias(Expression e, String name) {
        return new Alias(e, name, NamedExpression$.MODULE$.newExprId(),
            CollectionConverters.asScala(List.<String>of()).toList(), Option.empty(),
            CollectionConverters.asScala(List.<String>of()).toList());
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {target, operation, outcome, parameters};
    }
}
