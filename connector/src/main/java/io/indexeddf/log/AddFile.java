package io.indexeddf.log;

import org.apache.hadoop.fs.Path;

/**
 * A live data file of a {@link Snapshot}: an {@code add} action of the Delta log after replay,
 * with the tags indexeddf writes (its bucket, its file id, whether its rows are sorted) and its
 * deletion vector, if any.
 */
public final class AddFile {
    /** Decoded relative path (or absolute URI) as the log names it. */
    public final String path;
    /** Where Hadoop reads it. */
    public final Path location;
    public final long size;
    public final long modificationTime;
    /** The file's bucket ({@code indexeddf.bucket} tag), or null for files other Delta writers added. */
    public final Integer bucket;
    /** The file id index entries name it by ({@code indexeddf.fileId} tag, else derived from the path). */
    public final long fileId;
    /** The rows are in index-column order ({@code indexeddf.sorted} tag "true"). */
    public final boolean sorted;
    /** The rows of the file that are no longer in the table ({@code add.deletionVector}), or null: none. */
    public final DeletionVectorDescriptor deletionVector;
    /**
     * The file's value of each partition column ({@code add.partitionValues}: Delta's serialized
     * strings, null for NULL); empty in an unpartitioned table.
     */
    public final java.util.Map<String, String> partitionValues;

    AddFile(String path, Path location, long size, long modificationTime, Integer bucket, long fileId,
            boolean sorted, DeletionVectorDescriptor deletionVector, java.util.Map<String, String> partitionValues) {
        this.path = path;
        this.location = location;
        this.size = size;
        this.modificationTime = modificationTime;
        this.bucket = bucket;
        this.fileId = fileId;
        this.sorted = sorted;
        this.deletionVector = deletionVector;
        this.partitionValues = partitionValues;
    }
}
