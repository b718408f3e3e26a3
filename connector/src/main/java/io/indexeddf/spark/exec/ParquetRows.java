package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.paths.SparkPath$;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;

/**
 * Reads Parquet files, or single row groups of them, in this JVM through Spark's own
 * Parquet reader ({@link ParquetFileFormat#buildReaderWithPartitionValues}), so values come
 * out exactly as a Spark scan of the same file gives them (vectorized decoding, the session's
 * Parquet settings). Footers are cached: data and index files never change.
 */
public final class ParquetRows {
    private static final int MAX_FOOTERS = 1024;
    private static final Map<String, Footer> FOOTERS = new LinkedHashMap<String, Footer>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Footer> eldest) {
            return size() > MAX_FOOTERS;
        }
    };

    static final int MAX_READERS = 32;
    private static final Map<String, Function1<PartitionedFile, Iterator<InternalRow>>> READERS =
        new LinkedHashMap<String, Function1<PartitionedFile, Iterator<InternalRow>>>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Function1<PartitionedFile, Iterator<InternalRow>>> e) {
                return size() > MAX_READERS;
            }
        };

    private ParquetRows() {
    }

    /** A file's parsed footer, and where each row group starts: in rows (ordinals) and in bytes. */
    public static final class Footer {
        public final ParquetMetadata metadata;
        /** First row ordinal of each row group, then the file's row count. */
        final long[] rowBounds;
        final long[] byteStart;
        public final long[] byteLength;

        Footer(ParquetMetadata metadata) {
            this.metadata = metadata;
            List<BlockMetaData> blocks = metadata.getBlocks();
            int n = blocks.size();
            rowBounds = new long[n + 1];
            byteStart = new long[n];
            byteLength = new long[n];
            for (int i = 0; i < n; i++) {
                BlockMetaData b = blocks.get(i);
                rowBounds[i + 1] = rowBounds[i] + b.getRowCount();
                byteStart[i] = b.getStartingPos();
                byteLength[i] = b.getCompressedSize();
            }
        }

        /** The row group holding row {@code ordinal}. */
        int rowGroupOf(long ordinal) {
            int lo = 0;
            int hi = rowBounds.length - 2;
            while (lo < hi) {
                int mid = (lo + hi + 1) >>> 1;
                if (rowBounds[mid] <= ordinal) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            return lo;
        }
    }

    /** The footer of {@code path} (cached by path: files are immutable). */
    public static Footer footer(Path path, Configuration conf) throws IOException {
        String key = path.toString();
        synchronized (FOOTERS) {
            Footer f = FOOTERS.get(key);
            if (f != null) {
                return f;
            }
        }
        Footer f;
        try (ParquetFileReader r = ParquetFileReader.open(HadoopInputFile.fromPath(path, conf))) {
            f = new Footer(r.getFooter());
        }
        synchronized (FOOTERS) {
            FOOTERS.put(key, f);
        }
        return f;
    }

    /**
     * A reader ({@code format}'s) of files with {@code dataSchema} giving the columns of {@code required}: rows
     * (each reused by the next; copy what you keep), or, with {@code batches}, the columnar
     * batches themselves (cast each element to {@code ColumnarBatch}). {@code filters} let the
     * Parquet reader skip row groups by statistics and bloom filters.
     */
    static Function1<PartitionedFile, Iterator<InternalRow>> reader(SparkSession session, ParquetFileFormat format,
            StructType dataSchema, StructType required, Seq<Filter> filters, boolean batches, Configuration conf) {
        if (ColumnMapping.mapped(dataSchema) && !(format instanceof DeletionVectorFormat)) {
            // Files name the columns physically, or by field id (PROTOCOL.md §19): the format
            // that renames them, and picks a file's reader by whether it has field ids, reads
            // them (rows, not batches: no caller reads a column-mapped table in batches).
            format = new DeletionVectorFormat();
        }
        // Building a reader broadcasts the Hadoop configuration (milliseconds): readers without
        // filters are kept per session, format and schema.
        String key = filters.isEmpty() ? sessionId(session) + "|" + format.getClass().getSimpleName() + "|" + batches
            + "|" + dataSchema.json() + "|" + required.json() : null;
        if (key != null) {
            synchronized (READERS) {
                Function1<PartitionedFile, Iterator<InternalRow>> r = READERS.get(key);
                if (r != null) {
                    return r;
                }
            }
        }
        scala.collection.immutable.Map<String, String> options = scala.collection.immutable.Map$.MODULE$.<String, String>empty()
            .updated("returning_batch", Boolean.toString(batches));
        // A copy: Spark sets the requested schema in the configuration it is given and
        // broadcasts that very object, which a later reader built on it would change.
        Function1<PartitionedFile, Iterator<InternalRow>> r = format.buildReaderWithPartitionValues(
            session, dataSchema, new StructType(), required, filters, options, new Configuration(conf));
        if (key != null) {
            synchronized (READERS) {
                READERS.put(key, r);
            }
        }
        return r;
    }

    /** The session's UUID: readers carry its Parquet settings (a collected session's identity hash may recur). */
    static String sessionId(SparkSession session) {
        return ((org.apache.spark.sql.classic.SparkSession) session).sessionUUID();
    }

    /**
     * The byte range {@code [start, start + length)} of a file, as Spark's readers take a split,
     * with the file's {@code metadata} (its deletion vector: {@link DeletionVectorFormat#metadata}).
     */
    static PartitionedFile split(Path path, long start, long length, long fileSize, long modificationTime,
                                 scala.collection.immutable.Map<String, Object> metadata) {
        return new PartitionedFile(InternalRow.empty(), SparkPath$.MODULE$.fromPath(path), start, length,
            new String[0], modificationTime, fileSize, metadata);
    }
}
