package io.indexeddf.spark.exec;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;

/**
 * Delta's column mapping in {@code name} mode (PROTOCOL.md §19) where the connector reads a
 * data file: the table's schema (from {@code schemaString}, whose field metadata Spark keeps)
 * names each column's physical name under {@code delta.columnMapping.physicalName}; Parquet
 * readers are built with those names, and rows, being positional, come back as the logical
 * columns Spark planned. Everything above the file readers sees logical names only. Filters
 * are not pushed into a column-mapped file's reader (they name logical columns; Spark applies
 * them to the rows anyway).
 */
public final class ColumnMapping {
    /** A column's physical name, in its schema metadata. */
    public static final String PHYSICAL_NAME = "delta.columnMapping.physicalName";

    private ColumnMapping() {
    }

    /** Whether any column of {@code schema} has a physical name. */
    public static boolean mapped(StructType schema) {
        for (StructField f : schema.fields()) {
            if (f.metadata().contains(PHYSICAL_NAME)) {
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
     * {@code schema} with each column named as files name it: by its own metadata, else by the
     * metadata of the column of that name in {@code table} (a schema Spark derived may have lost
     * it). Renamed fields keep their metadata, so renaming twice changes nothing.
     */
    public static StructType physical(StructType schema, StructType table) {
        Map<String, StructField> byName = new HashMap<>();
        for (StructField f : table.fields()) {
            byName.put(f.name(), f);
        }
        StructField[] out = new StructField[schema.size()];
        for (int i = 0; i < out.length; i++) {
            StructField f = schema.fields()[i];
            StructField source = f.metadata().contains(PHYSICAL_NAME) ? f : byName.getOrDefault(f.name(), f);
            Metadata meta = source.metadata();
            out[i] = new StructField(physicalName(source), f.dataType(), f.nullable(), meta);
        }
        return new StructType(out);
    }

    /** {@code filters}, or none when {@code table} is column-mapped (they name logical columns). */
    public static Seq<Filter> filters(Seq<Filter> filters, StructType table) {
        return mapped(table) ? scala.collection.immutable.List$.MODULE$.<Filter>empty() : filters;
    }
}
