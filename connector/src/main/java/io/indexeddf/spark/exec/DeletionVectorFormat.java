package io.indexeddf.spark.exec;

import io.indexeddf.log.DeletionVectorDescriptor;
import io.indexeddf.log.DeletionVectors;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat$;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;
import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Spark's Parquet format for a table version where some live file has a deletion vector: the
 * rows a file's DV deletes never leave the reader. Each file's DV rides with the file itself
 * ({@link #METADATA_KEY} in its {@code FileStatusWithMetadata} metadata, which Spark hands to
 * the reader as the split's {@code otherConstantMetadataColumnValues}, as delta-spark does);
 * a file with one is read with Spark's row-index column (each row's ordinal in its file, which
 * the Parquet reader computes even when it skips row groups or pages), rows whose ordinal the
 * DV holds are dropped and the column is projected away. Files without a DV are read as Spark
 * reads them.
 *
 * <p>A column-mapped table's files are read through it too, with or without DVs
 * ({@link ColumnMapping}): it names the columns as the files do and, in {@code id} mode, picks
 * per file a reader by field id or, for a file without field ids, by physical name.
 *
 * <p>Scans stay columnar wherever Spark's vectorized reader is ({@link #supportBatch}): a batch
 * of a file with a DV is handed on with every data column narrowed to the batch's kept rows by
 * {@link SelectedVector} (an index per kept row, no copy of the values), so the plan is the one
 * Spark gives a Parquet scan: the same pushed filters, pruned columns and buckets, and
 * {@code ColumnarToRow} above the scan. (delta-spark instead adds a column saying whether a row
 * is deleted and a {@code Filter} over the scan; narrowing the batch keeps the plan and the
 * relation's output untouched.) Read as rows (the vectorized reader off, or a caller that asks
 * for rows), a file with a DV costs one copy of each kept row. Versions without any DV keep
 * {@link TableParquetFormat} ({@link TableRelation#read}).
 */
public final class DeletionVectorFormat extends TableParquetFormat {
    private static final long serialVersionUID = 1L;
    /** The key of a file's {@link DeletionVectorDescriptor} in its metadata. */
    public static final String METADATA_KEY = "indexeddf_deletion_vector";

    /**
     * The key of a file's second deletion vector, whose rows are the only ones read (a read of
     * the change data feed: the rows a commit's new deletion vector deleted, {@code ChangeFeed}).
     */
    public static final String SELECTED_KEY = "indexeddf_selected_rows";

    /** The metadata of a file with deletion vector {@code dv} (none when null). */
    public static scala.collection.immutable.Map<String, Object> metadata(DeletionVectorDescriptor dv) {
        return metadata(dv, null);
    }

    /**
     * The metadata of a file read with deletion vector {@code dv} (rows dropped; none when null)
     * of which only the rows of deletion vector {@code selected} are read (all when null).
     */
    public static scala.collection.immutable.Map<String, Object> metadata(DeletionVectorDescriptor dv,
                                                                          DeletionVectorDescriptor selected) {
        scala.collection.immutable.Map<String, Object> out = scala.collection.immutable.Map$.MODULE$.empty();
        if (dv != null) {
            out = out.updated(METADATA_KEY, dv);
        }
        if (selected != null) {
            out = out.updated(SELECTED_KEY, selected);
        }
        return out;
    }

    /** The vector of split {@code f} whose rows are the only ones read, or null (all are). */
    static DeletionVectorDescriptor selectedOf(PartitionedFile f) {
        Option<Object> v = f.otherConstantMetadataColumnValues().get(SELECTED_KEY);
        return v.isDefined() ? (DeletionVectorDescriptor) v.get() : null;
    }

    /** The deletion vector of split {@code f}, or null. */
    static DeletionVectorDescriptor of(PartitionedFile f) {
        Option<Object> v = f.otherConstantMetadataColumnValues().get(METADATA_KEY);
        return v.isDefined() ? (DeletionVectorDescriptor) v.get() : null;
    }

    /**
     * Spark's answer for the columns the reader gives, the row index it adds to read a file with
     * a DV included: batches whenever Spark's vectorized reader can give them.
     */
    @Override
    public boolean supportBatch(SparkSession session, StructType schema) {
        return super.supportBatch(session, withRowIndex(schema));
    }

    /**
     * Spark's vector classes for the columns, except that a data column is any
     * {@link ColumnVector}: a batch of a file with a DV hands on {@link SelectedVector}s.
     */
    @Override
    public Option<Seq<String>> vectorTypes(StructType requiredSchema, StructType partitionSchema, SQLConf conf) {
        Option<Seq<String>> types = super.vectorTypes(requiredSchema, partitionSchema, conf);
        if (types.isEmpty()) {
            return types;
        }
        List<String> out = new ArrayList<>(CollectionConverters.asJava(types.get()));
        for (int i = 0; i < requiredSchema.size() && i < out.size(); i++) {
            out.set(i, ColumnVector.class.getName());
        }
        return Option.apply(CollectionConverters.asScala(out).toList());
    }

    /** {@code schema} with Spark's row-index column added, unless it has it. */
    private static StructType withRowIndex(StructType schema) {
        String rowIndex = ParquetFileFormat$.MODULE$.ROW_INDEX_TEMPORARY_COLUMN_NAME();
        if (java.util.Arrays.asList(schema.fieldNames()).contains(rowIndex)) {
            return schema;
        }
        // Nullable: the reader refuses a required column that the file lacks.
        return schema.add(new StructField(rowIndex, LongType$.MODULE$, true, Metadata.empty()));
    }

    @Override
    public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
            SparkSession session, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
            Seq<Filter> filters, scala.collection.immutable.Map<String, String> options, Configuration hadoopConf) {
        boolean byId = ColumnMapping.byFieldId(dataSchema);
        if (ColumnMapping.mapped(dataSchema)) {  // a column-mapped table's files (PROTOCOL.md §19)
            filters = ColumnMapping.filters(filters, dataSchema);
            requiredSchema = ColumnMapping.physical(requiredSchema, dataSchema);
            dataSchema = ColumnMapping.physical(dataSchema, dataSchema);
        }
        String rowIndex = ParquetFileFormat$.MODULE$.ROW_INDEX_TEMPORARY_COLUMN_NAME();
        int at = java.util.Arrays.asList(requiredSchema.fieldNames()).indexOf(rowIndex);
        // When the query did not ask for _metadata.row_index itself, it is added, and dropped after.
        StructType withIndex = withRowIndex(requiredSchema);
        if (at < 0) {
            at = requiredSchema.size();
        }
        // In id mode the readers find columns by field id (set in their configuration only);
        // a file without field ids is read by a second pair that matches physical names.
        Configuration readConf = byId ? ColumnMapping.readingFieldIds(hadoopConf) : hadoopConf;
        Function1<PartitionedFile, Iterator<InternalRow>>[] readers = pair(session, dataSchema, partitionSchema,
            requiredSchema, withIndex, filters, options, readConf);
        Function1<PartitionedFile, Iterator<InternalRow>>[] byName = !byId ? null : pair(session,
            ColumnMapping.withoutFieldIds(dataSchema), partitionSchema, ColumnMapping.withoutFieldIds(requiredSchema),
            ColumnMapping.withoutFieldIds(withIndex), filters, options, hadoopConf);
        // The output: the required columns, then the partition columns (the reader's order),
        // without the added row index.
        List<Expression> keep = new ArrayList<>();
        List<StructField> read = new ArrayList<>(java.util.Arrays.asList(withIndex.fields()));
        read.addAll(java.util.Arrays.asList(partitionSchema.fields()));
        for (int i = 0; i < read.size(); i++) {
            if (i != at) {
                keep.add(new BoundReference(i, read.get(i).dataType(), read.get(i).nullable()));
            }
        }
        Broadcast<SerializableConfiguration> conf = session.sparkContext().broadcast(
            new SerializableConfiguration(hadoopConf), ClassTag$.MODULE$.apply(SerializableConfiguration.class));
        return new Reader(readers, byName, at, withIndex == requiredSchema ? null : keep, conf);
    }

    /**
     * Spark's readers of {@code required} (plain) and of {@code withIndex} (with the row index),
     * each built on a copy of {@code conf}: Spark writes the requested schema into the
     * configuration it builds a reader with and broadcasts that very object.
     */
    @SuppressWarnings("unchecked")
    private Function1<PartitionedFile, Iterator<InternalRow>>[] pair(SparkSession session, StructType dataSchema,
            StructType partitionSchema, StructType required, StructType withIndex, Seq<Filter> filters,
            scala.collection.immutable.Map<String, String> options, Configuration conf) {
        return new Function1[] {
            super.buildReaderWithPartitionValues(session, dataSchema, partitionSchema, required, filters, options,
                new Configuration(conf)),
            super.buildReaderWithPartitionValues(session, dataSchema, partitionSchema, withIndex, filters, options,
                new Configuration(conf)),
        };
    }

    /**
     * Reads a split: plainly without a DV, else with the row index, dropping deleted rows; in
     * {@code id} mode a file without field ids by physical name.
     */
    private static final class Reader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
            implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        /** The plain reader and the one with the row index. */
        private final Function1<PartitionedFile, Iterator<InternalRow>>[] readers;
        /** The same by physical name, for a file without field ids (id mode), else null. */
        private final Function1<PartitionedFile, Iterator<InternalRow>>[] byName;
        private final int rowIndex;
        /** The columns to keep (bound), or null when the row index is one the query asked for. */
        private final List<Expression> keep;
        private final Broadcast<SerializableConfiguration> conf;

        Reader(Function1<PartitionedFile, Iterator<InternalRow>>[] readers,
               Function1<PartitionedFile, Iterator<InternalRow>>[] byName, int rowIndex, List<Expression> keep,
               Broadcast<SerializableConfiguration> conf) {
            this.readers = readers;
            this.byName = byName;
            this.rowIndex = rowIndex;
            this.keep = keep;
            this.conf = conf;
        }

        @Override
        public Iterator<InternalRow> apply(PartitionedFile file) {
            Function1<PartitionedFile, Iterator<InternalRow>>[] use = readers;
            if (byName != null) {
                try {  // footers are cached per JVM: the reader's own read of it follows
                    if (!ColumnMapping.hasFieldIds(ParquetRows.footer(file.toPath(), conf.value().value()))) {
                        use = byName;
                    }
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
            DeletionVectorDescriptor dv = of(file);
            DeletionVectorDescriptor selected = selectedOf(file);
            if (dv == null && selected == null) {
                return use[0].apply(file);
            }
            DeletionVectors.Rows gone = dv == null ? null : DeletionVectors.read(dv, conf.value().value());
            DeletionVectors.Rows only = selected == null ? null : DeletionVectors.read(selected, conf.value().value());
            java.util.function.LongPredicate deleted = only == null ? gone::contains
                : gone == null ? row -> !only.contains(row) : row -> !only.contains(row) || gone.contains(row);
            Iterator<InternalRow> rows = use[1].apply(file);
            UnsafeProjection project = keep == null ? null
                : UnsafeProjection.create(CollectionConverters.asScala(keep).toList());
            // Batches pass as rows, as from Spark's own reader: its scan casts them back.
            @SuppressWarnings("unchecked")
            Iterator<InternalRow> kept = (Iterator<InternalRow>) (Iterator<?>) new Kept(rows, deleted, rowIndex, project);
            return kept;
        }
    }

    /**
     * The rows of {@code rows} whose row index {@code deleted} does not hold: rows, projected
     * (when {@code project} is not null), or columnar batches, each narrowed to its kept rows by
     * {@link SelectedVector}s (no copy) and without the row-index column when {@code project} is
     * not null (the reader added it). A batch whose rows are all deleted is skipped.
     */
    static final class Kept extends scala.collection.AbstractIterator<Object> {
        private final Iterator<?> rows;
        private final java.util.function.LongPredicate deleted;
        private final int rowIndex;
        private final UnsafeProjection project;
        private Object next;

        Kept(Iterator<?> rows, java.util.function.LongPredicate deleted, int rowIndex, UnsafeProjection project) {
            this.rows = rows;
            this.deleted = deleted;
            this.rowIndex = rowIndex;
            this.project = project;
        }

        @Override
        public boolean hasNext() {
            while (next == null && rows.hasNext()) {
                Object r = rows.next();  // a ColumnarBatch when the reader returns batches
                if (r instanceof ColumnarBatch) {
                    next = kept((ColumnarBatch) r);
                } else if (!deleted.test(((InternalRow) r).getLong(rowIndex))) {
                    next = project == null ? r : project.apply((InternalRow) r);
                }
            }
            return next != null;
        }

        @Override
        public Object next() {
            if (!hasNext()) {
                throw new java.util.NoSuchElementException();
            }
            Object r = next;
            next = null;
            return r;
        }

        /** {@code batch}'s kept rows as a batch (null when none is), without an added row index. */
        private ColumnarBatch kept(ColumnarBatch batch) {
            int n = batch.numRows();
            ColumnVector ordinals = batch.column(rowIndex);
            int[] selected = null;
            int count = 0;
            for (int i = 0; i < n; i++) {
                if (deleted.test(ordinals.getLong(i))) {
                    if (selected == null) {
                        selected = new int[n];
                        for (int j = 0; j < i; j++) {
                            selected[j] = j;
                        }
                        count = i;
                    }
                } else if (selected != null) {
                    selected[count++] = i;
                }
            }
            if (selected != null && count == 0) {
                return null;
            }
            int cols = batch.numCols() - (project == null ? 0 : 1);
            if (selected == null && project == null) {
                return batch;
            }
            ColumnVector[] out = new ColumnVector[cols];
            for (int c = 0, o = 0; c < batch.numCols(); c++) {
                if (c == rowIndex && project != null) {
                    continue;
                }
                ColumnVector v = batch.column(c);
                // A partition value's vector is the same at every row.
                out[o++] = selected == null || v instanceof ConstantColumnVector ? v : new SelectedVector(v, selected, count);
            }
            return new ColumnarBatch(out, selected == null ? n : count);
        }
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof DeletionVectorFormat;
    }

    @Override
    public int hashCode() {
        return DeletionVectorFormat.class.hashCode();
    }
}
