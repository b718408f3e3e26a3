package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.format.FileMetaData;
import org.apache.parquet.format.RowGroup;
import org.apache.parquet.format.Util;
import org.apache.parquet.format.converter.ParquetMetadataConverter;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
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
import shaded.parquet.org.apache.thrift.TException;
import shaded.parquet.org.apache.thrift.protocol.TCompactProtocol;
import shaded.parquet.org.apache.thrift.transport.TIOStreamTransport;

/**
 * Reads Parquet files, or single row groups of them, in this JVM through Spark's own
 * Parquet reader ({@link ParquetFileFormat#buildReaderWithPartitionValues}), so values come
 * out exactly as a Spark scan of the same file gives them (vectorized decoding, the session's
 * Parquet settings). Footers are cached, compact: data and index files never change.
 */
public final class ParquetRows {
    /**
     * Bound of the footer cache in bytes (compact footers, {@link Footer#bytes}): a sixteenth of
     * the heap, at most 256 MiB.
     */
    static final long FOOTER_CACHE_BYTES = Math.min(256L << 20, Runtime.getRuntime().maxMemory() / 16);
    private static final Map<String, Footer> FOOTERS = new LinkedHashMap<>(256, 0.75f, true);
    private static long footerBytes;

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

    /** Decodes footers: parquet-mr's own converter, as its file reader uses it (default read options). */
    private static final ParquetMetadataConverter CONVERTER = new ParquetMetadataConverter();

    /**
     * A file's footer kept compact: where each row group starts (in rows and in bytes), the
     * hash range of its first column (an index file's blocks), and each row group's metadata as
     * its Thrift bytes, decoded only for the row groups a read takes ({@link #metadata}).
     * parquet-mr's decoded footer holds about 1 KB for each column chunk of every row group
     * and would make the cache of a large table's footers grow with the table.
     */
    public static final class Footer {
        /** First row ordinal of each row group, then the file's row count. */
        final long[] rowBounds;
        final long[] byteStart;
        public final long[] byteLength;
        /** Per row group, the range of its first column as unsigned-ordered ints (sign bit flipped; all ints when unknown). */
        final int[] firstLo;
        final int[] firstHi;
        final boolean hasFieldIds;
        /** The file's length in bytes. */
        final long fileLength;
        /** The footer without its row groups (schema, key-value metadata). */
        private final FileMetaData head;
        /** Each row group's Thrift metadata (compact protocol). */
        private final byte[][] groups;
        /** Bytes held (guarded by the cache's lock: decoded statistics add to them). */
        private long bytes;
        /** The statistics of one column over every row group, decoded once when asked for ({@link #statistics}). */
        private volatile Map.Entry<String, Statistics<?>[]> columnStats;

        /** The cache's key of the file. */
        private final String key;

        private Footer(String key, FileMetaData meta, long fileLength, int footerLength) throws IOException {
            this.key = key;
            List<RowGroup> rgs = meta.getRow_groups() == null ? new ArrayList<>() : meta.getRow_groups();
            ParquetMetadata decoded = CONVERTER.fromParquetMetadata(meta, null, false, rowIndexOffsets(rgs));
            List<BlockMetaData> blocks = decoded.getBlocks();
            int n = blocks.size();
            this.fileLength = fileLength;
            rowBounds = new long[n + 1];
            byteStart = new long[n];
            byteLength = new long[n];
            firstLo = new int[n];
            firstHi = new int[n];
            groups = new byte[n][];
            long held = 256L;
            long groupBytes = 0;
            for (int i = 0; i < n; i++) {
                BlockMetaData b = blocks.get(i);
                rowBounds[i + 1] = rowBounds[i] + b.getRowCount();
                byteStart[i] = b.getStartingPos();
                byteLength[i] = b.getCompressedSize();
                int[] range = firstRange(b);
                firstLo[i] = range[0];
                firstHi[i] = range[1];
                groups[i] = serialize(rgs.get(i));
                held += 48L + groups[i].length;
                groupBytes += groups[i].length;
            }
            hasFieldIds = ColumnMapping.hasIds(decoded.getFileMetaData().getSchema());
            meta.setRow_groups(new ArrayList<>());
            head = meta;
            // The head (schema, key-value metadata) decoded: a few times its bytes in the file.
            bytes = held + 4L * Math.max(0, footerLength - groupBytes);
        }

        /** Row groups in the file. */
        int groupCount() {
            return groups.length;
        }

        /** Bytes this footer holds in memory (an estimate: what bounds the cache). */
        long bytes() {
            synchronized (FOOTERS) {
                return bytes;
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

        /**
         * parquet-mr's metadata of the file cut to row groups {@code chosen} (ascending): what
         * Spark's Parquet reader takes instead of reading the footer itself. Each row group
         * keeps its row index offset in the file.
         */
        public ParquetMetadata metadata(int[] chosen) throws IOException {
            List<RowGroup> rgs = new ArrayList<>(chosen.length);
            Map<RowGroup, Long> offsets = new java.util.IdentityHashMap<>();
            for (int g : chosen) {
                RowGroup rg = deserialize(groups[g]);
                rgs.add(rg);
                offsets.put(rg, rowBounds[g]);
            }
            FileMetaData cut = new FileMetaData(head.getVersion(), head.getSchema(), head.getNum_rows(), rgs);
            if (head.isSetKey_value_metadata()) {
                cut.setKey_value_metadata(head.getKey_value_metadata());
            }
            if (head.isSetCreated_by()) {
                cut.setCreated_by(head.getCreated_by());
            }
            if (head.isSetColumn_orders()) {
                cut.setColumn_orders(head.getColumn_orders());
            }
            return CONVERTER.fromParquetMetadata(cut, null, false, offsets);
        }

        /** The file's key-value metadata (Spark's writer settings: datetime rebasing). */
        Map<String, String> keyValues() {
            Map<String, String> out = new java.util.HashMap<>();
            if (head.isSetKey_value_metadata()) {
                for (org.apache.parquet.format.KeyValue kv : head.getKey_value_metadata()) {
                    out.put(kv.getKey(), kv.getValue());
                }
            }
            return out;
        }

        /**
         * The statistics of top-level column {@code column} in each row group (null where it has
         * none or the file lacks the column), decoded on first use; one column's are kept.
         */
        public Statistics<?>[] statistics(String column) throws IOException {
            Map.Entry<String, Statistics<?>[]> held = columnStats;
            if (held != null && held.getKey().equals(column)) {
                return held.getValue();
            }
            Statistics<?>[] out = new Statistics<?>[groups.length];
            for (int g = 0; g < groups.length; g++) {
                for (ColumnChunkMetaData c : metadata(new int[] {g}).getBlocks().get(0).getColumns()) {
                    if (c.getPath().size() == 1 && c.getPath().toArray()[0].equals(column)) {
                        out[g] = c.getStatistics();
                    }
                }
            }
            synchronized (FOOTERS) {  // the cache counts them: about 64 bytes a row group's statistics
                long grown = 64L * out.length - (held == null ? 0 : 64L * held.getValue().length);
                if (FOOTERS.containsKey(key) && FOOTERS.get(key) == this) {
                    footerBytes += grown;
                }
                bytes += grown;
                columnStats = Map.entry(column, out);
            }
            return out;
        }
    }

    /** The row index offset of each row group: the rows before it (what parquet-mr computes on a full read). */
    private static Map<RowGroup, Long> rowIndexOffsets(List<RowGroup> rgs) {
        Map<RowGroup, Long> out = new java.util.IdentityHashMap<>();
        long rows = 0;
        for (RowGroup rg : rgs) {
            out.put(rg, rows);
            rows += rg.getNum_rows();
        }
        return out;
    }

    /**
     * The range of the first column of {@code b} by its statistics, as ints in unsigned order
     * with the sign bit flipped (an index file's key hash, uint32); every int when the
     * statistics are missing, not ints, or in another order than the writer's.
     */
    private static int[] firstRange(BlockMetaData b) {
        int lo = Integer.MIN_VALUE;
        int hi = Integer.MAX_VALUE;
        Statistics<?> stats = b.getColumns().isEmpty() ? null : b.getColumns().get(0).getStatistics();
        if (stats != null && stats.hasNonNullValue() && stats.genericGetMin() instanceof Integer) {
            int l = ((Integer) stats.genericGetMin()) ^ Integer.MIN_VALUE;
            int h = ((Integer) stats.genericGetMax()) ^ Integer.MIN_VALUE;
            if (l <= h) {
                lo = l;
                hi = h;
            }
        }
        return new int[] {lo, hi};
    }

    private static byte[] serialize(RowGroup rg) throws IOException {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(512);
        try {
            rg.write(new TCompactProtocol(new TIOStreamTransport(out)));
        } catch (TException e) {
            throw new IOException("cannot encode a Parquet row group's metadata", e);
        }
        return out.toByteArray();
    }

    private static RowGroup deserialize(byte[] bytes) throws IOException {
        RowGroup rg = new RowGroup();
        try {
            rg.read(new TCompactProtocol(new TIOStreamTransport(new java.io.ByteArrayInputStream(bytes))));
        } catch (TException e) {
            throw new IOException("cannot decode a Parquet row group's metadata", e);
        }
        return rg;
    }

    /** Bytes read from a file's end at first: most footers fit, so one read gets them. */
    private static final int TAIL = 64 << 10;

    /**
     * The footer of {@code path} (cached by path, least recently used first out, bounded in
     * bytes: files are immutable). Read with one positioned read of the file's end and decoded
     * once, with no Parquet file reader (which builds read options from a fresh Hadoop
     * configuration, parsing its XML resources, on every open).
     */
    public static Footer footer(Path path, Configuration conf) throws IOException {
        String key = path.toString();
        synchronized (FOOTERS) {
            Footer f = FOOTERS.get(key);
            if (f != null) {
                return f;
            }
        }
        Footer f = readFooter(path, conf);
        synchronized (FOOTERS) {
            Footer old = FOOTERS.put(key, f);
            footerBytes += f.bytes() - (old == null ? 0 : old.bytes());
            java.util.Iterator<Footer> it = FOOTERS.values().iterator();
            while (footerBytes > FOOTER_CACHE_BYTES && it.hasNext()) {
                Footer eldest = it.next();
                if (eldest != f) {
                    footerBytes -= eldest.bytes();
                    it.remove();
                }
            }
        }
        return f;
    }

    /** Footers the cache holds now, and their bytes (for tests and benchmarks). */
    public static long[] footerCacheStats() {
        synchronized (FOOTERS) {
            return new long[] {FOOTERS.size(), footerBytes};
        }
    }

    /** Drops every footer the cache holds (for tests and benchmarks). */
    public static void clearFooters() {
        synchronized (FOOTERS) {
            FOOTERS.clear();
            footerBytes = 0;
        }
    }

    private static Footer readFooter(Path path, Configuration conf) throws IOException {
        FileSystem fs = path.getFileSystem(conf);
        long length = fs.getFileStatus(path).getLen();  // FileNotFoundException: a vacuumed file
        if (length < 12) {
            throw new IOException(path + " is not a Parquet file (" + length + " bytes)");
        }
        try (FSDataInputStream in = fs.open(path)) {
            int tail = (int) Math.min(length, TAIL);
            byte[] end = new byte[tail];
            in.readFully(length - tail, end);
            if (end[tail - 4] != 'P' || end[tail - 3] != 'A' || end[tail - 2] != 'R' || end[tail - 1] != '1') {
                throw new IOException(path + " is not a plain Parquet file (no PAR1 at its end; encrypted footers are not read)");
            }
            int footerLength = (end[tail - 8] & 0xff) | (end[tail - 7] & 0xff) << 8 | (end[tail - 6] & 0xff) << 16
                | (end[tail - 5] & 0xff) << 24;
            if (footerLength < 0 || footerLength > length - 12) {
                throw new IOException(path + ": corrupt Parquet footer length " + footerLength);
            }
            byte[] bytes;
            int offset;
            if (footerLength + 8 <= tail) {
                bytes = end;
                offset = tail - 8 - footerLength;
            } else {
                bytes = new byte[footerLength];
                offset = 0;
                in.readFully(length - 8 - footerLength, bytes);
            }
            FileMetaData meta = Util.readFileMetaData(new java.io.ByteArrayInputStream(bytes, offset, footerLength));
            return new Footer(path.toString(), meta, length, footerLength);
        }
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
