package io.indexeddf.spark.exec;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.execution.datasources.FileFormat$;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's {@code _metadata} column for the rows an index lookup reads: the struct a file scan
 * gives each row ({@code file_path}, {@code file_name}, {@code file_size}, ...,
 * {@code row_index}, and the table's {@code indexeddf_file_id}), with the fields of the
 * column's type as the plan has it. The file's fields are Spark's own values for the file
 * ({@code FileFormat.getFileConstantMetadataColumnValue}, so {@code file_path} is the string
 * Spark's scan would give); {@code row_index} is the row's ordinal in its file, which the index
 * knows. A change names the rows it changes by the file's id and the ordinal
 * (docs/spark-tables.md), so a change's target rows can come from the index instead of a scan.
 */
public final class RowMetadata implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    /** Spark's name of the row's ordinal in its file ({@code ParquetFileFormat.ROW_INDEX}). */
    static final String ROW_INDEX = "row_index";

    private final StructType type;
    /** The types of the data columns the reader gives, before the metadata column. */
    private final DataType[] dataTypes;

    private RowMetadata(StructType type, DataType[] dataTypes) {
        this.type = type;
        this.dataTypes = dataTypes;
    }

    /**
     * The metadata of rows whose data columns are {@code data}, for a {@code _metadata} column
     * of type {@code type}; null when the type has a field this class cannot fill.
     */
    public static RowMetadata of(StructType type, StructType data) {
        java.util.Set<String> known = new java.util.HashSet<>();
        for (StructField f : scala.jdk.javaapi.CollectionConverters.asJava(FileFormat$.MODULE$.BASE_METADATA_FIELDS())) {
            known.add(f.name());
        }
        known.add(TableParquetFormat.FILE_ID);  // the file's id rides with its split
        for (StructField f : type.fields()) {
            if (!known.contains(f.name()) && !f.name().equals(ROW_INDEX)) {
                return null;
            }
        }
        DataType[] types = new DataType[data.size()];
        for (int i = 0; i < types.length; i++) {
            types[i] = data.fields()[i].dataType();
        }
        return new RowMetadata(type, types);
    }

    /** A copy of {@code row} (the data columns; reused by the reader) with the metadata of row {@code ordinal} of {@code file} after them. */
    InternalRow append(InternalRow row, PartitionedFile file, long ordinal) {
        InternalRow copy = row.copy();
        Object[] values = new Object[dataTypes.length + 1];
        for (int i = 0; i < dataTypes.length; i++) {
            values[i] = copy.isNullAt(i) ? null : copy.get(i, dataTypes[i]);
        }
        values[dataTypes.length] = metadata(file, ordinal);
        return new GenericInternalRow(values);
    }

    private InternalRow metadata(PartitionedFile file, long ordinal) {
        StructField[] fields = type.fields();
        Object[] values = new Object[fields.length];
        for (int i = 0; i < fields.length; i++) {
            values[i] = fields[i].name().equals(ROW_INDEX) ? (Object) ordinal
                : FileFormat$.MODULE$.getFileConstantMetadataColumnValue(fields[i].name(), file,
                    FileFormat$.MODULE$.BASE_METADATA_EXTRACTORS(), fields[i].dataType()).value();
        }
        return new GenericInternalRow(values);
    }
}
