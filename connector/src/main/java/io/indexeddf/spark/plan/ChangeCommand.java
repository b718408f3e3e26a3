package io.indexeddf.spark.plan;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.indexeddf.log.IndexedDFException;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.InsertIntoDataSourceCommand;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A DELETE, UPDATE or MERGE on an indexeddf table as Spark runs it (eagerly, as a command):
 * the insert of {@link ResolveChanges.ChangeWriter} that runs the change, then the row of
 * numbers Delta's own commands return ({@code num_affected_rows}, and for a MERGE
 * {@code num_updated_rows}, {@code num_deleted_rows}, {@code num_inserted_rows}), read from
 * the file the Python commit leaves them in.
 */
public final class ChangeCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final LogicalRelation writable;
    private final LogicalPlan rows;
    private final String operation;
    private final String resultFile;

    public ChangeCommand(LogicalRelation writable, LogicalPlan rows, String operation, String resultFile) {
        super(resultColumns(operation));
        this.writable = writable;
        this.rows = rows;
        this.operation = operation;
        this.resultFile = resultFile;
    }

    /** Delta's result columns of the operation, as longs. */
    static List<Attribute> resultColumns(String operation) {
        List<Attribute> attrs = new ArrayList<>();
        for (String name : columns(operation)) {
            attrs.add(new AttributeReference(name, DataTypes.LongType, false, Metadata.empty(),
                NamedExpression$.MODULE$.newExprId(), CollectionConverters.asScala(List.<String>of()).toList()));
        }
        return attrs;
    }

    private static List<String> columns(String operation) {
        return "MERGE".equals(operation)
            ? List.of("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")
            : List.of("num_affected_rows");
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        new InsertIntoDataSourceCommand(writable, rows, false).run(session);
        JsonNode m;
        try {
            File f = new File(resultFile);
            m = new ObjectMapper().readTree(Files.readString(f.toPath())).path("metrics");
            Files.deleteIfExists(f.toPath());
        } catch (IOException e) {
            throw new IndexedDFException("IndexedDFError", "the change committed, but its metrics could not be read from "
                + resultFile + ": " + e + " (IndexedTable.history() has them)", e);
        }
        Row row = resultRow(operation, m);
        return CollectionConverters.asScala(List.of(row)).toList();
    }

    /** Delta's result row of the operation from the change's metrics (the Python commit's names). */
    static Row resultRow(String operation, JsonNode m) {
        long updated = m.path("num_target_rows_updated").asLong();
        long deleted = m.path("num_target_rows_deleted").asLong();
        long inserted = m.path("num_target_rows_inserted").asLong();
        if ("MERGE".equals(operation)) {
            return RowFactory.create(updated + deleted + inserted, updated, deleted, inserted);
        }
        return RowFactory.create("UPDATE".equals(operation) ? updated : deleted);
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {writable, rows, operation, resultFile};
    }
}
