package io.indexeddf.spark.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.Snapshot;
import io.indexeddf.spark.exec.TableRelation;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code SHOW TBLPROPERTIES name [(key)]} of an indexeddf table: the newest version's
 * {@code metaData.configuration} as the table's log has it (what is in force, whoever set
 * it), sorted by name, never the catalog entry's copy. A key the table does not set gives the
 * row Spark gives for it ({@code Table ... does not have property: key}).
 */
public final class ShowPropertiesCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final List<Attribute> columns;
    private final String path;
    private final String key;
    private final String tableName;

    public ShowPropertiesCommand(List<Attribute> columns, String path, String key, String tableName) {
        super(columns);
        this.columns = columns;
        this.path = path;
        this.key = key;
        this.tableName = tableName;
    }

    /** The configuration of the newest version of the table at {@code path}, sorted by name. */
    static Map<String, String> configuration(SparkSession session, String path) {
        Configuration conf = session.sessionState().newHadoopConf();
        Snapshot snapshot = DeltaLog.open(TableRelation.tableRoot(path, conf), conf).snapshot(null);
        Map<String, String> out = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = snapshot.metadata.path("configuration").fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            out.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
        }
        return out;
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        Map<String, String> configuration = configuration(session, path);
        List<Row> rows = new ArrayList<>();
        if (key == null) {
            for (Map.Entry<String, String> e : configuration.entrySet()) {
                rows.add(RowFactory.create(e.getKey(), e.getValue()));
            }
        } else if (configuration.containsKey(key)) {
            rows.add(RowFactory.create(key, configuration.get(key)));
        } else {
            rows.add(RowFactory.create(key, "Table " + tableName + " does not have property: " + key));
        }
        return CollectionConverters.asScala(rows).toList();
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {columns, path, key, tableName};
    }
}
