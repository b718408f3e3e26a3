package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A lookup of many keys as Spark tasks that probe the index themselves: the driver hashes
 * the keys and deals the touched index buckets to tasks; each task probes its buckets'
 * segments (read once per executor JVM and kept in its bounded LRU cache,
 * {@link IndexSegments}), reads only the row groups holding candidate rows, and returns the
 * rows that satisfy the filter. The live files the index does not cover are scanned by tasks
 * of their own (hybrid scan). The driver reads no index segment, so an index far bigger than
 * the driver's cache serves a lookup of a million keys.
 */
public final class ProbeRDD extends RDD<InternalRow> {
    private static final long serialVersionUID = 1L;

    /** What one task probes: index files with the key hashes of their bucket, and the live files they may name. */
    static final class Share implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final List<String> segments = new ArrayList<>();
        final List<Long> entries = new ArrayList<>();
        final List<int[]> hashes = new ArrayList<>();
        /** Live files covered by the index, by id: the only ones whose rows count. */
        final Map<Long, LookupReader.Piece> files = new HashMap<>();
        long load;
    }

    private final List<Share> shares;
    private final List<List<LookupReader.Piece>> scans;
    private final RowGroupReader entryReader;
    /** Bound of each executor's segment cache; negative: that JVM's default. */
    private final long cacheMaxBytes;
    private final RowGroupReader groupReader;
    private final Function1<PartitionedFile, Iterator<InternalRow>> scanReader;
    private final Expression bound;
    private final RowMetadata meta;

    public ProbeRDD(SparkContext sc, List<Share> shares, List<List<LookupReader.Piece>> scans,
             RowGroupReader entryReader, long cacheMaxBytes,
             RowGroupReader groupReader, Function1<PartitionedFile, Iterator<InternalRow>> scanReader,
             Expression bound, RowMetadata meta) {
        super(sc, CollectionConverters.asScala(new ArrayList<org.apache.spark.Dependency<?>>()).toList(),
            ClassTag$.MODULE$.apply(InternalRow.class));
        this.shares = shares;
        this.scans = scans;
        this.entryReader = entryReader;
        this.cacheMaxBytes = cacheMaxBytes;
        this.groupReader = groupReader;
        this.scanReader = scanReader;
        this.bound = bound;
        this.meta = meta;
    }

    /**
     * The shares of {@code plan}'s probe, for {@code n} tasks: each touched index bucket whole
     * in one share (its files may name the same data files), the biggest first, each to the
     * share with the fewest entries so far.
     */
    public static List<Share> shares(LookupPlanner.Plan plan, Snapshot snapshot, StructType schema, int n) {
        Map<Integer, int[]> hashes = LookupReader.hashesByBucket(plan, schema);
        Map<Integer, List<IndexLog.IndexFile>> byBucket = new HashMap<>();
        if (!plan.liveCovered.isEmpty()) {
            for (IndexLog.IndexFile f : LookupReader.touchedFiles(plan, hashes)) {
                byBucket.computeIfAbsent(f.bucket, b -> new ArrayList<>()).add(f);
            }
        }
        Map<Long, AddFile> live = new HashMap<>();
        for (AddFile a : snapshot.files) {
            if (plan.liveCovered.contains(a.fileId)) {
                live.put(a.fileId, a);
            }
        }
        List<List<IndexLog.IndexFile>> buckets = new ArrayList<>(byBucket.values());
        buckets.sort(Comparator.comparingLong(ProbeRDD::entries).reversed());
        List<Share> out = new ArrayList<>();
        for (int i = 0; i < Math.min(n, buckets.size()); i++) {
            out.add(new Share());
        }
        for (List<IndexLog.IndexFile> bucket : buckets) {
            Share lightest = out.get(0);
            for (Share s : out) {
                if (s.load < lightest.load) {
                    lightest = s;
                }
            }
            for (IndexLog.IndexFile f : bucket) {
                lightest.segments.add(new Path(snapshot.root, f.path).toString());
                lightest.entries.add(f.numEntries);
                lightest.hashes.add(hashes.get(f.bucket));
                lightest.load += f.numEntries;
                for (long id : f.fileIds) {
                    AddFile a = live.get(id);
                    if (a != null) {
                        lightest.files.put(id, LookupReader.Piece.whole(a));
                    }
                }
            }
        }
        return out;
    }

    private static long entries(List<IndexLog.IndexFile> files) {
        long n = 0;
        for (IndexLog.IndexFile f : files) {
            n += f.numEntries;
        }
        return n;
    }

    /** {@code files} (whole, unindexed) dealt to at most {@code n} tasks by bytes, the biggest first. */
    public static List<List<LookupReader.Piece>> scanShares(List<AddFile> files, int n) {
        List<LookupReader.Piece> all = new ArrayList<>();
        for (AddFile a : files) {
            all.add(LookupReader.Piece.whole(a));
        }
        return LookupRDD.balance(all, n);
    }

    @Override
    public Iterator<InternalRow> compute(Partition split, TaskContext context) {
        int i = split.index();
        if (i >= shares.size()) {
            return LookupRDD.rows(scans.get(i - shares.size()).iterator(), groupReader, scanReader, bound, meta);
        }
        try {
            return LookupRDD.rows(candidates(shares.get(i)).iterator(), groupReader, scanReader, bound, meta);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The row-group pieces holding the candidate rows of one share, probed here. */
    private List<LookupReader.Piece> candidates(Share share) throws IOException {
        Configuration conf = groupReader.hadoopConf();
        Map<Long, LookupReader.Ordinals> found = new HashMap<>();
        for (int s = 0; s < share.segments.size(); s++) {
            for (IndexSegments.Segment segment : IndexSegments.segments(entryReader, new Path(share.segments.get(s)),
                    share.entries.get(s), share.hashes.get(s), conf,
                    cacheMaxBytes < 0 ? IndexSegments.DEFAULT_MAX_BYTES : cacheMaxBytes)) {
                LookupReader.probeInto(segment, share.hashes.get(s), share.files::containsKey, found);
            }
        }
        LookupReader.Pieces pieces = new LookupReader.Pieces();
        LookupReader.addCandidates(pieces, LookupReader.sortedDistinct(found), share.files, conf);
        return pieces.rowGroups;
    }

    @Override
    public Partition[] getPartitions() {
        Partition[] out = new Partition[shares.size() + scans.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = new TaskPart(i);  // a probe share, then a share of the scans
        }
        return out;
    }
}
