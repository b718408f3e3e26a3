package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.bytes.ByteBufferInputStream;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.Dictionary;
import org.apache.parquet.column.page.DataPage;
import org.apache.parquet.column.page.DataPageV1;
import org.apache.parquet.column.page.DataPageV2;
import org.apache.parquet.column.page.DictionaryPage;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.column.page.PageReader;
import org.apache.parquet.column.values.ValuesReader;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.io.InputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;

/**
 * Decodes the entries of an index file's row groups (blocks; docs/PROTOCOL.md 4.5.1) straight
 * from their pages: parquet-mr's page reader (decompression, page headers) over the cached
 * footer cut to those row groups, and its values decoders, three columns of plain integers.
 * A point lookup reads one block an index file; Spark's vectorized reader, built for a scan,
 * costs more to set up for one block (the requested schema parsed, column vectors allocated,
 * a read context per open) than decoding its 16,384 entries does.
 *
 * <p>Only the layout every writer of index files gives is read here: top-level columns
 * {@code hash} (INT32), {@code file_id} (INT64) and {@code row} (INT32), required or
 * optional, with no null value. Anything else (another layout, a null) makes {@link #read}
 * return false, and the caller reads the file through Spark's reader ({@link RowGroupReader}),
 * which gives the same values.
 */
final class EntryPages {
    private EntryPages() {
    }

    /** Receives the entries of one row group (arrays of exactly its rows). */
    interface GroupConsumer {
        void accept(int group, int[] hashes, long[] fileIds, int[] rows);
    }

    /**
     * Decodes row groups {@code groups} (ascending) of the index file at {@code path}, each
     * handed to {@code each} as it is decoded, in order; false when the file is not laid out as
     * index files are (then the caller drops what it was handed and reads the file through
     * Spark's reader).
     */
    static boolean read(Path path, Configuration conf, ParquetRows.Footer footer, int[] groups, GroupConsumer each)
            throws IOException {
        ParquetMetadata cut = footer.metadata(groups);
        ColumnDescriptor[] columns = entryColumns(cut.getFileMetaData().getSchema());
        if (columns == null) {
            return false;
        }
        // Opened as DataPages opens data files: a local file directly, with no file system looked up.
        InputFile file = DataPages.inputFile(path, conf, footer.fileLength);
        try (ParquetFileReader reader = new ParquetFileReader(file, cut, PageValues.readOptions(), file.newStream())) {
            for (int g : groups) {
                PageReadStore store = reader.readNextRowGroup();  // the group's column chunks, one read
                if (store == null || store.getRowCount() > Integer.MAX_VALUE) {
                    return false;
                }
                int n = (int) store.getRowCount();
                int[] hashes = new int[n];
                long[] ids = new long[n];
                int[] rows = new int[n];
                if (!decode(store.getPageReader(columns[0]), columns[0], hashes, null)
                    || !decode(store.getPageReader(columns[1]), columns[1], null, ids)
                    || !decode(store.getPageReader(columns[2]), columns[2], rows, null)) {
                    return false;
                }
                each.accept(g, hashes, ids, rows);
            }
        }
        return true;
    }

    /** The descriptors of (hash, file_id, row) in {@code schema}, or null when it is not an index file's. */
    static ColumnDescriptor[] entryColumns(MessageType schema) {
        String[] names = {"hash", "file_id", "row"};
        PrimitiveTypeName[] types = {PrimitiveTypeName.INT32, PrimitiveTypeName.INT64, PrimitiveTypeName.INT32};
        List<ColumnDescriptor> all = schema.getColumns();
        if (all.size() != names.length) {
            return null;
        }
        ColumnDescriptor[] out = new ColumnDescriptor[names.length];
        for (int i = 0; i < names.length; i++) {
            ColumnDescriptor c = all.get(i);
            if (c.getPath().length != 1 || !c.getPath()[0].equals(names[i]) || c.getMaxRepetitionLevel() != 0
                || c.getMaxDefinitionLevel() > 1 || c.getPrimitiveType().getPrimitiveTypeName() != types[i]) {
                return null;
            }
            out[i] = c;
        }
        return out;
    }

    /**
     * Decodes a column chunk of {@code ints.length} (or {@code longs.length}) values into the
     * array given; false when a value is null or a page is of a kind not read here.
     */
    private static boolean decode(PageReader pages, ColumnDescriptor column, int[] ints, long[] longs)
            throws IOException {
        int total = ints != null ? ints.length : longs.length;
        DictionaryPage dictionaryPage = pages.readDictionaryPage();
        Dictionary dictionary = PageValues.dictionary(dictionaryPage, column);
        int at = 0;
        for (DataPage page = pages.readPage(); page != null; page = pages.readPage()) {
            int count = page.getValueCount();
            if (at + count > total) {
                return false;
            }
            ValuesReader values;
            if (page instanceof DataPageV1) {
                DataPageV1 v1 = (DataPageV1) page;
                ByteBufferInputStream in = v1.getBytes().toInputStream();
                // No repetition levels (top-level columns); definition levels only when optional.
                if (column.getMaxDefinitionLevel() > 0
                    && !allDefined(PageValues.v1Levels(v1.getDlEncoding(), column, count, in), count)) {
                    return false;
                }
                values = PageValues.reader(v1.getValueEncoding(), column, dictionary);
                values.initFromPage(count, in);
            } else if (page instanceof DataPageV2) {
                DataPageV2 v2 = (DataPageV2) page;
                if (v2.getNullCount() != 0 || v2.getRowCount() != count) {
                    return false;
                }
                values = PageValues.reader(v2.getDataEncoding(), column, dictionary);
                values.initFromPage(count, v2.getData().toInputStream());
            } else {
                return false;
            }
            if (ints != null) {
                for (int i = 0; i < count; i++) {
                    ints[at + i] = values.readInteger();
                }
            } else {
                for (int i = 0; i < count; i++) {
                    longs[at + i] = values.readLong();
                }
            }
            at += count;
        }
        return at == total;
    }

    /** Whether the {@code count} definition levels {@code levels} gives all say "defined" (no null). */
    private static boolean allDefined(PageValues.Levels levels, int count) throws IOException {
        if (levels == null) {
            return true;
        }
        for (int i = 0; i < count; i++) {
            if (levels.next() != 1) {
                return false;
            }
        }
        return true;
    }
}
