package io.indexeddf.log;

import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.roaringbitmap.RoaringBitmap;

/**
 * Reads deletion vectors (PROTOCOL.md "Deletion Vector Format"): an inline DV from its Z85
 * text, a DV file's DV at its offset (the file's version byte, the size field against the
 * descriptor's, the CRC-32 checked), then the serialized RoaringBitmapArray (magic number
 * 1681511377 little endian, a little-endian bucket count, then per bucket its 32-bit key and
 * the portable 32-bit roaring bitmap of the low halves), checked against the descriptor's
 * cardinality. Damage is {@code CorruptDeletionVectorError}, a missing file
 * {@code MissingFileError}, both naming the file, as the Python reader names them.
 *
 * <p>Decoded DVs are kept in this JVM, least recently used out past {@link #MAX_BYTES}: a DV
 * never changes (a new one gets a new uuid or offset), and every scan task and lookup of a
 * file needs its DV again.
 */
public final class DeletionVectors {
    /** The magic number that starts a serialized DV in the portable layout. */
    static final int MAGIC = Spec.DV_MAGIC;
    /** Delta Spark's older native layout: not in the protocol, refused by name. */
    static final int NATIVE_MAGIC = Spec.DV_NATIVE_MAGIC;
    private static final String WHAT_TO_DO = "the deletion vector was damaged or replaced outside Delta; restore "
        + "the file from a backup, or read (or RESTORE the table to) a version before the one that added it";
    /** Bytes of decoded DVs (their roaring bitmaps) this JVM keeps. */
    static final long MAX_BYTES = 128L << 20;

    private static final LinkedHashMap<String, Rows> CACHE = new LinkedHashMap<>(64, 0.75f, true);
    private static long cachedBytes;

    private DeletionVectors() {
    }

    /** The rows {@code d} deletes (from this JVM's cache, else read and checked now). */
    public static Rows read(DeletionVectorDescriptor d, Configuration conf) {
        String key = d.cacheKey();
        synchronized (CACHE) {
            Rows hit = CACHE.get(key);
            if (hit != null) {
                return hit;
            }
        }
        Rows rows = decode(serialized(d, conf), d);
        synchronized (CACHE) {
            if (CACHE.put(key, rows) == null) {
                cachedBytes += rows.bytes;
            }
            java.util.Iterator<Map.Entry<String, Rows>> it = CACHE.entrySet().iterator();
            while (cachedBytes > MAX_BYTES && CACHE.size() > 1 && it.hasNext()) {
                cachedBytes -= it.next().getValue().bytes;
                it.remove();
            }
        }
        return rows;
    }

    /** The DVs this JVM holds decoded: count and bytes. */
    public static long[] cacheStats() {
        synchronized (CACHE) {
            return new long[] {CACHE.size(), cachedBytes};
        }
    }

    /** The serialized DV {@code d} names (inline: decoded from Z85; else its file's framing checked). */
    static byte[] serialized(DeletionVectorDescriptor d, Configuration conf) {
        if (d.isInline()) {
            try {
                return Z85.decode(d.pathOrInlineDv, d.sizeInBytes);
            } catch (IllegalArgumentException e) {
                throw corrupt(d, e.getMessage());
            }
        }
        Path path = DeltaPaths.fromUri(d.location);
        byte[] frame = new byte[d.sizeInBytes + 8];
        try {
            FileSystem fs = path.getFileSystem(conf);
            try (FSDataInputStream in = fs.open(path)) {
                byte[] version = new byte[1];
                if (in.read(0, version, 0, 1) != 1 || version[0] != 1) {
                    throw corrupt(d, "the file's format version is not 1");
                }
                in.readFully(d.fileOffset(), frame);
            }
        } catch (FileNotFoundException e) {
            throw new IndexedDFException("MissingFileError", d.location + ": the deletion vector file the log names "
                + "is missing. It was deleted outside Delta, or by a vacuum of versions older than the retention: "
                + "read a newer version, or restore the file.", e);
        } catch (EOFException e) {
            throw corrupt(d, "the file ends before the DV does (truncated)");
        } catch (IOException e) {
            throw new IndexedDFException("CorruptDeletionVectorError", d.where() + ": cannot be read (" + e + ")", e);
        }
        ByteBuffer b = ByteBuffer.wrap(frame);  // big endian: the size field and the CRC
        int stored = b.getInt(0);
        if (stored != d.sizeInBytes) {
            throw corrupt(d, "the file says the DV has " + Integer.toUnsignedString(stored) + " bytes, the log says "
                + d.sizeInBytes);
        }
        CRC32 crc = new CRC32();
        crc.update(frame, 4, d.sizeInBytes);
        long storedCrc = b.getInt(4 + d.sizeInBytes) & 0xFFFFFFFFL;
        if (crc.getValue() != storedCrc) {
            throw corrupt(d, String.format("CRC-32 mismatch: the file holds %#010x, the DV's bytes give %#010x",
                storedCrc, crc.getValue()));
        }
        return java.util.Arrays.copyOfRange(frame, 4, 4 + d.sizeInBytes);
    }

    /** The rows of a serialized DV, checked against {@code d}'s cardinality. */
    static Rows decode(byte[] data, DeletionVectorDescriptor d) {
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        if (data.length < 12) {
            throw corrupt(d, "a serialized DV has at least 12 bytes, got " + data.length);
        }
        int magic = b.getInt();
        if (magic == NATIVE_MAGIC) {
            throw corrupt(d, "the DV is in Delta Spark's native RoaringBitmapArray layout, which the protocol does "
                + "not define; only the portable layout (magic number " + MAGIC + ") is read");
        }
        if (magic != MAGIC) {
            throw corrupt(d, "unknown magic number " + Integer.toUnsignedString(magic) + " (a DV starts with " + MAGIC
                + ")");
        }
        long count = b.getLong();
        if (count < 0 || count * 12 > data.length - 12L) {
            throw corrupt(d, "the DV claims " + Long.toUnsignedString(count) + " buckets, more than its "
                + data.length + " bytes hold");
        }
        int[] keys = new int[(int) count];
        RoaringBitmap[] bitmaps = new RoaringBitmap[(int) count];
        long cardinality = 0;
        try {
            for (int i = 0; i < count; i++) {
                keys[i] = b.getInt();
                if (keys[i] < 0) {
                    throw corrupt(d, "a bucket key has its most significant bit set (Delta keys are signed)");
                }
                if (i > 0 && keys[i] <= keys[i - 1]) {
                    throw corrupt(d, "its bucket keys are not ascending");
                }
                bitmaps[i] = new RoaringBitmap();
                bitmaps[i].deserialize(b.slice().order(ByteOrder.LITTLE_ENDIAN));
                b.position(b.position() + bitmaps[i].serializedSizeInBytes());
                cardinality += bitmaps[i].getLongCardinality();
            }
        } catch (IOException | RuntimeException e) {
            if (e instanceof IndexedDFException) {
                throw (IndexedDFException) e;
            }
            throw corrupt(d, "not a portable 64-bit roaring bitmap (" + e + ")");
        }
        if (cardinality != d.cardinality) {
            throw corrupt(d, "it holds " + cardinality + " row indexes, the log's cardinality says " + d.cardinality);
        }
        return new Rows(keys, bitmaps, cardinality, data.length);
    }

    private static IndexedDFException corrupt(DeletionVectorDescriptor d, String what) {
        return new IndexedDFException("CorruptDeletionVectorError", d.where() + ": " + what + "; " + WHAT_TO_DO);
    }

    /**
     * The row indexes (0-based ordinals in the data file) a DV deletes: one 32-bit roaring
     * bitmap per high half, as the portable format holds them (a file has fewer than 2^32 rows,
     * so almost always one). Immutable once built: shared by the threads of a JVM.
     */
    public static final class Rows {
        private final int[] keys;
        private final RoaringBitmap[] bitmaps;
        private final long cardinality;
        final long bytes;

        Rows(int[] keys, RoaringBitmap[] bitmaps, long cardinality, long bytes) {
            this.keys = keys;
            this.bitmaps = bitmaps;
            this.cardinality = cardinality;
            this.bytes = bytes;
        }

        /** Whether row {@code row} of the file is deleted. */
        public boolean contains(long row) {
            int high = (int) (row >>> 32);
            for (int i = 0; i < keys.length; i++) {
                if (keys[i] == high) {
                    return bitmaps[i].contains((int) row);
                }
                if (keys[i] > high) {
                    return false;
                }
            }
            return false;
        }

        /** How many rows are deleted. */
        public long cardinality() {
            return cardinality;
        }

        /** The rows of {@code rows} (ascending ordinals) that are not deleted; {@code rows} itself when none is. */
        public int[] keep(int[] rows) {
            int[] out = null;
            int n = 0;
            for (int i = 0; i < rows.length; i++) {
                boolean deleted = contains(rows[i] & 0xFFFFFFFFL);
                if (deleted && out == null) {
                    out = java.util.Arrays.copyOf(rows, rows.length);
                    n = i;
                } else if (!deleted && out != null) {
                    out[n++] = rows[i];
                }
            }
            return out == null ? rows : java.util.Arrays.copyOf(out, n);
        }
    }
}
