package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.charset.StandardCharsets;

/**
 * The file id a data file is known by in index entries (PROTOCOL.md 5): its
 * {@code indexeddf.fileId} tag, else one derived from its path as the Python writer derives it.
 */
public final class FileIds {
    private FileIds() {
    }

    /** The {@code indexeddf.fileId} tag, or the id derived from the path (PROTOCOL.md 5). */
    static long fileId(JsonNode tags, String path, Object source) {
        JsonNode t = tags == null ? null : tags.get(Spec.TAG_FILE_ID);
        if (t != null && !t.isNull()) {
            try {
                return Long.parseLong(t.asText().trim());
            } catch (NumberFormatException e) {
                throw IndexedDFException.corrupt(source, "tag indexeddf.fileId must be a decimal string, got " + t);
            }
        }
        return pathFileId(path);
    }

    /** {@code int.from_bytes(sha256(path)[0:8], "big") & (2^63 - 1)}. */
    public static long pathFileId(String path) {
        try {
            byte[] d = java.security.MessageDigest.getInstance("SHA-256").digest(path.getBytes(StandardCharsets.UTF_8));
            long v = 0;
            for (int i = 0; i < 8; i++) {
                v = (v << 8) | (d[i] & 0xFF);
            }
            return v & Long.MAX_VALUE;
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
