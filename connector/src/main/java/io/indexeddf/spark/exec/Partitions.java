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
            String key = ColumnMapping.physicalName(fields[i]);  // physical in a column-mapped table
            if (!pv.containsKey(key)) {
                throw IndexedDFException.corrupt(snapshot.root, "the add of " + a.path + " names no value of partition "
                    + "column '" + fields[i].name() + "'");
            }
            values[i] = value(pv.get(key), fields[i].dataType(), snapshot.root, fields[i].name());
        }
        return new GenericInternalRow(values);
    }

    /** One serialized partition value as the Catalyst value of {@code type} (null for NULL). */
    static Object value(String text, DataType type, org.apache.hadoop.fs.Path root, String column) {
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
        throw IndexedDFException.corrupt(root, "partition value '" + text + "' of column '" + column
            + "' is not a " + type.simpleString());
    }

    /**
     * Drops from {@code scan} (a lookup's unindexed files) those of partitions that the
     * conjuncts of {@code condition} naming only partition columns exclude: a lookup skips the
     * files of other partitions as Spark's scan does.
     */
    public static void prune(List<AddFile> scan, Expression condition, Snapshot snapshot, StructType schema) {
        StructType parts = schema(snapshot, schema);
        if (parts.isEmpty() || scan.isEmpty()) {
            return;
        }
        java.util.Set<String> names = new java.util.HashSet<>(snapshot.partitionColumns());
        List<Expression> only = new java.util.ArrayList<>();
        for (Expression c : LookupPlanner.conjuncts(condition)) {
            boolean other = c.find(new scala.runtime.AbstractFunction1<Expression, Object>() {
                @Override
                public Object apply(Expression e) {
                    return e instanceof AttributeReference && !names.contains(((AttributeReference) e).name());
                }
            }).isDefined();
            if (!other && c.deterministic() && !c.references().isEmpty()) {
                only.add(c);
            }
        }
        BasePredicate keep = predicate(only, parts);
        if (keep != null) {
            scan.removeIf(a -> !keep.eval(row(a, parts, snapshot)));
        }
    }

    /**
     * {@code schema} (the table's) with its partition columns nullable: the lookup readers read
     * rows of it from files that lack those columns, and Parquet readers refuse a missing
     * required column; {@link Filler} then puts the file's values in.
     */
    public static StructType readable(StructType schema, Snapshot snapshot) {
        List<String> parts = snapshot.partitionColumns();
        if (parts.isEmpty()) {
            return schema;
        }
        StructType out = new StructType();
        for (StructField f : schema.fields()) {
            out = out.add(parts.contains(f.name()) ? f.copy(f.name(), f.dataType(), true, f.metadata()) : f);
        }
        return out;
    }

    /** Puts one file's partition values into the rows of {@code required} read from it (where the file has none). */
    public static final class Filler {
        private final int[] at;
        private final Object[] values;
        private final DataType[] types;

        private Filler(int[] at, Object[] values, DataType[] types) {
            this.at = at;
            this.values = values;
            this.types = types;
        }

        /** The filler of a file with {@code partitionValues} for rows of {@code required}; null when there is nothing to fill. */
        public static Filler of(Map<String, String> partitionValues, StructType required) {
            if (partitionValues == null || partitionValues.isEmpty()) {
                return null;
            }
            StructField[] fields = required.fields();
            List<Integer> at = new java.util.ArrayList<>();
            List<Object> values = new java.util.ArrayList<>();
            for (int i = 0; i < fields.length; i++) {
                String key = ColumnMapping.physicalName(fields[i]);
                if (partitionValues.containsKey(key)) {
                    at.add(i);
                    values.add(value(partitionValues.get(key), fields[i].dataType(), null, fields[i].name()));
                }
            }
            if (at.isEmpty()) {
                return null;
            }
            DataType[] types = new DataType[fields.length];
            for (int i = 0; i < fields.length; i++) {
                types[i] = fields[i].dataType();
            }
            return new Filler(at.stream().mapToInt(Integer::intValue).toArray(), values.toArray(), types);
        }

        /** A new row: {@code row}'s values (copied) with the partition columns set to the file's values. */
        public InternalRow apply(InternalRow row) {
            InternalRow own = row.copy();
            Object[] v = new Object[types.length];
            for (int i = 0; i < v.length; i++) {
                v[i] = own.isNullAt(i) ? null : own.get(i, types[i]);
            }
            for (int j = 0; j < at.length; j++) {
                v[at[j]] = values[j];
            }
            return new GenericInternalRow(v);
        }
    }

    private static DataType StringType$() {
        return org.apache.spark.sql.types.StringType$.MODULE$;
    }

    /**
     * The partition directories of a file index whose files are grouped by partition
     * ({@code byPartition}, each key's values as a row in {@code rows}), those that Spark's
     * {@code partitionFilters} may select.
     */
    public static <K> scala.collection.immutable.Seq<org.apache.spark.sql.execution.datasources.PartitionDirectory>
            directories(Map<K, List<org.apache.spark.sql.execution.datasources.FileStatusWithMetadata>> byPartition,
                        Map<K, InternalRow> rows, scala.collection.immutable.Seq<Expression> partitionFilters,
                        StructType partitionSchema) {
        BasePredicate keep = predicate(scala.jdk.javaapi.CollectionConverters.asJava(partitionFilters), partitionSchema);
        List<org.apache.spark.sql.execution.datasources.PartitionDirectory> out = new java.util.ArrayList<>();
        for (Map.Entry<K, List<org.apache.spark.sql.execution.datasources.FileStatusWithMetadata>> e
                : byPartition.entrySet()) {
            InternalRow values = rows.get(e.getKey());
            if (keep == null || keep.eval(values)) {
                out.add(new org.apache.spark.sql.execution.datasources.PartitionDirectory(values,
                    scala.jdk.javaapi.CollectionConverters.asScala(e.getValue()).toList()));
            }
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out).toList();
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
