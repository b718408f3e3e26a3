package io.indexeddf.spark.exec;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;

/**
 * Decoded row groups in this JVM (the column cache of the design, opt-in with
 * {@code spark.indexeddf.rowCache.maxBytes}): the rows of one row group, in the columns one
 * kind of query reads, packed as Spark's {@link UnsafeRow}s in one byte array with an offset
 * per row, so a lookup jumps straight to the rows the index names instead of decoding the
 * row group again. One cache per JVM (the driver's, each executor's), shared by all its
 * queries and tasks; least recently used first out, bounded in bytes. Data files never
 * change, so entries never go stale.
 */
public final class RowCache {
    private RowCache() {
    }

    /** One row group's rows in some columns (serializable: {@link PackedRows} ships groups to tasks). */
    static final class Group implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final int numFields;
        final byte[] data;
        /** Start of each row in {@link #data}, then the end of the last. */
        final int[] offsets;

        Group(int numFields, byte[] data, int[] offsets) {
            this.numFields = numFields;
            this.data = data;
            this.offsets = offsets;
        }

        int rows() {
            return offsets.length - 1;
        }

        /** Points {@code row} at row {@code i} (no copy). */
        void pointTo(UnsafeRow row, int i) {
            row.pointTo(data, Platform.BYTE_ARRAY_OFFSET + offsets[i], offsets[i + 1] - offsets[i]);
        }

        long bytes() {
            return 64L + data.length + 4L * offsets.length;
        }
    }

    /** Packs rows (as {@link UnsafeRow}s of one schema) into a {@link Group}. */
    static final class Builder {
        private final int numFields;
        private byte[] data = new byte[1 << 16];
        private int[] offsets = new int[1024];
        private int rows;
        private int size;

        Builder(int numFields) {
            this.numFields = numFields;
        }

        void add(UnsafeRow row) {
            int n = row.getSizeInBytes();
            if (size + n > data.length) {
                data = java.util.Arrays.copyOf(data, Math.max(data.length * 2, size + n));
            }
            if (rows + 2 > offsets.length) {
                offsets = java.util.Arrays.copyOf(offsets, offsets.length * 2);
            }
            row.writeToMemory(data, Platform.BYTE_ARRAY_OFFSET + size);
            offsets[rows] = size;
            size += n;
            rows++;
            offsets[rows] = size;
        }

        Group build() {
            return new Group(numFields, java.util.Arrays.copyOf(data, size), java.util.Arrays.copyOf(offsets, rows + 1));
        }
    }

    private static final Object LOCK = new Object();
    private static final LinkedHashMap<String, Group> GROUPS = new LinkedHashMap<>(256, 0.75f, true);
    private static long held;
    private static long maxBytes;

    /** The cached rows of a row group in some columns, or null. */
    static Group get(String key) {
        synchronized (LOCK) {
            return GROUPS.get(key);
        }
    }

    /** Keeps {@code g} within a bound of {@code bound} bytes (the newest reader's setting wins). */
    static void put(String key, Group g, long bound) {
        synchronized (LOCK) {
            maxBytes = bound;
            if (g.bytes() > maxBytes) {
                return;
            }
            Group old = GROUPS.put(key, g);
            held += g.bytes() - (old == null ? 0 : old.bytes());
            Iterator<Map.Entry<String, Group>> eldest = GROUPS.entrySet().iterator();
            while (held > maxBytes && eldest.hasNext()) {
                held -= eldest.next().getValue().bytes();
                eldest.remove();
            }
        }
    }

    /** (row groups, rows, bytes) held, for tests and benchmarks. */
    public static long[] cacheStats() {
        synchronized (LOCK) {
            long rows = 0;
            for (Group g : GROUPS.values()) {
                rows += g.rows();
            }
            return new long[] {GROUPS.size(), rows, held};
        }
    }

    /** Drops every cached row group (tests, benchmarks). */
    public static void clear() {
        synchronized (LOCK) {
            GROUPS.clear();
            held = 0;
        }
    }
}
