package io.indexeddf.spark.plan;

import io.indexeddf.spark.exec.PythonWriter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.command.AlterTableAddColumnsCommand;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ALTER TABLE name ADD COLUMNS (...)} on an indexeddf catalog table, as Spark runs it
 * (eagerly, once): first one metadata commit to the table's log through the Python writer
 * (the private write option {@code _addColumns}: the columns as Spark's JSON, comments in
 * their metadata), which refuses with a typed error what {@code IndexedTable.add_columns}
 * refuses; then Spark's own command, which gives the catalog entry the new schema. No data
 * file is written. The commit comes first so that a refused change leaves the entry as it was.
 */
public final class AddColumnsCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final AlterTableAddColumnsCommand alter;
    private final String path;
    private final String storageOptions;

    public AddColumnsCommand(AlterTableAddColumnsCommand alter, String path, String storageOptions) {
        super(List.of());  // no result rows
        this.alter = alter;
        this.path = path;
        this.storageOptions = storageOptions;
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
