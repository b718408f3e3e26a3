package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.DeletionVectorDescriptor;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.FileSourceConstantMetadataStructField$;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.StructField;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Spark's Parquet format for a table's files, with one more field in Spark's {@code _metadata}
 * column: {@link #FILE_ID}, the file's id (its {@code indexeddf.fileId} tag, PROTOCOL.md §5),
 * a constant of each file that rides with it as the split's {@code otherConstantMetadataColumnValues}
 * (as delta-spark's row ids do). A change Spark plans names each row it changes by this id and
 * the row's ordinal ({@code _metadata.row_index}): a long per row where {@code file_path} would be
 * a string of a hundred bytes, which a MERGE's join would carry for every target row it reads.
 * Reads are Spark's own ({@link ParquetFileFormat}); {@link DeletionVectorFormat} adds deletion
 * vectors and column mapping.
 */
public class TableParquetFormat extends ParquetFileFormat {
    private static final long serialVersionUID = 1L;
    /** The field of {@code _metadata} that holds the row's file id. */
    public static final String FILE_ID = "indexeddf_file_id";

    @Override
    public Seq<StructField> metadataSchemaFields() {
        List<StructField> fields = new ArrayList<>(CollectionConverters.asJava(super.metadataSchemaFields()));
        fields.add(FileSourceConstantMetadataStructField$.MODULE$.apply(FILE_ID, LongType$.MODULE$, false));
        return CollectionConverters.asScala(fields).toList();
    }

    /** The metadata a live file {@code a} carries to the reader: its id and its deletion vector. */
    public static scala.collection.immutable.Map<String, Object> fileMetadata(AddFile a) {
        return fileMetadata(a.fileId, a.deletionVector);
    }

    /** The metadata of file {@code fileId} read with deletion vector {@code dv} (none when null). */
    public static scala.collection.immutable.Map<String, Object> fileMetadata(long fileId, DeletionVectorDescriptor dv) {
        return DeletionVectorFormat.metadata(dv).updated(FILE_ID, (Object) fileId);
    }
}
