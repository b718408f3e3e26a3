package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.Snapshot;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Exactly the live files of one snapshot, as the log describes them (size, modification
 * time) and deletion vector: no listing, no file system call, whatever the query. In a partitioned
 * table each file sits in the partition its {@code add.partitionValues} name (never read from its
 * path) and Spark's partition filters skip the others; Spark's Parquet reader prunes columns and
 * row groups, and a bucketed relation prunes files by bucket.
 */
public final class SnapshotFileIndex implements FileIndex {
    private static final long BLOCK_SIZE = 128L * 1024 * 1024;

    private final Snapshot snapshot;
    private final Path root;
    private final long version;
    private final List<FileStatusWithMetadata> files;
    private final long size;
    private final StructType partitionSchema;
    /** The files of each partition, by partition values (one entry, an empty row, when unpartitioned). */
    private final java.util.LinkedHashMap<java.util.Map<String, String>, List<FileStatusWithMetadata>> byPartition =
        new java.util.LinkedHashMap<>();
    private final java.util.Map<java.util.Map<String, String>, InternalRow> partitionRows = new java.util.HashMap<>();
    /**
     * Why the schema the read was given ({@code .schema(...)}, or a catalog entry's copy) is
     * not the table's, or null when it is (or none was given). The relation has the table's
     * schema either way; {@code CatalogTables.SchemaFromLog} refuses such a read unless a
     * catalog entry made it (an entry's copy of the schema never decides what a query reads).
     * Not part of {@link #equals}: the data is the same.
     */
    private volatile String refusedSchema;

    /**
     * The files a stream's micro-batch reads ({@code null}: the snapshot's live files), part of
     * {@link #equals}: two batches of one version are different data.
     */
    private final List<AddFile> chosen;

    /** The index of a snapshot's live files. */
    public SnapshotFileIndex(Snapshot snapshot, StructType schema) {
        this(snapshot, schema, null);
    }

    /**
     * The index of {@code chosen} files (null: the snapshot's live files), read with the
     * schema, partitioning and column mapping of {@code snapshot}: a stream's micro-batch
     * (files some commits added, each with its deletion vector).
     */
    public SnapshotFileIndex(Snapshot snapshot, StructType schema, List<AddFile> chosen) {
        this.snapshot = snapshot;
        this.chosen = chosen;
        this.partitionSchema = Partitions.schema(snapshot, schema);
        this.root = snapshot.root;
        this.version = snapshot.version;
        List<AddFile> listed = chosen == null ? snapshot.files : chosen;
        List<FileStatusWithMetadata> out = new ArrayList<>(listed.size());
        long total = 0;
        for (AddFile a : listed) {
            FileStatus st = new FileStatus(a.size, false, 1, BLOCK_SIZE, a.modificationTime, a.location);
            // A file's id and deletion vector ride with it to the reader (TableParquetFormat).
            FileStatusWithMetadata f = new FileStatusWithMetadata(st, TableParquetFormat.fileMetadata(a));
            out.add(f);
            total += a.size;
            byPartition.computeIfAbsent(a.partitionValues, k -> new ArrayList<>()).add(f);
            if (partitionSchema.isEmpty()) {
                partitionRows.putIfAbsent(a.partitionValues, InternalRow.empty());
            } else if (!partitionRows.containsKey(a.partitionValues)) {
                partitionRows.put(a.partitionValues, Partitions.row(a, partitionSchema, snapshot));
            }
        }
        this.files = out;
        this.size = total;
    }

    /** Whether some live file has a deletion vector (the relation then reads with {@link DeletionVectorFormat}). */
    public static boolean hasDeletionVectors(Snapshot snapshot) {
        for (AddFile a : snapshot.files) {
            if (a.deletionVector != null) {
                return true;
            }
        }
        return false;
    }

    /** The snapshot whose files these are (the driver-side lookup plans on it). */
    public Snapshot snapshot() {
        return snapshot;
    }

    @Override
    public Seq<Path> rootPaths() {
        return CollectionConverters.asScala(List.of(root)).toList();
    }

    @Override
    public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
        if (partitionSchema.isEmpty()) {
            PartitionDirectory dir = new PartitionDirectory(InternalRow.empty(), CollectionConverters.asScala(files).toList());
            return CollectionConverters.asScala(List.of(dir)).toList();
        }
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
        // A snapshot never changes.
    }

    @Override
    public long sizeInBytes() {
        return size;
    }

    @Override
    public StructType partitionSchema() {
        return partitionSchema;
    }

    /**
     * Two loads of one version of one table (not one deleted and created again at the same
     * path: {@code Snapshot.identity}) are the same data: equal, so Spark's cache
     * ({@code df.cache()}, {@code CACHE TABLE}) serves a later load of that version, as it
     * does for two reads of one Parquet folder.
     */
    @Override
    public boolean equals(Object other) {
        return other instanceof SnapshotFileIndex && ((SnapshotFileIndex) other).version == version
            && ((SnapshotFileIndex) other).root.equals(root)
            && java.util.Objects.equals(((SnapshotFileIndex) other).snapshot.identity(), snapshot.identity())
            && java.util.Objects.equals(((SnapshotFileIndex) other).chosen, chosen);
    }

    @Override
    public int hashCode() {
        return root.hashCode() * 31 + Long.hashCode(version);
    }

    /** See the field; null when the read was given no schema or the table's. */
    public String refusedSchema() {
        return refusedSchema;
    }

    void refuseSchema(String why) {
        refusedSchema = why;
    }

    @Override
    public String toString() {
        return (chosen == null ? "IndexedDFSnapshot[" : "IndexedDFStreamBatch[") + root + " v" + version + ", "
            + files.size() + " files]";
    }
}
