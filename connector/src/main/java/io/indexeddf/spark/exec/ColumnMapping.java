package io.indexeddf.spark.exec;

import io.indexeddf.log.Snapshot;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.Type;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;

/**
 * Delta's column mapping (PROTOCOL.md §19) where the connector reads a data file. The table's
 * schema ({@link #tableSchema}, from {@code schemaString}, whose field metadata Spark keeps)
 * holds each field's physical name ({@code delta.columnMapping.physicalName}) and id
 * ({@code delta.columnMapping.id}), top-level and nested alike. Parquet readers are built with
 * the physical names ({@link #physical}) and, in {@code id} mode, with each field's id as
 * Spark's {@code parquet.field.id}, read with Spark's field-id resolution turned on in the
 * reader's own configuration ({@link #readingFieldIds}), never the session's. A file without
 * any field id is read by physical name ({@link #hasFieldIds}), as the Python reader reads
 * it. Rows are positional (nested structs too), so Spark sees the logical columns; everything
 * above the file readers sees logical names only. Filters are not pushed into a column-mapped
 * file's reader (they name logical columns; Spark applies them to the rows anyway).
 */
public final class ColumnMapping {
    /** A field's physical name, in its schema metadata. */
    public static final String PHYSICAL_NAME = "delta.columnMapping.physicalName";
    /** A field's id, in its schema metadata (the Parquet field id of its column in {@code id} mode). */
    public static final String COLUMN_ID = "delta.columnMapping.id";
    /**
     * Set (true) on the top-level fields of an {@code id}-mode table's schema by {@link #tableSchema}:
     * the readers, which see only schemas, find columns by field id then.
     */
    public static final String BY_FIELD_ID = "indexeddf.columnMapping.byFieldId";
    /**
     * In each struct field (at any depth) of a column-mapped table's schema, the physical name,
     * id and mode of the field or column enclosing it. Spark's nested schema pruning rebuilds
     * a pruned column without its metadata but keeps its remaining nested fields': their copy
     * names the column's file name again.
     */
    public static final String PARENT = "indexeddf.columnMapping.parent";
    /** Spark's metadata key of a field's Parquet field id ({@code ParquetUtils.FIELD_ID_METADATA_KEY}). */
    static final String FIELD_ID = "parquet.field.id";
    /** Spark's switch of field-id resolution, read by its Parquet reader from the Hadoop configuration. */
    static final String READ_FIELD_IDS = "spark.sql.parquet.fieldId.read.enabled";
    private static final String MODE = "delta.columnMapping.mode";
    /**
     * The name of a field read by its field id: one no file column has. Spark's Parquet reader
     * matches a file column to a requested field by name before it tries the id, so a file
     * whose column has another field's physical name (files of other writers, a swap) would
     * be read into that field.
     */
    private static final String BY_ID_PREFIX = "__indexeddf_field_id_";

    private ColumnMapping() {
    }

    /**
     * The table's schema as the connector reads it: {@code schemaString}, marked
     * {@link #BY_FIELD_ID} in {@code id} mode; in mode {@code none} without physical names
     * (files then use the logical names, whatever metadata a column kept, as Delta reads them).
     */
    public static StructType tableSchema(Snapshot snapshot) {
        StructType schema = (StructType) DataType.fromJson(snapshot.schemaString());
        String mode = snapshot.configuration(MODE);
        mode = mode == null ? "none" : mode.trim().toLowerCase(java.util.Locale.ROOT);
        boolean mapped = "name".equals(mode) || "id".equals(mode);
        StructField[] out = new StructField[schema.size()];
        for (int i = 0; i < out.length; i++) {
            StructField f = schema.fields()[i];
            if (!mapped) {
                out[i] = new StructField(f.name(), unmapped(f.dataType()), f.nullable(), without(f.metadata(), PHYSICAL_NAME));
                continue;
            }
            Metadata meta = "id".equals(mode)
                ? new MetadataBuilder().withMetadata(f.metadata()).putBoolean(BY_FIELD_ID, true).build() : f.metadata();
            out[i] = new StructField(f.name(), withParents(f.dataType(), mapping(meta)), f.nullable(), meta);
        }
        return new StructType(out);
    }

    /** The mapping entries of a field's metadata (what {@link #PARENT} repeats). */
    private static Metadata mapping(Metadata meta) {
        MetadataBuilder out = new MetadataBuilder();
        if (meta.contains(PHYSICAL_NAME)) {
            out.putString(PHYSICAL_NAME, meta.getString(PHYSICAL_NAME));
        }
        if (meta.contains(COLUMN_ID)) {
            out.putLong(COLUMN_ID, idOf(meta));
        }
        if (meta.contains(BY_FIELD_ID)) {
            out.putBoolean(BY_FIELD_ID, true);
        }
        return out.build();
    }

    /** {@code t} with each struct field given {@link #PARENT}: the mapping of the field enclosing it. */
    private static DataType withParents(DataType t, Metadata parent) {
        if (t instanceof StructType s) {
            StructField[] out = new StructField[s.size()];
            for (int i = 0; i < out.length; i++) {
                StructField f = s.fields()[i];
                Metadata mine = mapping(f.metadata());
                out[i] = new StructField(f.name(), withParents(f.dataType(), mine), f.nullable(),
                    new MetadataBuilder().withMetadata(f.metadata()).putMetadata(PARENT, parent).build());
            }
            return new StructType(out);
        }
        if (t instanceof ArrayType a) {
            return new ArrayType(withParents(a.elementType(), parent), a.containsNull());
        }
        if (t instanceof MapType m) {
            return new MapType(withParents(m.keyType(), parent), withParents(m.valueType(), parent), m.valueContainsNull());
        }
        return t;
    }

    /** The mapping of the field whose type is {@code t}, as its nested fields repeat it (or null). */
    private static Metadata parentOf(DataType t) {
        if (t instanceof StructType s) {
            for (StructField f : s.fields()) {
                if (f.metadata().contains(PARENT)) {
                    return f.metadata().getMetadata(PARENT);
                }
            }
            return null;
        }
        if (t instanceof ArrayType a) {
            return parentOf(a.elementType());
        }
        if (t instanceof MapType m) {
            Metadata key = parentOf(m.keyType());
            return key != null ? key : parentOf(m.valueType());
        }
        return null;
    }

    /** {@code t} with no nested field's physical name. */
    private static DataType unmapped(DataType t) {
        if (t instanceof StructType s) {
            StructField[] out = new StructField[s.size()];
            for (int i = 0; i < out.length; i++) {
                StructField f = s.fields()[i];
                out[i] = new StructField(f.name(), unmapped(f.dataType()), f.nullable(), without(f.metadata(), PHYSICAL_NAME));
            }
            return new StructType(out);
        }
        if (t instanceof ArrayType a) {
            return new ArrayType(unmapped(a.elementType()), a.containsNull());
        }
        if (t instanceof MapType m) {
            return new MapType(unmapped(m.keyType()), unmapped(m.valueType()), m.valueContainsNull());
        }
        return t;
    }

    private static Metadata without(Metadata meta, String key) {
        return meta.contains(key) ? new MetadataBuilder().withMetadata(meta).remove(key).build() : meta;
    }

    /** Whether any column of {@code schema} has a physical name. */
    public static boolean mapped(StructType schema) {
        for (StructField f : schema.fields()) {
            Metadata parent = f.metadata().contains(PHYSICAL_NAME) ? null : parentOf(f.dataType());
            if (f.metadata().contains(PHYSICAL_NAME) || (parent != null && parent.contains(PHYSICAL_NAME))) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code schema} is an {@code id}-mode table's ({@link #BY_FIELD_ID}). */
    public static boolean byFieldId(StructType schema) {
        for (StructField f : schema.fields()) {
            Metadata parent = parentOf(f.dataType());
            if (f.metadata().contains(BY_FIELD_ID) || (parent != null && parent.contains(BY_FIELD_ID))) {
                return true;
            }
        }
        return false;
    }

    /** The name {@code f} has in data files and in {@code partitionValues}. */
    public static String physicalName(StructField f) {
        return f.metadata().contains(PHYSICAL_NAME) ? f.metadata().getString(PHYSICAL_NAME) : f.name();
    }

    /**
     * {@code schema} with each field, nested ones too, named as files name it: by its own
     * metadata, else by the metadata of the field of that name in {@code table} (a schema Spark
     * derived, e.g. pruned, may have lost it). In {@code id} mode each field with an id carries
     * it as its Parquet field id instead, under a name no file uses ({@link #BY_ID_PREFIX}).
     * Renamed fields keep their metadata, so renaming twice changes nothing.
     */
    public static StructType physical(StructType schema, StructType table) {
        return rename(schema, table, byFieldId(table) || byFieldId(schema));
    }

    private static StructType rename(StructType schema, StructType table, boolean ids) {
        Map<String, StructField> byName = new HashMap<>();
        if (table != null) {
            for (StructField f : table.fields()) {
                byName.put(f.name(), f);
            }
        }
        StructField[] out = new StructField[schema.size()];
        for (int i = 0; i < out.length; i++) {
            StructField f = schema.fields()[i];
            StructField tableField = byName.get(f.name());
            StructField source = f.metadata().contains(PHYSICAL_NAME) || tableField == null ? f : tableField;
            Metadata meta = source.metadata();
            Metadata parent = meta.contains(PHYSICAL_NAME) ? null : parentOf(f.dataType());
            if (parent != null) {  // a column Spark pruned: its nested fields name it
                meta = new MetadataBuilder().withMetadata(meta).withMetadata(parent).build();
                source = new StructField(f.name(), f.dataType(), f.nullable(), meta);
            }
            String name = physicalName(source);
            if (ids && meta.contains(COLUMN_ID)) {
                long id = idOf(meta);
                meta = new MetadataBuilder().withMetadata(meta).putLong(FIELD_ID, id).build();
                name = BY_ID_PREFIX + id;
            }
            DataType type = renameType(f.dataType(), tableField == null ? null : tableField.dataType(), ids);
            out[i] = new StructField(name, type, f.nullable(), meta);
        }
        return new StructType(out);
    }

    private static DataType renameType(DataType t, DataType table, boolean ids) {
        if (t instanceof StructType s) {
            return rename(s, table instanceof StructType ts ? ts : null, ids);
        }
        if (t instanceof ArrayType a) {
            DataType element = table instanceof ArrayType ta ? ta.elementType() : null;
            return new ArrayType(renameType(a.elementType(), element, ids), a.containsNull());
        }
        if (t instanceof MapType m) {
            MapType tm = table instanceof MapType x ? x : null;
            return new MapType(renameType(m.keyType(), tm == null ? null : tm.keyType(), ids),
                renameType(m.valueType(), tm == null ? null : tm.valueType(), ids), m.valueContainsNull());
        }
        return t;
    }

    /** A field's id (a JSON number, as Delta writes it; a string of digits is read too). */
    private static long idOf(Metadata meta) {
        try {
            return meta.getLong(COLUMN_ID);
        } catch (ClassCastException | java.util.NoSuchElementException e) {
            return Long.parseLong(meta.getString(COLUMN_ID).trim());
        }
    }

    /** {@code schema} (of {@link #physical}) named by physical name, without field ids: to read a file that has none. */
    public static StructType withoutFieldIds(StructType schema) {
        return (StructType) stripIds(schema);
    }

    private static DataType stripIds(DataType t) {
        if (t instanceof StructType s) {
            StructField[] out = new StructField[s.size()];
            for (int i = 0; i < out.length; i++) {
                StructField f = s.fields()[i];
                String name = f.metadata().contains(FIELD_ID) ? physicalName(f) : f.name();
                out[i] = new StructField(name, stripIds(f.dataType()), f.nullable(), without(f.metadata(), FIELD_ID));
            }
            return new StructType(out);
        }
        if (t instanceof ArrayType a) {
            return new ArrayType(stripIds(a.elementType()), a.containsNull());
        }
        if (t instanceof MapType m) {
            return new MapType(stripIds(m.keyType()), stripIds(m.valueType()), m.valueContainsNull());
        }
        return t;
    }

    /** {@code t} without the metadata of its nested fields (its shape: names, types, nullability). */
    public static DataType shape(DataType t) {
        if (t instanceof StructType s) {
            StructField[] out = new StructField[s.size()];
            for (int i = 0; i < out.length; i++) {
                StructField f = s.fields()[i];
                out[i] = new StructField(f.name(), shape(f.dataType()), f.nullable(), Metadata.empty());
            }
            return new StructType(out);
        }
        if (t instanceof ArrayType a) {
            return new ArrayType(shape(a.elementType()), a.containsNull());
        }
        if (t instanceof MapType m) {
            return new MapType(shape(m.keyType()), shape(m.valueType()), m.valueContainsNull());
        }
        return t;
    }

    /** {@code t}'s {@link #shape} with every nested field, element and value nullable: names and types only. */
    public static DataType nullableShape(DataType t) {
        if (t instanceof StructType s) {
            StructField[] out = new StructField[s.size()];
            for (int i = 0; i < out.length; i++) {
                StructField f = s.fields()[i];
                out[i] = new StructField(f.name(), nullableShape(f.dataType()), true, Metadata.empty());
            }
            return new StructType(out);
        }
        if (t instanceof ArrayType a) {
            return new ArrayType(nullableShape(a.elementType()), true);
        }
        if (t instanceof MapType m) {
            return new MapType(nullableShape(m.keyType()), nullableShape(m.valueType()), true);
        }
        return t;
    }

    /** Whether a file (its footer) gives any column a Parquet field id. */
    public static boolean hasFieldIds(ParquetRows.Footer footer) {
        return footer.hasFieldIds;
    }

    static boolean hasIds(GroupType group) {
        for (Type t : group.getFields()) {
            if (t.getId() != null || (!t.isPrimitive() && hasIds(t.asGroupType()))) {
                return true;
            }
        }
        return false;
    }

    /** A copy of {@code conf} with Spark's Parquet reader resolving columns by field id. */
    public static Configuration readingFieldIds(Configuration conf) {
        Configuration out = new Configuration(conf);
        out.setBoolean(READ_FIELD_IDS, true);
        return out;
    }

    /** {@code filters}, or none when {@code table} is column-mapped (they name logical columns). */
    public static Seq<Filter> filters(Seq<Filter> filters, StructType table) {
        return mapped(table) ? scala.collection.immutable.List$.MODULE$.<Filter>empty() : filters;
    }
}
