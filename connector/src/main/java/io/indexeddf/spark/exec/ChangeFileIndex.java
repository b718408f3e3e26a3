package io.indexeddf.spark.exec;

import io.indexeddf.log.ChangeFeed;
import io.indexeddf.log.Snapshot;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The files of a change data feed read ({@link ChangeFeed.Change}s), each with the values the
 * feed adds to its rows as partition values: the commit's version and time, and, for a file a
 * commit added or removed, its change type. Spark's Parquet scan then reads the files in its
 * tasks and gives every row of a file the same values, as it gives a partition column's, with no
 * per-row work on the driver; a filter on {@code _commit_version} skips the other commits' files.
 * The table's own partition columns come first, from each file's {@code partitionValues}, as in
 * {@link SnapshotFileIndex}; each file's deletion vector rides with it to
 * {@link DeletionVectorFormat}.
 */
public final class ChangeFileIndex implements FileIndex {
    private static final long BLOCK_SIZE = 128L * 1024 * 1024;

    private final Path root;
    private final StructType partitionSchema;
    private final List<FileStatusWithMetadata> files = new ArrayList<>();
    private final LinkedHashMap<List<Object>, List<FileStatusWithMetadata>> byPartition = new LinkedHashMap<>();
    private final Map<List<Object>, InternalRow> partitionRows = new LinkedHashMap<>();
    private long size;

    /**
     * The index of {@code changes}, all of one kind: change data files ({@code changeData}:
     * their rows carry {@code _change_type}) or added and removed files (their change type is
     * a partition value here). {@code tablePartitions}: the table's partition columns.
     */
    public ChangeFileIndex(Snapshot snapshot, StructType tablePartitions, List<ChangeFeed.Change> changes,
                           boolean changeData) {
        this.root = snapshot.root;
        this.partitionSchema = partitionSchema(tablePartitions, changeData);
        int n = tablePartitions.size();
        for (ChangeFeed.Change c : changes) {
            FileStatus st = new FileStatus(c.file.size, false, 1, BLOCK_SIZE, c.file.modificationTime,
                c.file.location);
            FileStatusWithMetadata f = new FileStatusWithMetadata(st,
                DeletionVectorFormat.metadata(c.file.deletionVector, c.selected));
            files.add(f);
            size += c.file.size;
            List<Object> key = Arrays.asList(c.file.partitionValues, c.changeType, c.version, c.timestamp);
            byPartition.computeIfAbsent(key, k -> new ArrayList<>()).add(f);
            if (!partitionRows.containsKey(key)) {
                InternalRow table = n == 0 ? InternalRow.empty() : Partitions.row(c.file, tablePartitions, snapshot);
                Object[] values = new Object[partitionSchema.size()];
                for (int i = 0; i < n; i++) {
                    values[i] = table.get(i, tablePartitions.fields()[i].dataType());
                }
                int i = n;
                if (!changeData) {
                    values[i++] = UTF8String.fromString(c.changeType);
                }
                values[i++] = c.version;
                values[i] = c.timestamp * 1000L;  // Catalyst's timestamps are microseconds
                partitionRows.put(key, new GenericInternalRow(values));
            }
        }
    }

    /** The table's partition columns, then the feed's columns a file gives all its rows. */
    static StructType partitionSchema(StructType tablePartitions, boolean changeData) {
        StructType out = tablePartitions;
        for (StructField f : ChangeFeedRelation.FEED_COLUMNS.fields()) {
            if (!(changeData && f.name().equals(io.indexeddf.log.Spec.CHANGE_TYPE_COLUMN))) {
                out = out.add(f);
            }
        }
        return out;
    }

    @Override
    public Seq<Path> rootPaths() {
        return CollectionConverters.asScala(List.of(root)).toList();
    }

    @Override
    public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
        return Partitions.directories(byPartition, partitionRows, partitionFilters, partitionSchema);
    }

    @Override
    public String[] inputFiles() {
        String[] out = new String[files.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = files.get(i).getPath().toString();
        }
        return out;
    }

    @Override
    public void refresh() {
        // The log's commits never change.
    }

    @Override
    public long sizeInBytes() {
        return size;
    }

    @Override
    public StructType partitionSchema() {
        return partitionSchema;
    }

    @Override
    public String toString() {
        return "IndexedDFChangeFeed[" + root + ", " + files.size() + " files]";
    }
}
