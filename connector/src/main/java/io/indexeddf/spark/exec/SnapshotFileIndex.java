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
 * time) and deletion vector: no listing, no file system call, whatever the query. The table is unpartitioned;
 * Spark's Parquet reader prunes columns and row groups, and a bucketed relation prunes
 * files by bucket.
 */
public final class SnapshotFileIndex implements FileIndex {
    private static final long BLOCK_SIZE = 128L * 1024 * 1024;

    private final Snapshot snapshot;
    private final Path root;
    private final long version;
    private final List<FileStatusWithMetadata> files;
    private final long size;

    /** The index of a snapshot's live files. */
    public SnapshotFileIndex(Snapshot snapshot) {
        this.snapshot = snapshot;
        this.root = snapshot.root;
        this.version = snapshot.version;
        List<FileStatusWithMetadata> out = new ArrayList<>(snapshot.files.size());
        long total = 0;
        for (AddFile a : snapshot.files) {
            FileStatus st = new FileStatus(a.size, false, 1, BLOCK_SIZE, a.modificationTime, a.location);
            // A file's deletion vector rides with it to the reader (DeletionVectorFormat).
            out.add(new FileStatusWithMetadata(st, DeletionVectorFormat.metadata(a.deletionVector)));
            total += a.size;
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
        PartitionDirectory dir = new PartitionDirectory(InternalRow.empty(), CollectionConverters.asScala(files).toList());
        return CollectionConverters.asScala(List.of(dir)).toList();
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
        return new StructType();
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
            && java.util.Objects.equals(((SnapshotFileIndex) other).snapshot.identity(), snapshot.identity());
    }

    @Override
    public int hashCode() {
        return root.hashCode() * 31 + Long.hashCode(version);
    }

    @Override
    public String toString() {
        return "IndexedDFSnapshot[" + root + " v" + version + ", " + files.size() + " files]";
    }
}
