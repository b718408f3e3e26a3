package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.Type;

/**
 * Reads a classic Parquet checkpoint (one file, or one part of a multi-part one) into a
 * {@link Replay}: each row as the JSON action it stands for (structs and MAPs as objects,
 * LISTs as arrays), {@code protocol} and {@code metaData} applied before every {@code add}.
 */
final class CheckpointReader {
    private CheckpointReader() {
    }

    /**
     * Applies the actions of the checkpoint file {@code st} to {@code state}: a classic or
     * UUID-named Parquet one, or a UUID-named JSON one (v2 spec), and the sidecar files either
     * names ({@code _delta_log/_sidecars/}, holding its add and remove actions).
     */
    static void read(FileStatus st, Configuration conf, Replay state) {
        try {
            List<JsonNode> rows = st.getPath().getName().endsWith(".json") ? jsonRows(st, conf) : parquetRows(st.getPath(), conf);
            List<JsonNode> adds = new ArrayList<>();
            for (JsonNode obj : rows) {
                if (obj.has("sidecar")) {
                    String name = DeltaPaths.decode(obj.path("sidecar").path("path").asText(), st.getPath());
                    Path side = new Path(new Path(st.getPath().getParent(), "_sidecars"),
                        new Path(null, null, name.substring(name.lastIndexOf('/') + 1)));
                    adds.addAll(parquetRows(side, conf));  // add and remove actions only
                } else if (obj.has("add") || obj.has("remove")) {
                    adds.add(obj);
                } else {
                    state.apply(obj, true, st.getPath());
                }
            }
            // Protocol and metaData first, then the file actions (removes are tombstones).
            for (JsonNode a : adds) {
                state.apply(a, true, st.getPath());
            }
        } catch (IOException | RuntimeException e) {
            if (e instanceof IndexedDFException) {
                throw (IndexedDFException) e;
            }
            throw IndexedDFException.corrupt(st.getPath(),
                "not a readable checkpoint (" + e + "); delete it to replay from JSON");
        }
    }

    private static List<JsonNode> parquetRows(Path path, Configuration conf) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        try (ParquetReader<Group> reader = ParquetReader.builder(new GroupReadSupport(), path).withConf(conf).build()) {
            Group row;
            while ((row = reader.read()) != null) {
                out.add(groupToJson(row));
            }
        }
        return out;
    }

    private static List<JsonNode> jsonRows(FileStatus st, Configuration conf) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        try (java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(
                st.getPath().getFileSystem(conf).open(st.getPath()), java.nio.charset.StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (!line.isBlank()) {
                    out.add(DeltaLog.JSON.readTree(line));
                }
            }
        }
        return out;
    }

    /** A Parquet record as JSON: structs as objects, MAPs as objects, LISTs as arrays. */
    static ObjectNode groupToJson(Group g) {
        ObjectNode out = JsonNodeFactory.instance.objectNode();
        GroupType type = g.getType();
        for (int i = 0; i < type.getFieldCount(); i++) {
            if (g.getFieldRepetitionCount(i) == 0) {
                continue;
            }
            out.set(type.getFieldName(i), value(g, i, 0, type.getType(i)));
        }
        return out;
    }

    private static JsonNode value(Group g, int field, int index, Type t) {
        JsonNodeFactory f = JsonNodeFactory.instance;
        if (t.isPrimitive()) {
            switch (t.asPrimitiveType().getPrimitiveTypeName()) {
                case BINARY:
                case FIXED_LEN_BYTE_ARRAY:
                    return f.textNode(g.getString(field, index));
                case INT32:
                    return f.numberNode(g.getInteger(field, index));
                case INT64:
                    return f.numberNode(g.getLong(field, index));
                case BOOLEAN:
                    return f.booleanNode(g.getBoolean(field, index));
                case DOUBLE:
                    return f.numberNode(g.getDouble(field, index));
                case FLOAT:
                    return f.numberNode(g.getFloat(field, index));
                default:
                    return f.nullNode();
            }
        }
        Group sub = g.getGroup(field, index);
        GroupType gt = t.asGroupType();
        LogicalTypeAnnotation ann = gt.getLogicalTypeAnnotation();
        boolean isMap = ann instanceof LogicalTypeAnnotation.MapLogicalTypeAnnotation
            || ann instanceof LogicalTypeAnnotation.MapKeyValueTypeAnnotation;
        boolean isList = ann instanceof LogicalTypeAnnotation.ListLogicalTypeAnnotation;
        if (isMap && gt.getFieldCount() == 1) {
            ObjectNode m = f.objectNode();
            int n = sub.getFieldRepetitionCount(0);
            for (int j = 0; j < n; j++) {
                Group kv = sub.getGroup(0, j);
                String key = kv.getString(0, 0);
                GroupType kvt = kv.getType();
                if (kvt.getFieldCount() > 1 && kv.getFieldRepetitionCount(1) > 0) {
                    m.set(key, value(kv, 1, 0, kvt.getType(1)));
                } else {
                    m.set(key, f.nullNode());
                }
            }
            return m;
        }
        if (isList && gt.getFieldCount() == 1) {
            ArrayNode arr = f.arrayNode();
            Type rep = gt.getType(0);
            int n = sub.getFieldRepetitionCount(0);
            for (int j = 0; j < n; j++) {
                if (!rep.isPrimitive() && rep.asGroupType().getFieldCount() == 1) {
                    Group el = sub.getGroup(0, j);
                    arr.add(el.getFieldRepetitionCount(0) > 0 ? value(el, 0, 0, rep.asGroupType().getType(0))
                        : f.nullNode());
                } else {
                    arr.add(value(sub, 0, j, rep));
                }
            }
            return arr;
        }
        return groupToJson(sub);
    }
}
