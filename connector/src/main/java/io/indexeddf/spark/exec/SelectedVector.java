package io.indexeddf.spark.exec;

import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Some rows of a column vector, without a copy: row {@code i} of this vector is row
 * {@code selected[i]} of the vector it wraps, for {@code i < count}. A struct's fields (and
 * the parts of a variant or an interval) are narrowed the same way; an array's or a map's
 * elements are those of its row. It is how
 * {@link DeletionVectorFormat} drops the rows a deletion vector deletes from Spark's columnar
 * batches. It owns nothing: closing it leaves the wrapped vector (its reader's) open.
 */
final class SelectedVector extends ColumnVector {
    private final ColumnVector data;
    private final int[] selected;
    private final int count;
    private final SelectedVector[] children;
    private int nulls = -1;

    /** Rows {@code selected[0 .. count)} of {@code data}. */
    SelectedVector(ColumnVector data, int[] selected, int count) {
        super(data.dataType());
        this.data = data;
        this.selected = selected;
        this.count = count;
        // A child of a struct (or of a variant, an interval...) has the parent's rows; an array's
        // or a map's child holds its elements, which getArray / getMap of a row address.
        org.apache.spark.sql.types.DataType t = data.dataType();
        int rowAligned = t instanceof org.apache.spark.sql.types.StructType
            ? ((org.apache.spark.sql.types.StructType) t).size()
            : t instanceof org.apache.spark.sql.types.ArrayType || t instanceof org.apache.spark.sql.types.MapType ? 0 : 4;
        this.children = new SelectedVector[rowAligned];
    }

    @Override
    public void close() {
    }

    @Override
    public void closeIfFreeable() {
    }

    @Override
    public boolean hasNull() {
        return data.hasNull() && numNulls() > 0;
    }

    @Override
    public int numNulls() {
        if (nulls < 0) {
            int n = 0;
            if (data.hasNull()) {
                for (int i = 0; i < count; i++) {
                    if (data.isNullAt(selected[i])) {
                        n++;
                    }
                }
            }
            nulls = n;
        }
        return nulls;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return data.isNullAt(selected[rowId]);
    }

    @Override
    public boolean getBoolean(int rowId) {
        return data.getBoolean(selected[rowId]);
    }

    @Override
    public byte getByte(int rowId) {
        return data.getByte(selected[rowId]);
    }

    @Override
    public short getShort(int rowId) {
        return data.getShort(selected[rowId]);
    }

    @Override
    public int getInt(int rowId) {
        return data.getInt(selected[rowId]);
    }

    @Override
    public long getLong(int rowId) {
        return data.getLong(selected[rowId]);
    }

    @Override
    public float getFloat(int rowId) {
        return data.getFloat(selected[rowId]);
    }

    @Override
    public double getDouble(int rowId) {
        return data.getDouble(selected[rowId]);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        return data.getArray(selected[rowId]);
    }

    @Override
    public ColumnarMap getMap(int rowId) {
        return data.getMap(selected[rowId]);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return data.getDecimal(selected[rowId], precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return data.getUTF8String(selected[rowId]);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return data.getBinary(selected[rowId]);
    }

    @Override
    public org.apache.spark.unsafe.types.BinaryView getBinaryView(int rowId) {
        return data.getBinaryView(selected[rowId]);
    }

    @Override
    public org.apache.spark.unsafe.types.CalendarInterval getInterval(int rowId) {
        return data.getInterval(selected[rowId]);
    }

    /** A struct's field (or a variant's part...), narrowed to the same rows; an array's or map's as it is. */
    @Override
    public ColumnVector getChild(int ordinal) {
        if (ordinal >= children.length) {
            return data.getChild(ordinal);
        }
        if (children[ordinal] == null) {
            children[ordinal] = new SelectedVector(data.getChild(ordinal), selected, count);
        }
        return children[ordinal];
    }
}
