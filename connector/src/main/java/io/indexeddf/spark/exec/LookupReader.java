package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.DeletionVectorDescriptor;
import io.indexeddf.log.DeletionVectors;
import io.indexeddf.log.DeltaPaths;
import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.InterpretedPredicate;
import org.apache.spark.sql.execution.datasources.DataSourceStrategy$;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Executes a {@link LookupPlanner.Plan} on the driver: probes the index segments of the keys'
 * index buckets ({@link IndexSegments}), reads only the row groups that hold candidate rows
 * and the live files the index does not cover, through Spark's own Parquet reader
 * ({@link ParquetRows}), and keeps the rows that satisfy the whole filter condition.
 */
public final class LookupReader {
    private LookupReader() {
    }

    /** A part of a data file to read: some of its row groups (with the row offsets wanted) or the whole file. */
    static final class Piece implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String path;
        /** The file's id ({@link TableParquetFormat#FILE_ID}). */
        final long fileId;
        final long fileSize;
        final long modificationTime;
        /** The row groups to read, ascending; null: the whole file, filtered (hybrid scan). */
        final int[] groups;
        /** Offsets of the candidate rows among the rows of {@code groups}, ascending; null with {@code groups}. */
        final long[] wanted;
        /** The candidate rows' ordinals in the file (one for each of {@code wanted}); null with {@code groups}. */
        final long[] ordinals;
        /** Bytes to read. */
        final long length;
        /** The file's deletion vector, or null: its rows are dropped from candidates and scans. */
        final DeletionVectorDescriptor dv;
        /** The file's partition values ({@code add.partitionValues}; empty when unpartitioned): its rows get them. */
        final Map<String, String> partitionValues;

        private Piece(String path, long fileId, long fileSize, long modificationTime, int[] groups, long[] wanted,
                      long[] ordinals, long length, DeletionVectorDescriptor dv, Map<String, String> partitionValues) {
            this.path = path;
            this.fileId = fileId;
            this.fileSize = fileSize;
            this.modificationTime = modificationTime;
            this.groups = groups;
            this.wanted = wanted;
            this.ordinals = ordinals;
            this.length = length;
            this.dv = dv;
            this.partitionValues = partitionValues;
        }

        /** The whole live file {@code a} (a hybrid scan's piece, and what tasks that probe are told of a file). */
        static Piece whole(AddFile a) {
            return new Piece(DeltaPaths.uri(a.location), a.fileId, a.size, a.modificationTime, null, null, null, a.size,
                a.deletionVector, a.partitionValues);
        }

        /** Where Hadoop reads the file. */
        org.apache.hadoop.fs.Path location() {
            return DeltaPaths.fromUri(path);
        }

        /** Row groups {@code groups} of this whole file, with the rows at offsets {@code wanted} of them (file ordinals {@code ordinals}). */
        Piece rows(int[] groups, long[] wanted, long[] ordinals, long length) {
            return new Piece(path, fileId, fileSize, modificationTime, groups, wanted, ordinals, length, dv,
                partitionValues);
        }

        /** The whole file as Spark's readers take a split (with its id and DV, {@link TableParquetFormat}). */
        PartitionedFile split() {
            return ParquetRows.split(location(), 0, fileSize, fileSize, modificationTime,
                TableParquetFormat.fileMetadata(fileId, dv));
        }
    }

    /** Most row groups one piece reads: pieces of one file still read side by side. */
    private static final int GROUPS_PER_PIECE = 8;

    /** What a lookup reads: candidate row groups, unindexed files, and how much that is. */
    public static final class Pieces {
        public final List<Piece> rowGroups = new ArrayList<>();
        public final List<Piece> scans = new ArrayList<>();
        /** Row groups of {@link #rowGroups}. */
        public int groupCount;
        public long candidateRows;
        /** Bytes of the candidate row groups and the unindexed files. */
        public long bytes;
        /** Bytes of the unindexed files alone. */
        public long scanBytes;
        /** Whether some unindexed file has a deletion vector (its scan applies it). */
        public boolean dvScans;
    }

    /** The row groups holding candidate rows of {@code plan}'s keys (probed through the index), and its scans. */
    public static Pieces pieces(SparkSession session, LookupPlanner.Plan plan, Snapshot snapshot, StructType schema,
                         Configuration conf, LookupLimits limits) throws IOException {
        Map<Long, int[]> candidates = probe(session, plan, snapshot.root, schema, conf, limits.cacheMaxBytes);
        Map<Long, Piece> files = new HashMap<>();
        for (AddFile a : snapshot.files) {
            if (candidates.containsKey(a.fileId)) {
                files.put(a.fileId, Piece.whole(a));
            }
        }
        Pieces out = new Pieces();
        addCandidates(out, candidates, files, conf);
        for (AddFile a : plan.scan) {
            out.scans.add(Piece.whole(a));
            out.dvScans |= a.deletionVector != null;
            out.bytes += a.size;
            out.scanBytes += a.size;
        }
        return out;
    }

    /**
     * Adds the pieces holding {@code candidates} (data file id, ascending -> candidate row
     * ordinals, ascending, distinct) of the whole files {@code files} (by id) to {@code out}.
     * The index may still name rows a file's deletion vector deletes: they are no candidates
     * (on the driver, and in the tasks that probe, {@link ProbeRDD}).
     */
    static void addCandidates(Pieces out, Map<Long, int[]> candidates, Map<Long, Piece> files, Configuration conf)
            throws IOException {
        Map<Long, int[]> live = new java.util.LinkedHashMap<>();
        for (Map.Entry<Long, int[]> e : candidates.entrySet()) {
            DeletionVectorDescriptor dv = files.get(e.getKey()).dv;
            int[] rows = dv == null ? e.getValue() : DeletionVectors.read(dv, conf).keep(e.getValue());
            if (rows.length > 0) {
                live.put(e.getKey(), rows);
            }
        }
        List<java.util.concurrent.Callable<ParquetRows.Footer>> footerLoads = new ArrayList<>();
        for (Long id : live.keySet()) {
            footerLoads.add(() -> ParquetRows.footer(files.get(id).location(), conf));
        }
        java.util.Iterator<ParquetRows.Footer> footers = inParallel(footerLoads).iterator();
        for (Map.Entry<Long, int[]> e : live.entrySet()) {
            addPieces(out, files.get(e.getKey()), footers.next(), e.getValue());
        }
    }

    /**
     * The pieces of one file: its candidate rows ({@code rows}, ascending, distinct) grouped by
     * row group, up to {@link #GROUPS_PER_PIECE} row groups a piece. Primitive arrays only: a
     * join's lookup hands over tens of thousands of rows.
     */
    private static void addPieces(Pieces out, Piece file, ParquetRows.Footer footer, int[] rows) {
        long[] wanted = new long[rows.length];
        int i = 0;
        int start = 0;  // the piece's first row in rows
        while (i < rows.length) {
            int[] ids = new int[GROUPS_PER_PIECE];
            int groups = 0;
            int count = 0;
            long base = 0;  // rows of the piece's earlier row groups
            long bytes = 0;
            while (i < rows.length && groups < GROUPS_PER_PIECE) {
                int g = footer.rowGroupOf(rows[i]);
                long first = footer.rowBounds[g];
                long end = footer.rowBounds[g + 1];
                for (; i < rows.length && rows[i] < end; i++) {
                    wanted[count++] = base + rows[i] - first;
                }
                ids[groups++] = g;
                base += end - first;
                bytes += footer.byteLength[g];
            }
            long[] ordinals = new long[count];
            for (int r = 0; r < count; r++) {
                ordinals[r] = rows[start + r];
            }
            start = i;
            out.rowGroups.add(file.rows(java.util.Arrays.copyOf(ids, groups), java.util.Arrays.copyOf(wanted, count),
                ordinals, bytes));
            out.groupCount += groups;
            out.candidateRows += count;
            out.bytes += bytes;
        }
    }

    /**
     * The rows of {@code pieces} that satisfy {@code condition}, read here (row groups through
     * {@code groupReader}), with the columns of {@code required} ({@code output} names them), or
     * null past {@code maxRows} rows.
     */
    public static List<InternalRow> readHere(SparkSession session, Pieces pieces, RowGroupReader groupReader,
                                      StructType schema, StructType required, Expression condition,
                                      List<Attribute> output, RowMetadata meta, Configuration conf, long maxRows)
            throws IOException {
        Expression bound = bound(condition, output);
        Function1<PartitionedFile, Iterator<InternalRow>> scanReader =
            pieces.scans.isEmpty() ? null : scanReader(session, schema, required, condition, conf, pieces.dvScans);
        List<java.util.concurrent.Callable<List<InternalRow>>> reads = new ArrayList<>();
        for (Piece p : pieces.rowGroups) {
            reads.add(() -> readGroups(groupReader, p, bound, meta));
        }
        for (Piece p : pieces.scans) {
            reads.add(() -> matching(scanReader.apply(p.split()), bound, Partitions.Filler.of(p.partitionValues, required)));
        }
        List<InternalRow> out = new ArrayList<>();
        for (List<InternalRow> part : inParallel(reads)) {
            out.addAll(part);
            if (out.size() > maxRows) {
                return null;  // the rows of a key held in the driver's memory: tasks are better
            }
        }
        return out;
    }

    /**
     * The candidate rows of a piece of row groups that satisfy {@code bound}, copied (with the
     * file's partition values: the condition may name partition columns), and with
     * {@code meta} (or null) the {@code _metadata} column after the data columns.
     */
    static List<InternalRow> readGroups(RowGroupReader reader, Piece p, Expression bound, RowMetadata meta)
            throws IOException {
        BasePredicate predicate = predicate(bound);
        Partitions.Filler fill = Partitions.Filler.of(p.partitionValues, reader.required());
        PartitionedFile file = meta == null ? null : p.split();
        List<InternalRow> out = new ArrayList<>();
        int[] next = {0};  // the reader gives exactly the wanted rows, in order
        reader.read(p.location(), p.fileSize, p.groups, p.wanted, row -> {
            long ordinal = p.ordinals[next[0]++];
            InternalRow r = fill == null ? row : fill.apply(row);
            if (predicate.eval(r)) {
                out.add(meta != null ? meta.append(r, file, ordinal) : fill == null ? row.copy() : r);
            }
        });
        return out;
    }

    /**
     * Interpreted: generated code holds the key literals and would compile anew for every key
     * (tens of ms), while the candidate rows are few. One predicate per read: reads run in
     * parallel.
     */
    private static BasePredicate predicate(Expression bound) {
        BasePredicate predicate = new InterpretedPredicate(bound);
        predicate.initialize(0);
        return predicate;
    }

    /**
     * A reader of unindexed files: the filter's conjuncts let Parquet skip their row groups.
     * With {@code deletionVectors} (some file of the version has one), it drops the rows a
     * piece's DV deletes ({@link DeletionVectorFormat}, by row index: skipped row groups leave
     * no ordinal to count).
     */
    public static Function1<PartitionedFile, Iterator<InternalRow>> scanReader(SparkSession session, StructType schema,
            StructType required, Expression condition, Configuration conf, boolean deletionVectors) {
        return ParquetRows.reader(session, deletionVectors ? new DeletionVectorFormat() : new ParquetFileFormat(),
            schema, required, pushed(condition), false, conf);
    }

    /**
     * The rows of {@code rows} (a whole file, hybrid scan) that satisfy {@code bound}, copied;
     * {@code fill} (or null) gives them the file's partition values first.
     */
    static List<InternalRow> matching(Iterator<InternalRow> rows, Expression bound, Partitions.Filler fill) {
        BasePredicate predicate = predicate(bound);
        List<InternalRow> out = new ArrayList<>();
        while (rows.hasNext()) {
            InternalRow row = rows.next();
            InternalRow r = fill == null ? row : fill.apply(row);
            if (predicate.eval(r)) {
                out.add(fill == null ? row.copy() : r);
            }
        }
        return out;
    }

    /** Threads of the driver's reads: as many as cores (reads decode Parquet, CPU-bound). */
    private static final java.util.concurrent.ExecutorService POOL = java.util.concurrent.Executors.newFixedThreadPool(
        Math.max(1, Runtime.getRuntime().availableProcessors()), r -> {
            Thread t = new Thread(r, "indexeddf-driver-lookup");
            t.setDaemon(true);
            return t;
        });

    /** The results of {@code tasks}, in order, run on the pool (one task runs in the caller). */
    public static <T> List<T> inParallel(List<java.util.concurrent.Callable<T>> tasks) throws IOException {
        List<T> out = new ArrayList<>();
        try {
            if (tasks.size() <= 1) {
                for (java.util.concurrent.Callable<T> t : tasks) {
                    out.add(t.call());
                }
                return out;
            }
            for (java.util.concurrent.Future<T> f : POOL.invokeAll(tasks)) {
                out.add(f.get());
            }
            return out;
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof IOException) {
                throw (IOException) c;
            }
            throw c instanceof RuntimeException ? (RuntimeException) c : new RuntimeException(c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while reading index lookups");
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** {@code condition} with its columns bound to their positions in the rows read. */
    public static Expression bound(Expression condition, List<Attribute> output) {
        return hashedLists(condition).transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression e) {
                return LookupPlanner.indexOf(e, output) >= 0;
            }

            @Override
            public Expression apply(Expression e) {
                int i = LookupPlanner.indexOf(e, output);
                return new BoundReference(i, e.dataType(), e.nullable());
            }
        });
    }

    /** Lists longer than this become hash sets (Spark's {@code spark.sql.optimizer.inSetConversionThreshold}). */
    private static final int IN_SET_THRESHOLD = 10;

    /**
     * {@code condition} with each long {@code IN} list of literals as an {@link InSet}, as
     * Spark's {@code OptimizeIn} rewrites it later in the optimizer: the lookup rules run
     * first, and an interpreted {@code In} compares a row with every value of the list (a
     * lookup of 5,000 keys spent 800 ms comparing its 20,000 candidate rows).
     */
    private static Expression hashedLists(Expression condition) {
        return condition.transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression e) {
                if (!(e instanceof In) || ((In) e).list().size() <= IN_SET_THRESHOLD) {
                    return false;
                }
                for (Expression v : CollectionConverters.asJava(((In) e).list())) {
                    if (!v.foldable()) {
                        return false;
                    }
                }
                return true;
            }

            @Override
            public Expression apply(Expression e) {
                Set<Object> values = new java.util.HashSet<>();
                for (Expression v : CollectionConverters.asJava(((In) e).list())) {
                    values.add(v.eval(null));
                }
                return new InSet(((In) e).value(), CollectionConverters.asScala(values).toSet());
            }
        });
    }

    /**
     * Data file id (ascending) -> candidate row ordinals (ascending, distinct), from the
     * segments of the keys' index buckets.
     */
    private static Map<Long, int[]> probe(SparkSession session, LookupPlanner.Plan plan,
            org.apache.hadoop.fs.Path root, StructType schema, Configuration conf, long maxBytes) throws IOException {
        if (plan.liveCovered.isEmpty()) {
            return new TreeMap<>();
        }
        Map<Integer, int[]> hashes = hashesByBucket(plan, schema);
        List<IndexLog.IndexFile> touched = touchedFiles(plan, hashes);
        RowGroupReader entries = IndexSegments.entryReader(session, conf);
        List<java.util.concurrent.Callable<List<IndexSegments.Segment>>> loads = new ArrayList<>();
        for (IndexLog.IndexFile f : touched) {
            org.apache.hadoop.fs.Path path = new org.apache.hadoop.fs.Path(root, f.path);
            int[] probes = hashes.get(f.bucket);
            loads.add(() -> IndexSegments.segments(entries, path, f.numEntries, probes, conf, maxBytes));
        }
        List<List<IndexSegments.Segment>> segments = inParallel(loads);  // cold blocks load side by side
        Map<Long, Ordinals> found = new HashMap<>();
        for (int i = 0; i < touched.size(); i++) {
            for (IndexSegments.Segment s : segments.get(i)) {
                probeInto(s, hashes.get(touched.get(i).bucket), plan.liveCovered::contains, found);
            }
        }
        return sortedDistinct(found);
    }

    /** Index bucket (ascending) -> the key hashes of {@code plan}'s keys in it. */
    static Map<Integer, int[]> hashesByBucket(LookupPlanner.Plan plan, StructType schema) {
        IndexLog.Entry index = plan.index;
        Map<Integer, Ordinals> byBucket = new TreeMap<>();
        for (Object[] k : plan.keys) {
            int bucket = LookupPlanner.bucket(k, index.columns, schema, index.numBuckets);
            byBucket.computeIfAbsent(bucket, b -> new Ordinals())
                .add(LookupPlanner.hash(k, index.columns, schema, LookupPlanner.KEY_HASH_SEED));
        }
        Map<Integer, int[]> out = new TreeMap<>();
        for (Map.Entry<Integer, Ordinals> e : byBucket.entrySet()) {
            out.put(e.getKey(), e.getValue().sortedDistinct());
        }
        return out;
    }

    /** The index files of {@code plan}'s index that a probe of {@code hashes} reads: a touched bucket's, covering a live file. */
    static List<IndexLog.IndexFile> touchedFiles(LookupPlanner.Plan plan, Map<Integer, int[]> hashes) {
        List<IndexLog.IndexFile> out = new ArrayList<>();
        for (IndexLog.IndexFile f : plan.index.files) {
            if (hashes.containsKey(f.bucket) && coversAny(f, plan.liveCovered)) {
                out.add(f);
            }
        }
        return out;
    }

    /** Probes {@code segment} for each of {@code hashes}, adding the rows of files {@code live} accepts to {@code found}. */
    static void probeInto(IndexSegments.Segment segment, int[] hashes, java.util.function.LongPredicate live,
                          Map<Long, Ordinals> found) {
        for (int h : hashes) {
            segment.probe(h, (fileId, row) -> {
                if (live.test(fileId)) {
                    found.computeIfAbsent(fileId, x -> new Ordinals()).add(row);
                }
            });
        }
    }

    /** Data file id (ascending) -> its rows of {@code found}, ascending and distinct. */
    static Map<Long, int[]> sortedDistinct(Map<Long, Ordinals> found) {
        Map<Long, int[]> out = new TreeMap<>();
        for (Map.Entry<Long, Ordinals> e : found.entrySet()) {
            out.put(e.getKey(), e.getValue().sortedDistinct());
        }
        return out;
    }

    /** Row ordinals of one file as the probes find them (any order, maybe repeated: equal key hashes); key hashes too. */
    static final class Ordinals {
        private int[] rows = new int[16];
        private int n;

        void add(int row) {
            if (n == rows.length) {
                rows = java.util.Arrays.copyOf(rows, n * 2);
            }
            rows[n++] = row;
        }

        int[] sortedDistinct() {
            int[] s = java.util.Arrays.copyOf(rows, n);
            java.util.Arrays.sort(s);
            int m = 0;
            for (int r : s) {
                if (m == 0 || s[m - 1] != r) {
                    s[m++] = r;
                }
            }
            return java.util.Arrays.copyOf(s, m);
        }
    }

    private static boolean coversAny(IndexLog.IndexFile f, Set<Long> live) {
        for (long id : f.fileIds) {
            if (live.contains(id)) {
                return true;
            }
        }
        return false;
    }

    /** The conjuncts Parquet can use to skip row groups of scanned files. */
    private static Seq<org.apache.spark.sql.sources.Filter> pushed(Expression condition) {
        List<org.apache.spark.sql.sources.Filter> out = new ArrayList<>();
        for (Expression c : LookupPlanner.conjuncts(condition)) {
            Option<org.apache.spark.sql.sources.Filter> f = DataSourceStrategy$.MODULE$.translateFilter(c, false);
            if (f.isDefined()) {
                out.add(f.get());
            }
        }
        return CollectionConverters.asScala(out).toList();
    }
}
