package io.indexeddf.spark.exec;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import scala.Function1;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A lookup of many keys as Spark tasks: each task reads its share of the row groups that hold
 * candidate rows (found through the index on the driver), and of the live files the index does
 * not cover, through Spark's own Parquet reader, and returns the rows that satisfy the filter.
 * Row groups without a candidate are never read.
 */
public final class LookupRDD extends RDD<InternalRow> {
    private static final long serialVersionUID = 1L;

    private final List<List<LookupReader.Piece>> parts;
    private final RowGroupReader groupReader;
    private final Function1<PartitionedFile, Iterator<InternalRow>> scanReader;
    private final Expression bound;
    private final RowMetadata meta;

    public LookupRDD(SparkContext sc, LookupReader.Pieces pieces, int numPartitions,
              RowGroupReader groupReader,
              Function1<PartitionedFile, Iterator<InternalRow>> scanReader, Expression bound, RowMetadata meta) {
        super(sc, CollectionConverters.asScala(new ArrayList<org.apache.spark.Dependency<?>>()).toList(),
            ClassTag$.MODULE$.apply(InternalRow.class));
        List<LookupReader.Piece> all = new ArrayList<>(pieces.rowGroups);
        all.addAll(pieces.scans);
        this.parts = balance(all, numPartitions);
        this.groupReader = groupReader;
        this.scanReader = scanReader;
        this.bound = bound;
        this.meta = meta;
    }

    /** {@code pieces} dealt to at most {@code numPartitions} partitions by bytes, the biggest first, each to the lightest. */
    static List<List<LookupReader.Piece>> balance(List<LookupReader.Piece> pieces, int numPartitions) {
        List<LookupReader.Piece> all = new ArrayList<>(pieces);
        all.sort(Comparator.comparingLong((LookupReader.Piece p) -> p.length).reversed());
        int n = Math.max(1, Math.min(numPartitions, all.size()));
        List<List<LookupReader.Piece>> out = new ArrayList<>();
        long[] load = new long[n];
        for (int i = 0; i < n; i++) {
            out.add(new ArrayList<>());
        }
        for (LookupReader.Piece p : all) {
            int lightest = 0;
            for (int i = 1; i < n; i++) {
                if (load[i] < load[lightest]) {
                    lightest = i;
                }
            }
            out.get(lightest).add(p);
            load[lightest] += p.length;
        }
        return out;
    }

    @Override
    public Iterator<InternalRow> compute(Partition split, TaskContext context) {
        return rows(parts.get(split.index()).iterator(), groupReader, scanReader, bound, meta);
    }

    /**
     * The rows of {@code pieces} that satisfy {@code bound}: row groups through {@code groupReader},
     * whole files (hybrid scan) through {@code scanReader}; one piece's rows at a time (a row
     * group's at most). With {@code meta} (row groups only), each row has its {@code _metadata}.
     */
    static Iterator<InternalRow> rows(java.util.Iterator<LookupReader.Piece> pieces, RowGroupReader groupReader,
                                      Function1<PartitionedFile, Iterator<InternalRow>> scanReader, Expression bound,
                                      RowMetadata meta) {
        return CollectionConverters.asScala(new java.util.Iterator<InternalRow>() {
            private java.util.Iterator<InternalRow> current = java.util.Collections.emptyIterator();

            @Override
            public boolean hasNext() {
                while (!current.hasNext() && pieces.hasNext()) {
                    LookupReader.Piece p = pieces.next();
                    try {
                        current = (p.groups == null ? LookupReader.matching(scanReader.apply(p.split()), bound,
                                Partitions.Filler.of(p.partitionValues, groupReader.required()))
                            : LookupReader.readGroups(groupReader, p, bound, meta)).iterator();
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                }
                return current.hasNext();
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new java.util.NoSuchElementException();
                }
                return current.next();
            }
        });
    }

    @Override
    public Partition[] getPartitions() {
        Partition[] out = new Partition[parts.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = new TaskPart(i);  // one task's share: parts.get(i)
        }
        return out;
    }
}
