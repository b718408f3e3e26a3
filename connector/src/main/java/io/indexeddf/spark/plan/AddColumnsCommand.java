package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.PythonWriter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Statistics;
import org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand;
import org.apache.spark.sql.execution.command.LeafRunnableCommand;
import org.apache.spark.sql.execution.command.RunnableCommand;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Enumeration;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ALTER TABLE name ADD COLUMNS (...)} on an indexeddf catalog table, as Spark runs it
 * (eagerly, once): first one metadata commit to the table's log through the Python writer
 * (the private write option {@code _addColumns}: the columns as Spark's JSON, comments in
 * their metadata), which refuses with a typed error what {@code IndexedTable.add_columns}
 * refuses; then Spark's own command, which gives the catalog entry the new schema. No data
 * file is written. The commit comes first so that a refused change leaves the entry as it was.
 *
 * <p>Written in Java against Scala traits: the constructor runs the traits' initialisers and
 * the methods both {@code LogicalPlan} and a trait define say which one holds, as Scala's
 * linearisation would.
 */
public final class AddColumnsCommand extends LogicalPlan implements LeafRunnableCommand {
    private static final long serialVersionUID = 1L;

    private final AlterTableAddColumnsCommand alter;
    private final String path;
    private final String storageOptions;
    private Seq<Enumeration.Value> nodePatterns;

    public AddColumnsCommand(AlterTableAddColumnsCommand alter, String path, String storageOptions) {
        this.alter = alter;
        this.path = path;
        this.storageOptions = storageOptions;
        Command.$init$(this);
        RunnableCommand.$init$(this);
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        List<StructField> columns = CollectionConverters.asJava(alter.colsToAdd());
        Map<String, String> options = new LinkedHashMap<>();
        options.put("path", path);
        if (storageOptions != null) {
            options.put("storageOptions", storageOptions);
        }
        options.put("_addColumns", new StructType(columns.toArray(new StructField[0])).json());
        scala.collection.immutable.Map<String, String> params =
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
        // One row reaches the writer's commit through one task; it carries nothing.
        PythonWriter.save(session.sqlContext(), SaveMode.Append, params, session.range(1).toDF());
        alter.run(session);
        session.sessionState().catalog().invalidateCachedTable(alter.table());
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    // -- what Scala's linearisation would pick -------------------------------------------------
    @Override
    public Seq<Attribute> output() {
        return CollectionConverters.asScala(List.<Attribute>of()).toList();
    }

    @Override
    public AttributeSet producedAttributes() {
        return LeafRunnableCommand.super.producedAttributes();
    }

    @Override
    public Statistics stats() {
        return LeafRunnableCommand.super.stats();
    }

    @Override
    public Seq<LogicalPlan> children() {
        return CollectionConverters.asScala(List.<LogicalPlan>of()).toList();
    }

    @Override
    public LogicalPlan withNewChildrenInternal(scala.collection.immutable.IndexedSeq<LogicalPlan> children) {
        return this;
    }

    @Override
    public Seq<Enumeration.Value> nodePatterns() {
        return nodePatterns;
    }

    @Override
    public void org$apache$spark$sql$catalyst$plans$logical$Command$_setter_$nodePatterns_$eq(
            Seq<Enumeration.Value> patterns) {
        this.nodePatterns = patterns;
    }

    // -- Product: the constructor's arguments, as TreeNode.makeCopy expects -------------------
    @Override
    public int productArity() {
        return 3;
    }

    @Override
    public Object productElement(int n) {
        switch (n) {
            case 0:
                return alter;
            case 1:
                return path;
            case 2:
                return storageOptions;
            default:
                throw new IndexOutOfBoundsException(String.valueOf(n));
        }
    }

    @Override
    public boolean canEqual(Object other) {
        return other instanceof AddColumnsCommand;
    }
}
