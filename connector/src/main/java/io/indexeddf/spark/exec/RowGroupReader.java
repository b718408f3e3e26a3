package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Reads chosen rows of chosen row groups of a file through Spark's vectorized Parquet
 * reader, handing it the file's cached footer cut to those row groups: no footer is read or
 * parsed again, and row groups in between are skipped. Values come out as a Spark scan gives
 * them. With a row cache ({@link #ROW_CACHE_CONF}), decoded row groups are kept in this JVM
 * ({@link RowCache}) and later reads jump to the wanted rows. Serializable: Spark tasks
 * carry it.
 */
public final class RowGroupReader implements java.io.Serializable {
    /** Bound of the JVM's cache of decoded row groups ({@link RowCache}); 0, the default: no cache. */
    static final String ROW_CACHE_CONF = "spark.indexeddf.rowCache.maxBytes";

    private static final Map<String, RowGroupReader> READERS = new LinkedHashMap<String, RowGroupReader>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, RowGroupReader> e) {
            return size() > ParquetRows.MAX_READERS;
        }
    };

    private static final long serialVersionUID = 1L;
    private final org.apache.spark.util.SerializableConfiguration conf;
    /** In an id-mode table, the configuration reading a file without field ids (by physical name); else null. */
    private final org.apache.spark.util.SerializableConfiguration byName;
    private final StructType required;
    /** {@code required} as JSON, part of every row-cache key (rendering it per row group costs). */
    private final String requiredJson;
    private final long cacheBytes;
    private final String datetimeRebaseMode;
    private final String int96RebaseMode;
    private final int capacity;

    RowGroupReader(Configuration conf, Configuration byName, StructType required, long cacheBytes,
                   String datetimeRebaseMode, String int96RebaseMode, int capacity) {
        this.conf = new org.apache.spark.util.SerializableConfiguration(conf);
        this.byName = byName == null ? null : new org.apache.spark.util.SerializableConfiguration(byName);
        this.required = required;
        this.requiredJson = required.json();
        this.cacheBytes = cacheBytes;
        this.datetimeRebaseMode = datetimeRebaseMode;
        this.int96RebaseMode = int96RebaseMode;
        this.capacity = capacity;
    }

    /**
     * A reader of chosen row groups of files with {@code dataSchema}, giving the columns of
     * {@code required} (kept per session and schema).
     */
    public static RowGroupReader of(SparkSession session, StructType dataSchema, StructType required, Configuration conf) {
        boolean byId = ColumnMapping.byFieldId(dataSchema);
        if (ColumnMapping.mapped(dataSchema)) {  // read physical columns; rows are positional (PROTOCOL.md §19)
            required = ColumnMapping.physical(required, dataSchema);
            dataSchema = ColumnMapping.physical(dataSchema, dataSchema);
        }
        long cacheBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(
            session.conf().get(ROW_CACHE_CONF, "0"));
        String key = ParquetRows.sessionId(session) + "|" + cacheBytes + "|" + dataSchema.json() + "|" + required.json();
        synchronized (READERS) {
            RowGroupReader r = READERS.get(key);
            if (r != null) {
                return r;
            }
        }
        // In id mode columns are found by field id (set in this reader's configuration only); a
        // file without field ids is read with a second configuration, by physical name.
        Configuration configured = configured(session, dataSchema, required, byId ? ColumnMapping.readingFieldIds(conf) : conf);
        Configuration byName = !byId ? null : configured(session, ColumnMapping.withoutFieldIds(dataSchema),
            ColumnMapping.withoutFieldIds(required), conf);
        org.apache.spark.sql.internal.SQLConf sql = ((org.apache.spark.sql.classic.SparkSession) session).sessionState().conf();
        RowGroupReader r = new RowGroupReader(configured, byName, required, cacheBytes,
            sql.getConf(org.apache.spark.sql.internal.SQLConf.PARQUET_REBASE_MODE_IN_READ()).toString(),
            sql.getConf(org.apache.spark.sql.internal.SQLConf.PARQUET_INT96_REBASE_MODE_IN_READ()).toString(),
            sql.parquetVectorizedReaderBatchSize());
        synchronized (READERS) {
            READERS.put(key, r);
        }
        return r;
    }

    /**
     * A copy of {@code conf} with every read setting of Spark's Parquet format (requested
     * schema, case sensitivity, type conversions), which it writes into the configuration it
     * builds a reader with: the group reader reads with that configuration.
     */
    private static Configuration configured(SparkSession session, StructType dataSchema, StructType required,
                                            Configuration conf) {
        Configuration configured = new Configuration(conf);
        Seq<Filter> none = scala.collection.immutable.List$.MODULE$.empty();
        new ParquetFileFormat().buildReaderWithPartitionValues(session, dataSchema, new StructType(), required, none,
            scala.collection.immutable.Map$.MODULE$.<String, String>empty().updated("returning_batch", "false"), configured);
        return configured;
    }

    /** The columns this reader gives. */
    StructType required() {
        return required;
    }

    /** The Hadoop configuration this reader reads with (in tasks too). */
    Configuration hadoopConf() {
        return conf.value();
    }

    /**
     * Calls {@code each} with the rows at offsets {@code wanted} (ascending, counted over the
     * rows of row groups {@code groups}, ascending, of {@code path}), in order; each row is
     * reused by the next (copy what you keep).
     */
    void read(Path path, long fileSize, int[] groups, long[] wanted, java.util.function.Consumer<InternalRow> each)
            throws IOException {
        ParquetRows.Footer footer = ParquetRows.footer(path, conf.value());
        if (cacheBytes <= 0) {
            long t0 = System.nanoTime();
            if (wanted.length <= FEW_ROWS && byName == null && !Boolean.getBoolean(NO_PAGES_PROPERTY)) {
                // A few rows (a point lookup): straight from their pages when the columns allow it
                // (no field ids: columns are found by name).
                InternalRow[] rows = DataPages.read(path, conf.value(), footer, groups, wanted, required,
                    () -> datetimesCorrected(footer));
                if (rows != null) {
                    PAGE_READS.addAndGet(groups.length);
                    PAGE_NANOS.addAndGet(System.nanoTime() - t0);
                    for (InternalRow row : rows) {
                        each.accept(row);
                    }
                    return;
                }
                FALLBACK_READS.addAndGet(groups.length);
            }
            // A few rows (a point lookup): smaller batches, and the decoding stops after the last
            // wanted row (data files are sorted by key: a key's rows sit together in a row group).
            Picker picker = new Picker(wanted, each);
            int batch = wanted.length <= FEW_ROWS ? Math.min(capacity, FEW_ROWS_BATCH) : capacity;
            decode(path, fileSize, footer, groups, false, batch, picker::done, row -> picker.accept((InternalRow) row));
            if (wanted.length <= FEW_ROWS) {
                SPARK_READS.addAndGet(groups.length);
                SPARK_NANOS.addAndGet(System.nanoTime() - t0);
            }
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

    /**
     * Data row groups read for a few rows ({@link #FEW_ROWS} or fewer, no row cache) so far in
     * this JVM: straight from their pages ({@link DataPages}), and through Spark's reader after
     * the page path declined them.
     */
    private static final java.util.concurrent.atomic.AtomicLong PAGE_READS = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong FALLBACK_READS = new java.util.concurrent.atomic.AtomicLong();

    /** Their wall times (ns), and the few-row reads through Spark's reader (fallbacks or not tried) and theirs. */
    private static final java.util.concurrent.atomic.AtomicLong PAGE_NANOS = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong SPARK_READS = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong SPARK_NANOS = new java.util.concurrent.atomic.AtomicLong();

    /**
     * A JVM system property that, set to true, turns the page path off (every few-row read goes
     * through Spark's reader): a switch to compare the two in one process, read on every read.
     */
    static final String NO_PAGES_PROPERTY = "indexeddf.dataPages.off";

    /**
     * Data row groups read for a few rows so far in this JVM: {from their pages, through Spark's
     * reader after the page path declined them, the page reads' wall time in ns, few-row reads
     * through Spark's reader (declined or not tried), their wall time in ns}.
     */
    public static long[] fewRowReadStats() {
        return new long[] {PAGE_READS.get(), FALLBACK_READS.get(), PAGE_NANOS.get(), SPARK_READS.get(), SPARK_NANOS.get()};
    }

    /** Whether Spark's reader reads the dates and timestamps of the file of {@code footer} as they are (rebase mode CORRECTED). */
    private boolean datetimesCorrected(ParquetRows.Footer footer) {
        java.util.Map<String, String> kv = footer.keyValues();
        scala.Function1<String, String> lookup = new scala.runtime.AbstractFunction1<String, String>() {
            @Override
            public String apply(String k) {
                return kv.get(k);
            }
        };
        return "CORRECTED".equals(org.apache.spark.sql.execution.datasources.DataSourceUtils$.MODULE$
            .datetimeRebaseSpec(lookup, datetimeRebaseMode).mode().toString());
    }

    /** Whether the row cache holds every row group of {@code pieces} (in this reader's columns). */
    public boolean holdsAll(List<LookupReader.Piece> pieces) {
        if (cacheBytes <= 0) {
            return false;
        }
        for (LookupReader.Piece p : pieces) {
            for (int g : p.groups) {
                if (RowCache.get(cacheKey(p.location(), g)) == null) {
                    return false;
                }
            }
        }
        return true;
    }

    /** The rows of each of {@code groups} from the cache, decoding (and caching) the missing ones in one pass. */
    private RowCache.Group[] cachedGroups(Path path, long fileSize, ParquetRows.Footer footer, int[] groups) throws IOException {
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
        Filler filler = new Filler(path, footer, toRead);
        decode(path, fileSize, footer, toRead, filler::add);
        RowCache.Group[] built = filler.finishAll();
        for (int i = 0; i < built.length; i++) {
            out[missing.get(i)] = built[i];
        }
        return out;
    }

    /** Wanted rows up to which a read decodes batches of {@link #FEW_ROWS_BATCH} rows. */
    private static final int FEW_ROWS = 16;
    /** Rows a batch of a read of a few rows: what is decoded past the last wanted row is at most this. */
    private static final int FEW_ROWS_BATCH = 1024;

    /** Passes on the rows at offsets {@code wanted} (ascending) of a decode pass. */
    private static final class Picker implements java.util.function.Consumer<InternalRow> {
        private final long[] wanted;
        private final java.util.function.Consumer<InternalRow> each;
        private long offset;  // the next row's
        private int next;  // the index of the next wanted offset

        Picker(long[] wanted, java.util.function.Consumer<InternalRow> each) {
            this.wanted = wanted;
            this.each = each;
        }

        @Override
        public void accept(InternalRow row) {
            if (next < wanted.length && wanted[next] == offset) {
                next++;
                each.accept(row);
            }
            offset++;
        }

        /** Whether every wanted row was passed on (the rest of the pass need not be decoded). */
        boolean done() {
            return next == wanted.length;
        }
    }

    /**
     * Packs the rows of one decode pass over row groups {@code toRead} into one cached group
     * per row group: the footer's row counts say where each ends (a row group may have none).
     */
    private final class Filler {
        private final Path path;
        private final ParquetRows.Footer footer;
        private final int[] toRead;
        private final RowCache.Group[] built;
        private final org.apache.spark.sql.catalyst.expressions.UnsafeProjection project =
            org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create(required);
        private int at;  // the index in toRead of the row group being filled
        private long left;  // its rows still to come
        private RowCache.Builder builder = new RowCache.Builder(required.size());

        Filler(Path path, ParquetRows.Footer footer, int[] toRead) {
            this.path = path;
            this.footer = footer;
            this.toRead = toRead;
            this.built = new RowCache.Group[toRead.length];
            this.left = rowsOf(0);
        }

        private long rowsOf(int i) {
            return footer.rowBounds[toRead[i] + 1] - footer.rowBounds[toRead[i]];
        }

        void add(InternalRow r) {
            while (left == 0) {  // the previous row group is complete (or had no rows)
                finishOne();
            }
            builder.add(project.apply(r));
            left--;
        }

        RowCache.Group[] finishAll() {
            while (at < toRead.length) {
                finishOne();
            }
            return built;
        }

        private void finishOne() {
            RowCache.Group g = builder.build();
            RowCache.put(cacheKey(path, toRead[at]), g, cacheBytes);
            built[at++] = g;
            builder = new RowCache.Builder(required.size());
            left = at < toRead.length ? rowsOf(at) : -1;
        }
    }

    private String cacheKey(Path path, int group) {
        return path + "#" + group + "#" + requiredJson;
    }

    /** Calls {@code each} with every row of row groups {@code groups} (ascending) of {@code path}, in file order. */
    private void decode(Path path, long fileSize, ParquetRows.Footer footer, int[] groups,
                        java.util.function.Consumer<InternalRow> each) throws IOException {
        decode(path, fileSize, footer, groups, false, capacity, () -> false, row -> each.accept((InternalRow) row));
    }

    /**
     * Calls {@code each} with the columnar batches of row groups {@code groups} (ascending) of
     * {@code path}, in file order; each batch is reused by the next.
     */
    void readBatches(Path path, int[] groups, java.util.function.Consumer<ColumnarBatch> each) throws IOException {
        ParquetRows.Footer footer = ParquetRows.footer(path, conf.value());
        decode(path, footer.fileLength, footer, groups, true, capacity, () -> false,
            batch -> each.accept((ColumnarBatch) batch));
    }

    /** The row groups of {@code path}'s footer (cached). */
    int groupCount(Path path) throws IOException {
        return ParquetRows.footer(path, conf.value()).groupCount();
    }

    /**
     * Calls {@code each} with every row (or, with {@code batches}, every columnar batch) of row
     * groups {@code groups} (ascending) of {@code path}, in file order: Spark's vectorized
     * reader over the cached footer cut to those row groups (the file's footer is not read
     * again), in batches of {@code batchRows} rows, until {@code done} says the rest is not
     * needed.
     */
    private void decode(Path path, long fileSize, ParquetRows.Footer footer, int[] groups, boolean batches,
                        int batchRows, java.util.function.BooleanSupplier done,
                        java.util.function.Consumer<Object> each) throws IOException {
        boolean named = byName != null && !ColumnMapping.hasFieldIds(footer);
        Configuration c = named ? byName.value() : conf.value();
        ParquetMetadata cut = footer.metadata(groups);
        java.util.Map<String, String> kv = cut.getFileMetaData().getKeyValueMetaData();
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
                dates.mode().toString(), dates.timeZone(), int96.mode().toString(), int96.timeZone(), false, batchRows);
        // The log knows the size: no file system call before the reads themselves.
        HadoopInputFile in = HadoopInputFile.fromStatus(
            new org.apache.hadoop.fs.FileStatus(fileSize, false, 1, 128L << 20, 0, path), c);
        try {
            // A plain open: the input file's builder-based open sets options on a configuration per call.
            reader.initialize(new org.apache.hadoop.mapred.FileSplit(path, 0, fileSize, new String[0]), context(named),
                Option.apply(in), Option.apply(org.apache.parquet.hadoop.util.HadoopStreams.wrap(
                    path.getFileSystem(c).open(path))), Option.apply(cut));
            reader.initBatch(new StructType(), InternalRow.empty());
            if (batches) {
                reader.enableReturningBatches();
            }
            while (!done.getAsBoolean() && reader.nextKeyValue()) {
                each.accept(reader.getCurrentValue());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while reading " + path);
        } finally {
            reader.close();
        }
    }

    /** Task contexts of this reader's two configurations, built once: building one copies the whole configuration. */
    private transient volatile org.apache.hadoop.mapreduce.TaskAttemptContext[] contexts;

    /**
     * The task context the reads pass Spark's Parquet reader, which only reads its
     * configuration (never changes it): one per configuration, shared by every read.
     */
    private org.apache.hadoop.mapreduce.TaskAttemptContext context(boolean named) {
        org.apache.hadoop.mapreduce.TaskAttemptContext[] held = contexts;
        if (held == null) {
            held = new org.apache.hadoop.mapreduce.TaskAttemptContext[] {
                new org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl(conf.value(),
                    new org.apache.hadoop.mapreduce.TaskAttemptID()),
                byName == null ? null : new org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl(byName.value(),
                    new org.apache.hadoop.mapreduce.TaskAttemptID())};
            contexts = held;
        }
        return held[named ? 1 : 0];
    }
}
