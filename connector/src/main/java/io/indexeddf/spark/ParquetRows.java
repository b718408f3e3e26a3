package io.indexeddf.spark;

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
import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;

/**
 * Reads Parquet files, or single row groups of them, in this JVM through Spark's own
 * Parquet reader ({@link ParquetFileFormat#buildReaderWithPartitionValues}), so values come
 * out exactly as a Spark scan of the same file gives them (vectorized decoding, the session's
 * Parquet settings). Footers are cached: data and index files never change.
 */
final class ParquetRows {
    private static final int MAX_FOOTERS = 1024;
    private static final Map<String, Footer> FOOTERS = new LinkedHashMap<String, Footer>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Footer> eldest) {
            return size() > MAX_FOOTERS;
        }
    };

    private static final int MAX_READERS = 32;
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
    static final class Footer {
        final ParquetMetadata metadata;
        /** First row ordinal of each row group, then the file's row count. */
        final long[] rowBounds;
        final long[] byteStart;
        final long[] byteLength;

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
    static Footer footer(Path path, Configuration conf) throws IOException {
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
     * A reader of files with {@code dataSchema} giving the columns of {@code required}: rows
     * (each reused by the next; copy what you keep), or, with {@code batches}, the columnar
     * batches themselves (cast each element to {@code ColumnarBatch}). {@code filters} let the
     * Parquet reader skip row groups by statistics and bloom filters.
     */
    static Function1<PartitionedFile, Iterator<InternalRow>> reader(SparkSession session, StructType dataSchema,
            StructType required, Seq<Filter> filters, boolean batches, Configuration conf) {
        // Building a reader broadcasts the Hadoop configuration (milliseconds): readers without
        // filters are kept per session and schema.
        String key = filters.isEmpty()
            ? sessionId(session) + "|" + batches + "|" + dataSchema.json() + "|" + required.json() : null;
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
        Function1<PartitionedFile, Iterator<InternalRow>> r = new ParquetFileFormat().buildReaderWithPartitionValues(
            session, dataSchema, new StructType(), required, filters, options, new Configuration(conf));
        if (key != null) {
            synchronized (READERS) {
                READERS.put(key, r);
            }
        }
        return r;
    }

    /** The session's UUID: readers carry its Parquet settings (a collected session's identity hash may recur). */
    private static String sessionId(SparkSession session) {
        return ((org.apache.spark.sql.classic.SparkSession) session).sessionUUID();
    }

    /** Bound of the JVM's cache of decoded row groups ({@link RowCache}); 0, the default: no cache. */
    static final String ROW_CACHE_CONF = "spark.indexeddf.rowCache.maxBytes";

    private static final Map<String, GroupReader> GROUP_READERS = new LinkedHashMap<String, GroupReader>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, GroupReader> e) {
            return size() > MAX_READERS;
        }
    };

    /**
     * A reader of chosen row groups of files with {@code dataSchema}, giving the columns of
     * {@code required} (kept per session and schema).
     */
    static GroupReader groupReader(SparkSession session, StructType dataSchema, StructType required,
                                   Configuration conf) {
        long cacheBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(
            session.conf().get(ROW_CACHE_CONF, "0"));
        String key = sessionId(session) + "|" + cacheBytes + "|" + dataSchema.json() + "|" + required.json();
        synchronized (GROUP_READERS) {
            GroupReader r = GROUP_READERS.get(key);
            if (r != null) {
                return r;
            }
        }
        // Spark's Parquet format writes every read setting (requested schema, case
        // sensitivity, type conversions) into the configuration it builds a reader with: the
        // group reader reads with that configuration.
        Configuration configured = new Configuration(conf);
        Seq<Filter> none = scala.collection.immutable.List$.MODULE$.empty();
        new ParquetFileFormat().buildReaderWithPartitionValues(session, dataSchema, new StructType(), required, none,
            scala.collection.immutable.Map$.MODULE$.<String, String>empty().updated("returning_batch", "false"), configured);
        org.apache.spark.sql.internal.SQLConf sql = ((org.apache.spark.sql.classic.SparkSession) session).sessionState().conf();
        GroupReader r = new GroupReader(configured, required, cacheBytes,
            sql.getConf(org.apache.spark.sql.internal.SQLConf.PARQUET_REBASE_MODE_IN_READ()).toString(),
            sql.getConf(org.apache.spark.sql.internal.SQLConf.PARQUET_INT96_REBASE_MODE_IN_READ()).toString(),
            sql.parquetVectorizedReaderBatchSize());
        synchronized (GROUP_READERS) {
            GROUP_READERS.put(key, r);
        }
        return r;
    }

    /**
     * Reads chosen rows of chosen row groups of a file through Spark's vectorized Parquet
     * reader, handing it the file's cached footer cut to those row groups: no footer is read or
     * parsed again, and row groups in between are skipped. Values come out as a Spark scan gives
     * them. With a row cache ({@link #ROW_CACHE_CONF}), decoded row groups are kept in this JVM
     * ({@link RowCache}) and later reads jump to the wanted rows. Serializable: Spark tasks
     * carry it.
     */
    static final class GroupReader implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private final org.apache.spark.util.SerializableConfiguration conf;
        private final StructType required;
        private final long cacheBytes;
        private final String datetimeRebaseMode;
        private final String int96RebaseMode;
        private final int capacity;

        GroupReader(Configuration conf, StructType required, long cacheBytes, String datetimeRebaseMode,
                    String int96RebaseMode, int capacity) {
            this.conf = new org.apache.spark.util.SerializableConfiguration(conf);
            this.required = required;
            this.cacheBytes = cacheBytes;
            this.datetimeRebaseMode = datetimeRebaseMode;
            this.int96RebaseMode = int96RebaseMode;
            this.capacity = capacity;
        }

        /**
         * Calls {@code each} with the rows at offsets {@code wanted} (ascending, counted over the
         * rows of row groups {@code groups}, ascending, of {@code path}), in order; each row is
         * reused by the next (copy what you keep).
         */
        void read(Path path, long fileSize, int[] groups, long[] wanted, java.util.function.Consumer<InternalRow> each)
                throws IOException {
            Footer footer = footer(path, conf.value());
            if (cacheBytes <= 0) {
                long[] next = {0, 0};  // the next row's offset, the index of the next wanted offset
                decode(path, fileSize, footer, groups, row -> {
                    if (next[1] < wanted.length && wanted[(int) next[1]] == next[0]) {
                        next[1]++;
                        each.accept(row);
                    }
                    next[0]++;
                });
                return;
            }
            RowCache.Group[] cached = cachedGroups(path, fileSize, footer, groups);
            org.apache.spark.sql.catalyst.expressions.UnsafeRow row = new org.apache.spark.sql.catalyst.expressions.UnsafeRow(
                required.size());
            long base = 0;
            int w = 0;
            for (RowCache.Group g : cached) {
                while (w < wanted.length && wanted[w] < base + g.rows()) {
                    g.pointTo(row, (int) (wanted[w++] - base));
                    each.accept(row);
                }
                base += g.rows();
            }
        }

        /** Whether the row cache holds every row group of {@code pieces} (in this reader's columns). */
        boolean holdsAll(List<LookupReader.Piece> pieces) {
            if (cacheBytes <= 0) {
                return false;
            }
            for (LookupReader.Piece p : pieces) {
                for (int g : p.groups) {
                    if (RowCache.get(cacheKey(new Path(p.path), g)) == null) {
                        return false;
                    }
                }
            }
            return true;
        }

        /** The rows of each of {@code groups} from the cache, decoding (and caching) the missing ones in one pass. */
        private RowCache.Group[] cachedGroups(Path path, long fileSize, Footer footer, int[] groups) throws IOException {
            RowCache.Group[] out = new RowCache.Group[groups.length];
            List<Integer> missing = new java.util.ArrayList<>();
            for (int i = 0; i < groups.length; i++) {
                out[i] = RowCache.get(cacheKey(path, groups[i]));
                if (out[i] == null) {
                    missing.add(i);
                }
            }
            if (missing.isEmpty()) {
                return out;
            }
            int[] toRead = new int[missing.size()];
            for (int i = 0; i < toRead.length; i++) {
                toRead[i] = groups[missing.get(i)];
            }
            org.apache.spark.sql.catalyst.expressions.UnsafeProjection project =
                org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create(required);
            int[] at = {0};  // the index in toRead of the row group being decoded
            long[] left = {footer.rowBounds[toRead[0] + 1] - footer.rowBounds[toRead[0]]};
            RowCache.Builder[] builder = {new RowCache.Builder(required.size())};
            decode(path, fileSize, footer, toRead, r -> {
                while (left[0] == 0) {  // the previous row group is complete (or had no rows)
                    finish(path, toRead, missing, out, at, builder, left, footer);
                }
                builder[0].add(project.apply(r));
                left[0]--;
            });
            while (at[0] < toRead.length) {
                finish(path, toRead, missing, out, at, builder, left, footer);
            }
            return out;
        }

        private void finish(Path path, int[] toRead, List<Integer> missing, RowCache.Group[] out, int[] at,
                            RowCache.Builder[] builder, long[] left, Footer footer) {
            RowCache.Group g = builder[0].build();
            RowCache.put(cacheKey(path, toRead[at[0]]), g, cacheBytes);
            out[missing.get(at[0])] = g;
            at[0]++;
            builder[0] = new RowCache.Builder(required.size());
            left[0] = at[0] < toRead.length ? footer.rowBounds[toRead[at[0]] + 1] - footer.rowBounds[toRead[at[0]]] : -1;
        }

        private String cacheKey(Path path, int group) {
            return path + "#" + group + "#" + required.json();
        }

        /** Calls {@code each} with every row of row groups {@code groups} (ascending) of {@code path}, in file order. */
        private void decode(Path path, long fileSize, Footer footer, int[] groups,
                            java.util.function.Consumer<InternalRow> each) throws IOException {
            Configuration c = conf.value();
            List<BlockMetaData> all = footer.metadata.getBlocks();
            List<BlockMetaData> chosen = new java.util.ArrayList<>(groups.length);
            for (int g : groups) {
                chosen.add(all.get(g));
            }
            ParquetMetadata cut = new ParquetMetadata(footer.metadata.getFileMetaData(), chosen);
            java.util.Map<String, String> kv = footer.metadata.getFileMetaData().getKeyValueMetaData();
            scala.Function1<String, String> lookup = new scala.runtime.AbstractFunction1<String, String>() {
                @Override
                public String apply(String k) {
                    return kv.get(k);
                }
            };
            org.apache.spark.sql.execution.datasources.DataSourceUtils$ utils =
                org.apache.spark.sql.execution.datasources.DataSourceUtils$.MODULE$;
            org.apache.spark.sql.catalyst.util.RebaseDateTime.RebaseSpec dates = utils.datetimeRebaseSpec(lookup, datetimeRebaseMode);
            org.apache.spark.sql.catalyst.util.RebaseDateTime.RebaseSpec int96 = utils.int96RebaseSpec(lookup, int96RebaseMode);
            org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader reader =
                new org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader(null,
                    dates.mode().toString(), dates.timeZone(), int96.mode().toString(), int96.timeZone(), false, capacity);
            // The log knows the size: no file system call before the reads themselves.
            HadoopInputFile in = HadoopInputFile.fromStatus(
                new org.apache.hadoop.fs.FileStatus(fileSize, false, 1, 128L << 20, 0, path), c);
            try {
                reader.initialize(new org.apache.hadoop.mapred.FileSplit(path, 0, fileSize, new String[0]),
                    new org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl(c, new org.apache.hadoop.mapreduce.TaskAttemptID()),
                    Option.apply(in), Option.apply(in.newStream()), Option.apply(cut));
                reader.initBatch(new StructType(), InternalRow.empty());
                while (reader.nextKeyValue()) {
                    each.accept((InternalRow) reader.getCurrentValue());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted while reading " + path);
            } finally {
                reader.close();
            }
        }
    }

    /** The byte range {@code [start, start + length)} of a file, as Spark's readers take a split. */
    static PartitionedFile split(Path path, long start, long length, long fileSize, long modificationTime) {
        scala.collection.immutable.Map<String, Object> none = scala.collection.immutable.Map$.MODULE$.empty();
        return new PartitionedFile(InternalRow.empty(), SparkPath$.MODULE$.fromPath(path), start, length,
            new String[0], modificationTime, fileSize, none);
    }
}
