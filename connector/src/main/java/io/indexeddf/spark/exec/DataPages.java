package io.indexeddf.spark.exec;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.bytes.ByteBufferInputStream;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.Dictionary;
import org.apache.parquet.column.Encoding;
import org.apache.parquet.column.page.DataPage;
import org.apache.parquet.column.page.DataPageV1;
import org.apache.parquet.column.page.DataPageV2;
import org.apache.parquet.column.page.DictionaryPage;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.column.page.PageReader;
import org.apache.parquet.column.values.ValuesReader;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.hadoop.util.HadoopStreams;
import org.apache.parquet.io.InputFile;
import org.apache.parquet.io.SeekableInputStream;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;
import org.apache.parquet.schema.Type;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads a few rows of a data file's row groups straight from their pages, as {@link EntryPages}
 * reads index blocks: parquet-mr's page reader (decompression, page headers) over the cached
 * footer cut to those row groups, and its values decoders. A point lookup wants one row or a
 * few of a row group; Spark's vectorized reader, built for a scan, costs more to set up for
 * them (the requested schema parsed from the configuration, read options built, column vectors
 * allocated) than decoding them does.
 *
 * <p>Each required column is decoded page by page up to the last wanted row: a page before the
 * next wanted row is not decoded at all, values before a wanted row are skipped, and nothing
 * after the last one is read. The rows come out as Spark's reader gives them (boxed values as
 * {@code ColumnarBatchRow.copy()} holds them). A local file with no checksum file beside it is
 * opened directly (no Hadoop file system looked up, no checksummed open): in a profile of point
 * lookups on a 20M-row table those took about a quarter of the read's time.
 *
 * <p>Only what gives exactly the values of Spark's reader with no conversion is read here:
 * top-level columns, not repeated, found by their exact name (and no other of the file's
 * top-level columns of that name in another case), of Spark types and Parquet types
 * <ul>
 *   <li>boolean: BOOLEAN;</li>
 *   <li>byte, short, int: INT32 with no logical type (int only) or INT(8/16/32, signed);</li>
 *   <li>long: INT64 with no logical type or INT(64, signed);</li>
 *   <li>float: FLOAT; double: DOUBLE (no logical type);</li>
 *   <li>date: INT32 DATE, and timestamp: INT64 TIMESTAMP(MICROS, adjusted to UTC), when Spark's datetime
 *   rebasing of the file is CORRECTED (the values are then read as they are);</li>
 *   <li>string: BINARY with no logical type, STRING, ENUM or JSON; binary: BINARY with no logical type;</li>
 * </ul>
 * in data pages v1 or v2 of any codec, encoded PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY,
 * DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, or RLE (booleans).
 * Anything else (another type, a column missing from the file, columns found by field id,
 * another encoding, a page not read here, a decoding error) makes {@link #read} return null,
 * and the caller reads the row groups through Spark's reader ({@link RowGroupReader}).
 */
final class DataPages {
    /** How each supported Spark type is decoded. */
    private enum Kind { BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, DATE, TIMESTAMP, STRING, BINARY }

    private DataPages() {
    }

    /**
     * The rows at offsets {@code wanted} (ascending, counted over the rows of row groups
     * {@code groups}, ascending, of {@code path}), with the columns of {@code required}, one
     * fresh row each; null when any of it is not read here (the caller then reads through
     * Spark's reader; nothing was handed out). {@code datetimesCorrected}: whether Spark's
     * reader would read the file's dates and timestamps as they are (its datetime rebase mode
     * for the file is CORRECTED); asked only when a required column is one.
     */
    static InternalRow[] read(Path path, Configuration conf, ParquetRows.Footer footer, int[] groups, long[] wanted,
                              StructType required, java.util.function.BooleanSupplier datetimesCorrected) throws IOException {
        if (required.size() == 0 || wanted.length == 0) {
            return null;
        }
        ParquetMetadata cut = footer.metadata(groups);
        MessageType schema = cut.getFileMetaData().getSchema();
        ColumnDescriptor[] columns = new ColumnDescriptor[required.size()];
        Kind[] kinds = new Kind[required.size()];
        boolean datetimes = false;
        for (int i = 0; i < columns.length; i++) {
            StructField f = required.fields()[i];
            columns[i] = column(schema, f.name());
            kinds[i] = columns[i] == null ? null : kind(f.dataType(), columns[i].getPrimitiveType());
            if (kinds[i] == null) {
                return null;
            }
            datetimes |= kinds[i] == Kind.DATE || kinds[i] == Kind.TIMESTAMP;
        }
        if (datetimes && !datetimesCorrected.getAsBoolean()) {
            return null;
        }
        InternalRow[] out = new InternalRow[wanted.length];
        for (int w = 0; w < out.length; w++) {
            out[w] = new GenericInternalRow(columns.length);
        }
        InputFile file = inputFile(path, conf, footer.fileLength);
        try (ParquetFileReader reader = new ParquetFileReader(file, cut, PageValues.readOptions(), file.newStream())) {
            reader.setRequestedSchema(java.util.Arrays.asList(columns));  // only these column chunks are read
            long base = 0;
            int w = 0;
            for (int g : groups) {
                long rows = footer.rowBounds[g + 1] - footer.rowBounds[g];
                int first = w;
                while (w < wanted.length && wanted[w] < base + rows) {
                    w++;
                }
                if (first == w) {  // no wanted row here
                    if (!reader.skipNextRowGroup()) {
                        return null;
                    }
                } else {
                    PageReadStore store = reader.readNextRowGroup();  // the group's chosen column chunks, one read
                    if (store == null || store.getRowCount() != rows) {
                        return null;
                    }
                    long[] at = new long[w - first];
                    for (int i = 0; i < at.length; i++) {
                        at[i] = wanted[first + i] - base;
                    }
                    for (int c = 0; c < columns.length; c++) {
                        if (!decode(store.getPageReader(columns[c]), columns[c], kinds[c], at, out, first, c)) {
                            return null;
                        }
                    }
                }
                base += rows;
                if (w == wanted.length) {
                    break;  // nothing wanted past here
                }
            }
            return w == wanted.length ? out : null;
        } catch (java.io.InterruptedIOException e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            return null;  // Spark's reader reads it (or fails as a scan would)
        }
    }

    /**
     * The file at {@code path} ({@code length} bytes) to read pages of: a local file with no
     * checksum file beside it opened directly, else through its file system; no file system
     * looked up again for the length (as HadoopInputFile's factories do).
     */
    static InputFile inputFile(Path path, Configuration conf, long length) {
        java.io.File local = localFile(path, conf);
        return new InputFile() {
            @Override
            public long getLength() {
                return length;
            }

            @Override
            public SeekableInputStream newStream() throws IOException {
                return open(local, path, conf);
            }

            @Override
            public String toString() {
                return path.toString();
            }
        };
    }

    /**
     * The local file of {@code path} when Hadoop's local file system (the default for
     * {@code file:}) would read it unchecked (no checksum file beside it), else null: it is then
     * read directly, with no file system looked up (a user and configuration lookup a call) and
     * no checksummed open (a failed open of the checksum file, small reads).
     */
    private static java.io.File localFile(Path path, Configuration conf) {
        java.net.URI uri = path.toUri();
        if (!"file".equals(uri.getScheme()) || conf.get("fs.file.impl") != null) {
            return null;
        }
        java.io.File f = new java.io.File(uri.getPath());
        java.io.File sums = new java.io.File(f.getParentFile(), "." + f.getName() + ".crc");
        return sums.exists() ? null : f;
    }

    /** {@code path} opened: directly when it is {@code local}, else on its file system. */
    private static SeekableInputStream open(java.io.File local, Path path, Configuration conf) throws IOException {
        if (local != null) {
            return new org.apache.parquet.io.LocalInputFile(local.toPath()).newStream();
        }
        return HadoopStreams.wrap(path.getFileSystem(conf).open(path));
    }

    /**
     * The descriptor of top-level column {@code name} of {@code schema}: primitive, not
     * repeated, the only top-level field of that name in any case; else null.
     */
    private static ColumnDescriptor column(MessageType schema, String name) {
        Type found = null;
        for (Type t : schema.getFields()) {
            if (t.getName().equalsIgnoreCase(name)) {
                if (found != null || !t.getName().equals(name)) {
                    return null;  // ambiguous without case, or found by Spark's case-insensitive match only
                }
                found = t;
            }
        }
        if (found == null || !found.isPrimitive() || found.isRepetition(Type.Repetition.REPEATED)) {
            return null;
        }
        ColumnDescriptor c = schema.getColumnDescription(new String[] {name});
        return c.getMaxRepetitionLevel() == 0 && c.getMaxDefinitionLevel() <= 1 ? c : null;
    }

    /** How Spark type {@code t} is decoded from Parquet type {@code p}, or null when it is not read here. */
    private static Kind kind(DataType t, PrimitiveType p) {
        LogicalTypeAnnotation logical = p.getLogicalTypeAnnotation();
        PrimitiveTypeName physical = p.getPrimitiveTypeName();
        if (t.equals(DataTypes.BooleanType)) {
            return physical == PrimitiveTypeName.BOOLEAN && logical == null ? Kind.BOOLEAN : null;
        }
        if (t.equals(DataTypes.ByteType) || t.equals(DataTypes.ShortType) || t.equals(DataTypes.IntegerType)) {
            if (physical != PrimitiveTypeName.INT32) {
                return null;
            }
            int bits = t.equals(DataTypes.ByteType) ? 8 : t.equals(DataTypes.ShortType) ? 16 : 32;
            if (logical == null ? bits != 32 : !signedInt(logical, bits)) {
                return null;
            }
            return bits == 8 ? Kind.BYTE : bits == 16 ? Kind.SHORT : Kind.INT;
        }
        if (t.equals(DataTypes.LongType)) {
            return physical == PrimitiveTypeName.INT64 && (logical == null || signedInt(logical, 64)) ? Kind.LONG : null;
        }
        if (t.equals(DataTypes.FloatType)) {
            return physical == PrimitiveTypeName.FLOAT && logical == null ? Kind.FLOAT : null;
        }
        if (t.equals(DataTypes.DoubleType)) {
            return physical == PrimitiveTypeName.DOUBLE && logical == null ? Kind.DOUBLE : null;
        }
        if (t.equals(DataTypes.DateType)) {
            return physical == PrimitiveTypeName.INT32
                && logical instanceof LogicalTypeAnnotation.DateLogicalTypeAnnotation ? Kind.DATE : null;
        }
        if (t.equals(DataTypes.TimestampType)) {
            return physical == PrimitiveTypeName.INT64
                && logical instanceof LogicalTypeAnnotation.TimestampLogicalTypeAnnotation
                && ((LogicalTypeAnnotation.TimestampLogicalTypeAnnotation) logical).isAdjustedToUTC()
                && ((LogicalTypeAnnotation.TimestampLogicalTypeAnnotation) logical).getUnit()
                    == LogicalTypeAnnotation.TimeUnit.MICROS ? Kind.TIMESTAMP : null;
        }
        if (t.equals(DataTypes.StringType)) {
            return physical == PrimitiveTypeName.BINARY && (logical == null
                || logical instanceof LogicalTypeAnnotation.StringLogicalTypeAnnotation
                || logical instanceof LogicalTypeAnnotation.EnumLogicalTypeAnnotation
                || logical instanceof LogicalTypeAnnotation.JsonLogicalTypeAnnotation) ? Kind.STRING : null;
        }
        if (t.equals(DataTypes.BinaryType)) {
            return physical == PrimitiveTypeName.BINARY && logical == null ? Kind.BINARY : null;
        }
        return null;
    }

    private static boolean signedInt(LogicalTypeAnnotation logical, int bits) {
        return logical instanceof LogicalTypeAnnotation.IntLogicalTypeAnnotation
            && ((LogicalTypeAnnotation.IntLogicalTypeAnnotation) logical).isSigned()
            && ((LogicalTypeAnnotation.IntLogicalTypeAnnotation) logical).getBitWidth() == bits;
    }

    /** Whether the values of {@code encoding} in a page of {@code column} are decoded here. */
    private static boolean decodable(Encoding encoding, Kind kind) {
        switch (encoding) {
            case PLAIN:
            case PLAIN_DICTIONARY:
            case RLE_DICTIONARY:
                return true;
            case DELTA_BINARY_PACKED:
                return kind == Kind.BYTE || kind == Kind.SHORT || kind == Kind.INT || kind == Kind.DATE
                    || kind == Kind.LONG || kind == Kind.TIMESTAMP;
            case DELTA_LENGTH_BYTE_ARRAY:
            case DELTA_BYTE_ARRAY:
                return kind == Kind.STRING || kind == Kind.BINARY;
            case RLE:
                return kind == Kind.BOOLEAN;
            default:
                return false;
        }
    }

    /**
     * Decodes the rows at offsets {@code at} (ascending, in the row group) of one column
     * chunk into field {@code field} of {@code out[first..]}; stops after the last. False when
     * a page is of a kind, or an encoding, not read here.
     */
    private static boolean decode(PageReader pages, ColumnDescriptor column, Kind kind, long[] at, InternalRow[] out,
                                  int first, int field) throws IOException {
        DictionaryPage dictionaryPage = pages.readDictionaryPage();
        Dictionary dictionary = null;  // decoded when a page wanted needs it
        int maxDef = column.getMaxDefinitionLevel();
        long start = 0;  // the row the page starts at
        int next = 0;  // the index in at of the next wanted row
        while (next < at.length) {
            DataPage page = pages.readPage();
            if (page == null) {
                return false;
            }
            int count = page.getValueCount();  // rows, levels: top-level and not repeated
            long end = start + count;
            if (at[next] >= end) {
                start = end;  // nothing wanted in this page: not decoded
                continue;
            }
            Encoding encoding;
            ValuesReader values;
            PageValues.Levels levels;
            if (page instanceof DataPageV1) {
                DataPageV1 v1 = (DataPageV1) page;
                encoding = v1.getValueEncoding();
                if (!decodable(encoding, kind)) {
                    return false;
                }
                ByteBufferInputStream in = v1.getBytes().toInputStream();
                // No repetition levels (top-level columns); definition levels only when optional.
                levels = maxDef == 0 ? null : PageValues.v1Levels(v1.getDlEncoding(), column, count, in);
                if (encoding.usesDictionary() && dictionary == null) {
                    dictionary = PageValues.dictionary(dictionaryPage, column);
                }
                values = PageValues.reader(encoding, column, dictionary);
                values.initFromPage(count, in);
            } else if (page instanceof DataPageV2) {
                DataPageV2 v2 = (DataPageV2) page;
                encoding = v2.getDataEncoding();
                if (!decodable(encoding, kind) || v2.getRowCount() != count) {
                    return false;
                }
                levels = maxDef == 0 ? null : PageValues.v2Levels(v2, column);
                if (encoding.usesDictionary() && dictionary == null) {
                    dictionary = PageValues.dictionary(dictionaryPage, column);
                }
                values = PageValues.reader(encoding, column, dictionary);
                values.initFromPage(count, v2.getData().toInputStream());
            } else {
                return false;
            }
            int skip = 0;  // defined values passed over since the last value read
            for (long row = start; row < end && next < at.length; row++) {
                boolean defined = levels == null || levels.next() == maxDef;
                if (row != at[next]) {
                    skip += defined ? 1 : 0;
                    continue;
                }
                if (skip > 0) {
                    values.skip(skip);
                    skip = 0;
                }
                out[first + next++].update(field, defined ? value(values, kind) : null);
            }
            start = end;
        }
        return true;
    }

    /** The next value of {@code values}, as Spark's row of {@code kind} holds it. */
    private static Object value(ValuesReader values, Kind kind) {
        switch (kind) {
            case BOOLEAN:
                return values.readBoolean();
            case BYTE:
                return (byte) values.readInteger();
            case SHORT:
                return (short) values.readInteger();
            case INT:
            case DATE:
                return values.readInteger();
            case LONG:
            case TIMESTAMP:
                return values.readLong();
            case FLOAT:
                return values.readFloat();
            case DOUBLE:
                return values.readDouble();
            case STRING:
                return UTF8String.fromBytes(bytes(values.readBytes()));
            case BINARY:
                return bytes(values.readBytes());
            default:
                throw new IllegalStateException(kind.toString());
        }
    }

    /** A value's own bytes (a binary may share a page's or a dictionary's array). */
    private static byte[] bytes(Binary b) {
        java.nio.ByteBuffer view = b.toByteBuffer();  // no copy
        byte[] out = new byte[view.remaining()];
        view.get(out);
        return out;
    }
}
