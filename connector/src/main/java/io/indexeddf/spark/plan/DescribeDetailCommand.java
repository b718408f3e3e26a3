package io.indexeddf.spark.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.indexeddf.log.AddFile;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.Snapshot;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code DESCRIBE DETAIL table}: one row with the columns and types of Delta's statement
 * (format, id, name, description, location, createdAt, lastModified, partitionColumns,
 * clusteringColumns, numFiles, sizeInBytes, properties, minReaderVersion, minWriterVersion,
 * tableFeatures), from the newest version of the table's log. {@code format} is
 * {@code indexeddf} (the provider the table is created with; on storage it is a Delta table);
 * {@code name} is the catalog entry's qualified name, or the log's {@code metaData.name} for a
 * table named by path; {@code lastModified} is the modification time of the newest commit's
 * file, as in Delta; {@code clusteringColumns} is empty (indexeddf tables are bucketed by their
 * index columns, which {@code properties} names); {@code tableFeatures} are the features the
 * protocol names ({@code readerFeatures} and {@code writerFeatures}, sorted; a protocol below
 * writer version 7 names none).
 */
public final class DescribeDetailCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** Delta's {@code DESCRIBE DETAIL} columns. */
    public static final StructType SCHEMA = new StructType()
        .add("format", DataTypes.StringType)
        .add("id", DataTypes.StringType)
        .add("name", DataTypes.StringType)
        .add("description", DataTypes.StringType)
        .add("location", DataTypes.StringType)
        .add("createdAt", DataTypes.TimestampType)
        .add("lastModified", DataTypes.TimestampType)
        .add("partitionColumns", DataTypes.createArrayType(DataTypes.StringType))
        .add("clusteringColumns", DataTypes.createArrayType(DataTypes.StringType))
        .add("numFiles", DataTypes.LongType)
        .add("sizeInBytes", DataTypes.LongType)
        .add("properties", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType))
        .add("minReaderVersion", DataTypes.IntegerType)
        .add("minWriterVersion", DataTypes.IntegerType)
        .add("tableFeatures", DataTypes.createArrayType(DataTypes.StringType));

    private final String path;
    private final List<String> name;

    /** The detail of the table named by {@code path} or {@code name} ({@link SqlTable}). */
    public DescribeDetailCommand(String path, List<String> name) {
        super(DescribeHistoryCommand.attributes(SCHEMA));
        this.path = path;
        this.name = name;
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        SqlTable table = SqlTable.resolve(session, path, name, "DESCRIBE DETAIL");
        DeltaLog log = table.log(session);
        Snapshot snap = log.snapshot(null);
        JsonNode meta = snap.metadata;
        long size = 0;
        for (AddFile f : snap.files) {
            size += f.size;
        }
        Map<String, String> properties = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = meta.path("configuration").fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            properties.put(e.getKey(), DescribeHistoryCommand.text(e.getValue()));
        }
        TreeSet<String> features = new TreeSet<>();
        for (String list : new String[] {"readerFeatures", "writerFeatures"}) {
            for (JsonNode f : snap.protocol.path(list)) {
                features.add(f.asText());
            }
        }
        Row row = RowFactory.create(
            io.indexeddf.spark.exec.TableRelation.NAME,
            DescribeHistoryCommand.text(meta.get("id")),
            table.qualifiedName != null ? table.qualifiedName : DescribeHistoryCommand.text(meta.get("name")),
            DescribeHistoryCommand.text(meta.get("description")),
            snap.root.toString(),
            meta.hasNonNull("createdTime") ? new Timestamp(meta.get("createdTime").asLong()) : null,
            new Timestamp(log.fileModificationTime(snap.version)),
            snap.partitionColumns(),
            List.of(),
            (long) snap.files.size(),
            size,
            properties,
            snap.protocol.path("minReaderVersion").asInt(),
            snap.protocol.path("minWriterVersion").asInt(),
            new ArrayList<>(features));
        return CollectionConverters.asScala(List.of(row)).toList();
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {path, name};
    }
}
