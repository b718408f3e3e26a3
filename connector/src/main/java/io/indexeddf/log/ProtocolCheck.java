package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.util.Iterator;
import java.util.Set;

import org.apache.hadoop.fs.Path;

/**
 * What the Python reader refuses is refused here too, with the same error names: reader
 * protocol versions and features it does not implement, column mapping,
 * Delta tables indexeddf has not indexed. Deletion vectors are read
 * ({@link DeletionVectors}): every read path of the connector drops the rows they delete.
 */
final class ProtocolCheck {
    /** The reader features (protocol 3) indexeddf reads. */
    static final Set<String> READ_FEATURES = Spec.READER_FEATURES;

    private ProtocolCheck() {
    }

    /** A {@code protocol} action indexeddf can read, else the typed refusal. */
    static void checkProtocol(JsonNode p) {
        int reader = p.path("minReaderVersion").asInt(1);
        if (reader <= 1) {
            return;
        }
        if (reader == 2) {
            throw IndexedDFException.unsupportedFeature("columnMapping");
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

    /** The replayed protocol and metadata of the table at {@code root} are ones indexeddf reads. */
    static void checkReadable(Path root, JsonNode protocol, JsonNode metadata) {
        checkProtocol(protocol);
        JsonNode conf = metadata.path("configuration");
        String mode = conf.path("delta.columnMapping.mode").asText("none");
        if (!"none".equals(mode)) {
            throw IndexedDFException.unsupportedFeature("columnMapping");
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
                if (key.startsWith("delta.columnMapping") || key.startsWith("delta.generationExpression")
                        || key.startsWith("delta.identity") || key.equals("delta.invariants")) {
                    throw IndexedDFException.unsupportedFeature(key + " on column '" + f.path("name").asText() + "'");
                }
            }
        }
        if (!conf.has(DeltaLog.CONF_INDEX_COLUMNS) || !conf.has(DeltaLog.CONF_NUM_BUCKETS)) {
            throw new IndexedDFException("NotIndexedError",
                root + ": a Delta table that indexeddf has not indexed; index it with "
                + "IndexedTable.convert(path, index_columns=[...], num_buckets=N)");
        }
    }
}
