package io.indexeddf.spark.exec;

import java.io.IOException;
import java.nio.ByteBuffer;

import org.apache.parquet.ParquetReadOptions;
import org.apache.parquet.bytes.ByteBufferInputStream;
import org.apache.parquet.bytes.BytesUtils;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.Dictionary;
import org.apache.parquet.column.Encoding;
import org.apache.parquet.column.ValuesType;
import org.apache.parquet.column.page.DataPageV2;
import org.apache.parquet.column.page.DictionaryPage;
import org.apache.parquet.column.values.ValuesReader;
import org.apache.parquet.column.values.rle.RunLengthBitPackingHybridDecoder;

/**
 * What the two page decoders share (index blocks in {@link EntryPages}, a lookup's data rows
 * in {@link DataPages}): their read options, a page's values reader, its dictionary, and its
 * definition levels of a top-level column (no repetition levels), skipped when a run says
 * every value is there.
 */
final class PageValues {
    private PageValues() {
    }

    /**
     * Read options, one set a thread, built once each: parquet-mr's Hadoop-based options copy
     * a configuration on every build. Not one set for all threads: the options hold a codec
     * factory whose decompressors (stateful, Snappy's among them) every reader of the options
     * uses, and which a reader releases into Hadoop's codec pool when it closes, so two
     * lookups reading at once through shared options decompressed each other's pages wrongly.
     * Defaults: no record filter (every row group of the cut footer is read), no page checksum
     * verification (Spark's reader does not verify them either).
     */
    private static final ThreadLocal<ParquetReadOptions> OPTIONS =
        ThreadLocal.withInitial(() -> ParquetReadOptions.builder().build());

    /** This thread's read options for page reads (index blocks and data row groups). */
    static ParquetReadOptions readOptions() {
        return OPTIONS.get();
    }

    /** The chunk's dictionary, or null when it has no dictionary page. */
    static Dictionary dictionary(DictionaryPage page, ColumnDescriptor column) throws IOException {
        return page == null ? null : page.getEncoding().initDictionary(column, page);
    }

    /** A page's values reader of {@code encoding} (dictionary-encoded pages through {@code dictionary}). */
    static ValuesReader reader(Encoding encoding, ColumnDescriptor column, Dictionary dictionary) {
        if (encoding.usesDictionary()) {
            if (dictionary == null) {
                throw new IllegalStateException("a dictionary-encoded page of " + column + " with no dictionary page");
            }
            return encoding.getDictionaryBasedValuesReader(column, ValuesType.VALUES, dictionary);
        }
        return encoding.getValuesReader(column, ValuesType.VALUES);
    }

    /**
     * The definition levels of a v1 page of optional {@code column}, read from {@code in}
     * (left at the page's values); null when they say every value is defined (one run of RLE
     * levels of "defined": nothing to decode).
     */
    static Levels v1Levels(Encoding encoding, ColumnDescriptor column, int count, ByteBufferInputStream in)
            throws IOException {
        if (encoding == Encoding.RLE && column.getMaxDefinitionLevel() == 1) {
            ByteBuffer runs = levelsUnlessAllDefined(in, count);
            return runs == null ? null : Levels.of(new RunLengthBitPackingHybridDecoder(1, ByteBufferInputStream.wrap(runs)));
        }
        ValuesReader reader = encoding.getValuesReader(column, ValuesType.DEFINITION_LEVEL);
        reader.initFromPage(count, in);
        return reader::readInteger;
    }

    /** The definition levels of a v2 page of optional {@code column}; null when it has no null. */
    static Levels v2Levels(DataPageV2 page, ColumnDescriptor column) throws IOException {
        if (page.getNullCount() == 0) {
            return null;
        }
        return Levels.of(new RunLengthBitPackingHybridDecoder(
            BytesUtils.getWidthFromMaxInt(column.getMaxDefinitionLevel()), page.getDefinitionLevels().toInputStream()));
    }

    /**
     * Reads past the RLE definition levels of a v1 page of a column whose maximum definition
     * level is 1 (a 4-byte length, then runs of 1-bit levels), leaving {@code in} at the page's
     * values. Null when their first run is a repeated run of "defined" as long as the page's
     * {@code count} values (writers write a page with no null so): no level needs decoding then.
     * Else the levels' runs, for a decoder of bit width 1.
     */
    private static ByteBuffer levelsUnlessAllDefined(ByteBufferInputStream in, int count) throws IOException {
        int length = BytesUtils.readIntLittleEndian(in);
        ByteBuffer runs = in.slice(length);
        ByteBufferInputStream peek = ByteBufferInputStream.wrap(runs.duplicate());
        int header = BytesUtils.readUnsignedVarInt(peek);
        boolean repeated = (header & 1) == 0;  // else a bit-packed run
        return repeated && (header >>> 1) >= count && peek.read() == 1 ? null : runs;
    }

    /** The definition levels of a page, one a row. */
    @FunctionalInterface
    interface Levels {
        int next() throws IOException;

        /** Levels decoded from RLE runs. */
        static Levels of(RunLengthBitPackingHybridDecoder decoder) {
            return decoder::readInt;
        }
    }
}
