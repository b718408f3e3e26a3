package io.indexeddf.spark.exec;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Snapshot;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.InterpretedPredicate;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.runtime.AbstractPartialFunction;

/**
 * A partitioned table's partition columns as Spark sees them: the partition schema (the table's
 * fields of {@code metaData.partitionColumns}) and each file's values ({@code add.partitionValues},
 * Delta's serialized strings) as Catalyst values. A timestamp without a zone is read as UTC, as
 * the Python readers, delta-rs and DuckDB read it.
 */
public final class Partitions {
    private Partitions() {
    }

    /** The partition columns of {@code snapshot} as fields of {@code schema} (the table's), in the log's order. */
    public static StructType schema(Snapshot snapshot, StructType schema) {
        StructType out = new StructType();
        for (String c : snapshot.partitionColumns()) {
            int i = fieldIndex(schema, c);
            if (i < 0) {
                throw IndexedDFException.corrupt(snapshot.root, "partition column '" + c + "' is not in the table schema");
            }
            out = out.add(schema.fields()[i]);
        }
        return out;
    }

    private static int fieldIndex(StructType schema, String name) {
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            if (fields[i].name().equals(name)) {
                return i;
            }
        }
        return -1;
    }

    /** A file's partition values as a row of {@code partitionSchema}. */
    public static InternalRow row(AddFile a, StructType partitionSchema, Snapshot snapshot) {
        StructField[] fields = partitionSchema.fields();
        Object[] values = new Object[fields.length];
        for (int i = 0; i < fields.length; i++) {
            Map<String, String> pv = a.partitionValues;
            if (!pv.containsKey(fields[i].name())) {
                throw IndexedDFException.corrupt(snapshot.root, "the add of " + a.path + " names no value of partition "
                    + "column '" + fields[i].name() + "'");
            }
            values[i] = value(pv.get(fields[i].name()), fields[i].dataType(), snapshot, fields[i].name());
        }
        return new GenericInternalRow(values);
    }

    /** One serialized partition value as the Catalyst value of {@code type} (null for NULL). */
    static Object value(String text, DataType type, Snapshot snapshot, String column) {
        if (text == null) {
            return null;
        }
        if (type instanceof StringType) {
            return UTF8String.fromString(text);
        }
        if (type instanceof BinaryType) {  // Delta: the bytes as a string of escaped code points
            byte[] b = new byte[text.length()];
            for (int i = 0; i < b.length; i++) {
                b[i] = (byte) text.charAt(i);
            }
            return b;
        }
        try {
            Object v = new Cast(Literal.create(UTF8String.fromString(text), StringType$()), type, Option.apply("UTC"),
                EvalMode$.MODULE$.ANSI()).eval(null);
            if (v != null) {
                return v;
            }
        } catch (RuntimeException e) {
            // fall through: a value that does not parse is a damaged log
        }
        throw IndexedDFException.corrupt(snapshot.root, "partition value '" + text + "' of column '" + column
            + "' is not a " + type.simpleString());
    }

    private static DataType StringType$() {
        return org.apache.spark.sql.types.StringType$.MODULE$;
    }

    /**
     * A predicate over rows of {@code partitionSchema} that holds where every one of {@code filters}
     * (Spark's partition filters: they name partition columns only) may hold; null when there is none.
     */
    public static BasePredicate predicate(List<Expression> filters, StructType partitionSchema) {
        if (filters.isEmpty()) {
            return null;
        }
        Expression all = filters.get(0);
        for (int i = 1; i < filters.size(); i++) {
            all = new org.apache.spark.sql.catalyst.expressions.And(all, filters.get(i));
        }
        StructField[] fields = partitionSchema.fields();
        Expression bound = all.transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression e) {
                return e instanceof AttributeReference;
            }

            @Override
            public Expression apply(Expression e) {
                String name = ((AttributeReference) e).name();
                for (int i = 0; i < fields.length; i++) {
                    if (fields[i].name().equalsIgnoreCase(name)) {
                        return new BoundReference(i, fields[i].dataType(), true);
                    }
                }
                throw new IllegalStateException("partition filter names " + name + ", not a partition column");
            }
        });
        BasePredicate p = new InterpretedPredicate(bound);
        p.initialize(0);
        return p;
    }
}
