package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Function1;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Index segments in this JVM: the entries of one index file (docs/PROTOCOL.md 4.5.1) as
 * sorted primitive arrays, probed by key hash, and the JVM-wide cache that keeps them
 * (least recently used first out, bounded in bytes; shared by every query of the JVM).
 * An entry costs 12 bytes: the key hash, the position of its data file in the segment's
 * small table of file ids, and the row ordinal.
 *
 * <p>Index files are sorted by key hash in row groups (blocks) of 16,384 entries, each with
 * its hash range in the footer's statistics. A probe of a few hashes ({@link #segments})
 * reads only the blocks whose range holds one, each cached on its own, so a point lookup
 * costs a few blocks a bucket however large the bucket; a probe that would touch more than
 * half of a file's blocks (a join, a long IN list) reads and caches the whole file.
 */
public final class IndexSegments {
    /** Default bound of the cache: a quarter of the heap, at most 1 GiB. */
    static final long DEFAULT_MAX_BYTES = Math.min(1L << 30, Runtime.getRuntime().maxMemory() / 4);

    private static final StructType ENTRY_SCHEMA = new StructType()
        .add("hash", DataTypes.LongType)      // uint32 in the file; Spark reads it as a long
        .add("file_id", DataTypes.LongType)
        .add("row", DataTypes.IntegerType);

    private static final Cache CACHE = new Cache();

    private IndexSegments() {
    }

    /** The entries of one index file, sorted by key hash (unsigned). */
    static final class Segment {
        /** Key hashes with the sign bit flipped, so signed order is the unsigned order. */
        final int[] hashes;
        final int[] filePos;
        final int[] rows;
        final long[] fileIds;

        Segment(int[] hashes, int[] filePos, int[] rows, long[] fileIds) {
            this.hashes = hashes;
            this.filePos = filePos;
            this.rows = rows;
            this.fileIds = fileIds;
        }

        long bytes() {
            return 64L + 4L * hashes.length + 4L * filePos.length + 4L * rows.length + 8L * fileIds.length;
        }

        /** Calls {@code out} with (file id, row) of every entry whose key hash is {@code keyHash}. */
        void probe(int keyHash, EntryConsumer out) {
            int h = keyHash ^ Integer.MIN_VALUE;
            int lo = 0;
            int hi = hashes.length;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (hashes[mid] < h) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            for (int i = lo; i < hashes.length && hashes[i] == h; i++) {
                out.accept(fileIds[filePos[i]], rows[i]);
            }
        }
    }

    /** Receives index entries. */
    interface EntryConsumer {
        void accept(long fileId, int row);
    }

    /** Entries held by the cache now, and its bytes (for tests and benchmarks). */
    public static long[] cacheStats() {
        return CACHE.stats();
    }

    /** Drops every segment and block the cache holds (for tests and benchmarks). */
    public static void clear() {
        CACHE.clear();
    }

    /**
     * A reader of index files (their entries as columnar batches, through the cached footers),
     * built on the driver and serializable: tasks that probe read their segments with it.
     */
    public static RowGroupReader entryReader(SparkSession session, Configuration conf) {
        return RowGroupReader.of(session, ENTRY_SCHEMA, ENTRY_SCHEMA, conf);
    }

    /**
     * The segment of the index file at {@code path}, from this JVM's cache or read now with
     * {@code entries} ({@link #entryReader}); the cache keeps at most {@code maxBytes}.
     */
    static Segment segment(RowGroupReader entries, Path path, long numEntries, long maxBytes) throws IOException {
        String key = path.toString();
        Segment s = CACHE.get(key);
        if (s == null) {
            int[] all = new int[entries.groupCount(path)];  // FileNotFoundException: a vacuumed index file
            for (int g = 0; g < all.length; g++) {
                all[g] = g;
            }
            s = read(entries, path, all, numEntries);
            CACHE.put(key, s, maxBytes);
        }
        return s;
    }

    /** Share of an index file's blocks past which a probe reads the whole file instead (shared with Python). */
    static final double BLOCK_SHARE = io.indexeddf.log.Spec.INDEX_BLOCK_SHARE;

    /**
     * The segments a probe of {@code hashes} (key hashes, any order) needs of the index file at
     * {@code path}: the whole file's segment when it is cached or when the hashes touch more
     * than {@link #BLOCK_SHARE} of its blocks (or it has one block), else the segments of the
     * blocks whose hash range holds one of them (from the cache, or read now and cached).
     */
    static List<Segment> segments(RowGroupReader entries, Path path, long numEntries, int[] hashes, Configuration conf,
                                  long maxBytes) throws IOException {
        String key = path.toString();
        Segment whole = CACHE.get(key);
        if (whole != null) {
            return java.util.Collections.singletonList(whole);
        }
        ParquetRows.Footer footer = ParquetRows.footer(path, conf);  // FileNotFoundException: vacuumed
        List<Integer> groups = touchedBlocks(footer, hashes);
        int n = footer.byteStart.length;
        if (n < 2 || groups.size() > BLOCK_SHARE * n) {
            return java.util.Collections.singletonList(segment(entries, path, numEntries, maxBytes));
        }
        Segment[] out = new Segment[groups.size()];
        List<Integer> missing = new java.util.ArrayList<>();
        for (int i = 0; i < out.length; i++) {
            out[i] = CACHE.get(key + "#" + groups.get(i));
            if (out[i] == null) {
                missing.add(i);
            }
        }
        if (!missing.isEmpty()) {
            // The missing blocks of the file in one pass, through the cached footer (no footer read again).
            int[] toRead = new int[missing.size()];
            for (int i = 0; i < toRead.length; i++) {
                toRead[i] = groups.get(missing.get(i));
            }
            Segment[] read = readBlocks(entries, path, footer, toRead, conf);
            for (int i = 0; i < read.length; i++) {
                CACHE.put(key + "#" + toRead[i], read[i], maxBytes);
                out[missing.get(i)] = read[i];
            }
        }
        return java.util.Arrays.asList(out);
    }

    /** Blocks read by decoding their pages directly ({@link EntryPages}), and through Spark's reader. */
    private static final java.util.concurrent.atomic.AtomicLong DIRECT = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong THROUGH_SPARK = new java.util.concurrent.atomic.AtomicLong();

    /** Row groups of index files read so far in this JVM: {decoded from their pages, through Spark's reader}. */
    public static long[] readStats() {
        return new long[] {DIRECT.get(), THROUGH_SPARK.get()};
    }

    /** Each of blocks {@code groups} (ascending) of the index file at {@code path} as a segment of its own. */
    private static Segment[] readBlocks(RowGroupReader entries, Path path, ParquetRows.Footer footer, int[] groups,
                                        Configuration conf) throws IOException {
        Segment[] out = new Segment[groups.length];
        int[] next = {0};
        boolean direct = EntryPages.read(path, conf, footer, groups, (g, hashes, ids, rows) -> {
            Entries e = new Entries(hashes.length);
            e.add(hashes, ids, rows);
            out[next[0]++] = sorted(e.segment());
        });
        if (direct) {
            DIRECT.addAndGet(groups.length);
            return out;
        }
        for (int i = 0; i < groups.length; i++) {
            out[i] = readThroughSpark(entries, path, new int[] {groups[i]},
                footer.rowBounds[groups[i] + 1] - footer.rowBounds[groups[i]]);
        }
        return out;
    }

    /** The blocks (row groups) of an index file whose hash range holds one of {@code hashes}. */
    static List<Integer> touchedBlocks(ParquetRows.Footer footer, int[] hashes) {
        int[] probes = new int[hashes.length];
        for (int i = 0; i < hashes.length; i++) {
            probes[i] = hashes[i] ^ Integer.MIN_VALUE;  // unsigned order as signed
        }
        Arrays.sort(probes);
        List<Integer> out = new java.util.ArrayList<>();
        for (int g = 0; g < footer.firstLo.length; g++) {
            int lo = footer.firstLo[g];  // the block's hash range ("hash", the first column), unsigned order as signed
            int hi = footer.firstHi[g];
            int at = Arrays.binarySearch(probes, lo);
            int first = at >= 0 ? at : -at - 1;
            if (first < probes.length && probes[first] <= hi) {
                out.add(g);
            }
        }
        return out;
    }

    /** The entries of row groups {@code groups} of the index file at {@code path} (about {@code numEntries}). */
    private static Segment read(RowGroupReader reader, Path path, int[] groups, long numEntries) throws IOException {
        ParquetRows.Footer footer = ParquetRows.footer(path, reader.hadoopConf());
        Entries e = new Entries(entryCount(numEntries));
        if (EntryPages.read(path, reader.hadoopConf(), footer, groups, (g, hashes, ids, rows) -> e.add(hashes, ids, rows))) {
            DIRECT.addAndGet(groups.length);
            return sorted(e.segment());
        }
        return readThroughSpark(reader, path, groups, numEntries);
    }

    /** {@link #read} through Spark's vectorized Parquet reader: any Parquet layout of the entries. */
    private static Segment readThroughSpark(RowGroupReader reader, Path path, int[] groups, long numEntries)
            throws IOException {
        Entries e = new Entries(entryCount(numEntries));
        reader.readBatches(path, groups, e::add);
        THROUGH_SPARK.addAndGet(groups.length);
        return sorted(e.segment());
    }

    private static int entryCount(long numEntries) {
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE - 8, numEntries));
    }

    /** Entries as the batches of an index file's read give them. */
    private static final class Entries {
        private int[] hashes;
        private int[] pos;
        private int[] rows;
        private final Map<Long, Integer> ids = new HashMap<>();
        private long[] idTable = new long[4];
        private int count;
        private long lastId;
        private int lastPos;

        Entries(int n) {
            hashes = new int[n];
            pos = new int[n];
            rows = new int[n];
        }

        /** Entries decoded straight from an index file's pages ({@link EntryPages}): raw uint32 hashes. */
        void add(int[] h, long[] ids, int[] r) {
            reserve(h.length);
            for (int i = 0; i < h.length; i++) {
                append(h[i], ids[i], r[i]);
            }
        }

        private void reserve(int more) {
            if (count + more > hashes.length) {
                int grow = Math.max(count + more, hashes.length * 2);
                hashes = Arrays.copyOf(hashes, grow);
                pos = Arrays.copyOf(pos, grow);
                rows = Arrays.copyOf(rows, grow);
            }
        }

        /** One entry: {@code hash} the key hash's bits (uint32), {@code fid} its data file's id. */
        private void append(int hash, long fid, int row) {
            if (count == 0 || fid != lastId) {  // runs of one file id (one data file a bucket) skip the map
                Integer p = ids.get(fid);
                if (p == null) {
                    p = ids.size();
                    ids.put(fid, p);
                    if (p >= idTable.length) {
                        idTable = Arrays.copyOf(idTable, idTable.length * 2);
                    }
                    idTable[p] = fid;
                }
                lastId = fid;
                lastPos = p;
            }
            hashes[count] = hash ^ Integer.MIN_VALUE;
            pos[count] = lastPos;
            rows[count] = row;
            count++;
        }

        void add(ColumnarBatch batch) {
            int rowsInBatch = batch.numRows();
            reserve(rowsInBatch);
            for (int i = 0; i < rowsInBatch; i++) {
                // Spark reads the uint32 hash as a long: its low 32 bits are the hash's bits.
                append((int) batch.column(0).getLong(i), batch.column(1).getLong(i), batch.column(2).getInt(i));
            }
        }

        Segment segment() {
            if (count != hashes.length) {
                hashes = Arrays.copyOf(hashes, count);
                pos = Arrays.copyOf(pos, count);
                rows = Arrays.copyOf(rows, count);
            }
            return new Segment(hashes, pos, rows, Arrays.copyOf(idTable, ids.size()));
        }
    }

    /** The segment itself when its hashes are in order (writers sort them), else a sorted copy. */
    private static Segment sorted(Segment s) {
        int[] h = s.hashes;
        boolean ordered = true;
        for (int i = 1; i < h.length && ordered; i++) {
            ordered = h[i - 1] <= h[i];
        }
        if (ordered) {
            return s;
        }
        Integer[] order = new Integer[h.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Integer.compare(h[a], h[b]));
        int[] hashes = new int[h.length];
        int[] pos = new int[h.length];
        int[] rows = new int[h.length];
        for (int i = 0; i < order.length; i++) {
            hashes[i] = h[order[i]];
            pos[i] = s.filePos[order[i]];
            rows[i] = s.rows[order[i]];
        }
        return new Segment(hashes, pos, rows, s.fileIds);
    }

    /** Least recently used first out, bounded by the segments' bytes. */
    private static final class Cache {
        private final LinkedHashMap<String, Segment> items = new LinkedHashMap<>(64, 0.75f, true);
        private long bytes;

        synchronized Segment get(String key) {
            return items.get(key);
        }

        synchronized void put(String key, Segment s, long maxBytes) {
            Segment old = items.put(key, s);
            if (old != null) {
                bytes -= old.bytes();
            }
            bytes += s.bytes();
            java.util.Iterator<Map.Entry<String, Segment>> it = items.entrySet().iterator();
            while (bytes > maxBytes && it.hasNext()) {
                Map.Entry<String, Segment> eldest = it.next();
                if (eldest.getValue() == s) {
                    continue;  // the segment just read serves the query that read it
                }
                bytes -= eldest.getValue().bytes();
                it.remove();
            }
        }

        synchronized void clear() {
            items.clear();
            bytes = 0;
        }

        synchronized long[] stats() {
            long entries = 0;
            for (Segment s : items.values()) {
                entries += s.hashes.length;
            }
            return new long[] {items.size(), entries, bytes};
        }
    }
}
