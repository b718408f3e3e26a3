package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code SHOW INDEXES [IN | FROM] table}: one row per index of the table's newest version, what
 * {@code IndexedTable.indexes()} lists, sorted by name: {@code name}, {@code columns},
 * {@code kind} ({@code primary} or {@code secondary}), {@code state} ({@code ACTIVE},
 * {@code DELETED}, or an operation's transient state), {@code numBuckets},
 * {@code coveredVersion} (the table version whose live files the index covers), {@code numFiles}
 * and {@code sizeInBytes} (its index files) and {@code numEntries} (the rows they index). Read
 * from the table's log by the JVM.
 */
public final class ShowIndexesCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** The result columns. */
    public static final StructType SCHEMA = new StructType()
        .add("name", DataTypes.StringType)
        .add("columns", DataTypes.createArrayType(DataTypes.StringType))
        .add("kind", DataTypes.StringType)
        .add("state", DataTypes.StringType)
        .add("numBuckets", DataTypes.IntegerType)
        .add("coveredVersion", DataTypes.LongType)
        .add("numFiles", DataTypes.LongType)
        .add("sizeInBytes", DataTypes.LongType)
        .add("numEntries", DataTypes.LongType);

    private final String path;
    private final List<String> name;

    /** The indexes of the table named by {@code path} or {@code name} ({@link SqlTable}). */
    public ShowIndexesCommand(String path, List<String> name) {
        super(DescribeHistoryCommand.attributes(SCHEMA));
        this.path = path;
        this.name = name;
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        SqlTable table = SqlTable.resolve(session, path, name, "SHOW INDEXES");
        Snapshot snap = table.log(session).snapshot(null);
        Map<String, IndexLog.Entry> indexes = new TreeMap<>(snap.indexes == null ? Map.of() : snap.indexes);
        List<Row> rows = new ArrayList<>();
        for (IndexLog.Entry e : indexes.values()) {
            long size = 0;
            long entries = 0;
            for (IndexLog.IndexFile f : e.files) {
                size += f.size;
                entries += f.numEntries;
            }
            rows.add(RowFactory.create(e.name, new ArrayList<>(e.columns), e.kind, e.state, e.numBuckets,
                e.coveredVersion, (long) e.files.size(), size, entries));
        }
        return CollectionConverters.asScala(rows).toList();
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {path, name};
    }
}
