package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.Path;

/**
 * What the Python reader refuses is refused here too, with the same error names: reader
 * protocol versions and features it does not implement, a column mapping mode Delta does not
 * define, Delta tables indexeddf has not indexed. Deletion vectors are read
 * ({@link DeletionVectors}): every read path of the connector drops the rows they delete.
 */
final class ProtocolCheck {
    /** The reader features (protocol 3) indexeddf reads. */
    static final Set<String> READ_FEATURES = Spec.READER_FEATURES;

    private ProtocolCheck() {
    }

    /** The refusal of a column mapping mode Delta does not define. */
    private static IndexedDFException columnMapping(String mode) {
        return new IndexedDFException("UnsupportedFeatureError",
            "the table uses the Delta feature columnMapping in mode '" + mode + "', which Delta does not define "
            + "(none, name and id are read)");
    }

    /** A {@code protocol} action indexeddf can read, else the typed refusal. */
    static void checkProtocol(JsonNode p) {
        int reader = p.path("minReaderVersion").asInt(1);
        if (reader <= 1) {
            return;
        }
        if (reader == 2) {
            return;  // column mapping: checkReadable reads its mode
        }
        if (reader == 3) {
            for (JsonNode f : p.path("readerFeatures")) {
                if (!READ_FEATURES.contains(f.asText())) {
                    throw IndexedDFException.unsupportedFeature(f.asText());
                }
            }
            return;
        }
        throw new IndexedDFException("UnsupportedProtocolError",
            "the table needs Delta reader version " + reader + "; indexeddf reads versions 1 and 3 "
            + "(with the features it implements). Read it with a newer Delta engine.");
    }

    /** An {@code add}'s {@code partitionValues} (column -> serialized value, null for NULL; empty: none). */
    static java.util.Map<String, String> partitionValues(JsonNode body, Path root, Object source) {
        JsonNode pv = body.get("partitionValues");
        if (pv == null || pv.isNull() || pv.size() == 0) {
            return java.util.Collections.emptyMap();
        }
        if (!pv.isObject()) {
            throw IndexedDFException.corrupt(root, source + ": partitionValues must be a JSON object");
        }
        java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
        java.util.Iterator<java.util.Map.Entry<String, JsonNode>> it = pv.fields();
        while (it.hasNext()) {
            java.util.Map.Entry<String, JsonNode> e = it.next();
            out.put(e.getKey(), e.getValue() == null || e.getValue().isNull() ? null : e.getValue().asText());
        }
        return java.util.Collections.unmodifiableMap(out);
    }

    /**
     * Refuse a {@code metaData} ({@code next}, after {@code previous}) in which another engine
     * widened a column indexed before it ({@code delta.typeChanges}, Delta's type widening): the
     * buckets and index entries hash values of the old type (PROTOCOL.md 6.4).
     */
    static void checkIndexedColumnsKept(Path root, JsonNode previous, JsonNode next, Map<String, IndexLog.Entry> indexes) {
        if (previous == null) {
            return;
        }
        java.util.Set<String> indexed = new java.util.HashSet<>();
        String primary = previous.path("configuration").path(DeltaLog.CONF_INDEX_COLUMNS).asText("");
        try {
            for (JsonNode c : DeltaLog.JSON.readTree(primary.isEmpty() ? "[]" : primary)) {
                indexed.add(c.asText());
            }
        } catch (IOException e) {
            throw IndexedDFException.corrupt(root, DeltaLog.CONF_INDEX_COLUMNS + " is not a JSON array");
        }
        if (indexes != null) {
            for (IndexLog.Entry e : indexes.values()) {
                indexed.addAll(e.columns);
            }
        }
        Map<String, String> before = new java.util.HashMap<>();
        for (JsonNode f : schemaFields(root, previous)) {
            before.put(f.path("name").asText(), f.path("type").toString());
        }
        for (JsonNode f : schemaFields(root, next)) {
            String name = f.path("name").asText();
            String was = before.get(name);
            if (indexed.contains(name) && was != null && !was.equals(f.path("type").toString())
                    && f.path("metadata").has("delta.typeChanges")) {
                throw new IndexedDFException("UnsupportedFeatureError", "index column '" + name + "' was widened from "
                    + was + " to " + f.path("type") + " after indexeddf indexed the table: its buckets and index files "
                    + "hash the old type. Read the table with DuckDB's delta extension or Spark and delta-spark");
            }
        }
    }

    private static JsonNode schemaFields(Path root, JsonNode metadata) {
        try {
            return DeltaLog.JSON.readTree(metadata.path("schemaString").asText("{}")).path("fields");
        } catch (IOException e) {
            throw IndexedDFException.corrupt(root, "schemaString is not valid JSON");
        }
    }

    /**
     * The replayed protocol and metadata of the table at {@code root} are ones indexeddf reads
     * (with {@code unindexedOk}, also without its index columns: a Delta table being converted).
     */
    static void checkReadable(Path root, JsonNode protocol, JsonNode metadata, boolean unindexedOk) {
        checkProtocol(protocol);
        JsonNode conf = metadata.path("configuration");
        String mode = conf.path("delta.columnMapping.mode").asText("none").trim().toLowerCase(java.util.Locale.ROOT);
        if (!"none".equals(mode) && !"name".equals(mode) && !"id".equals(mode)) {
            throw columnMapping(mode);
        }
        String provider = metadata.path("format").path("provider").asText("parquet");
        if (!"parquet".equals(provider)) {
            throw IndexedDFException.corrupt(root, "data files in format '" + provider + "'; Delta tables hold Parquet");
        }
        JsonNode schema;
        try {
            schema = DeltaLog.JSON.readTree(metadata.path("schemaString").asText());
        } catch (IOException e) {
            throw IndexedDFException.corrupt(root, "schemaString is not valid JSON");
        }
        for (JsonNode f : schema.path("fields")) {
            // Struct, array and map columns (a JSON object as the type) are read as Spark's
            // own types: Spark parses the schema, and its Parquet reader reads them.
            Iterator<String> keys = f.path("metadata").fieldNames();
            while (keys.hasNext()) {
                String key = keys.next();
                if (key.startsWith("delta.generationExpression") || key.startsWith("delta.identity")
                        || key.equals("delta.invariants")) {
                    throw IndexedDFException.unsupportedFeature(key + " on column '" + f.path("name").asText() + "'");
                }
            }
        }
        if (!unindexedOk && (!conf.has(DeltaLog.CONF_INDEX_COLUMNS) || !conf.has(DeltaLog.CONF_NUM_BUCKETS))) {
            throw new IndexedDFException("NotIndexedError",
                root + ": a Delta table that indexeddf has not indexed; index it with "
                + "IndexedTable.convert(path, index_columns=[...], num_buckets=N)");
        }
    }
}
