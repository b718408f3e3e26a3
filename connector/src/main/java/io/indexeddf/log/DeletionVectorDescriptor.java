package io.indexeddf.log;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.ByteBuffer;
import java.util.UUID;

import org.apache.hadoop.fs.Path;

/**
 * Where a data file's deletion vector (DV) is and what it holds: Delta's
 * {@code DeletionVectorDescriptor} ({@code add.deletionVector}, {@code remove.deletionVector};
 * PROTOCOL.md "Deletion Vectors"). Inline ({@code i}: the Z85 text of the DV in the log), in a
 * file under the table root named by a uuid ({@code u}: an optional random prefix folder, then
 * the uuid's 20 Z85 characters), or at an absolute path ({@code p}). Resolved against the table
 * root when the log is replayed, so tasks read it with no table at hand. Serializable: scans and
 * lookup tasks carry it to the executors that read the file.
 */
public final class DeletionVectorDescriptor implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    /** Characters of a Z85-encoded uuid, the end of a {@code u} descriptor's path. */
    static final int ENCODED_UUID_LENGTH = 20;
    /** A DV file's first DV starts after its version byte: what an absent offset means. */
    static final int FIRST_OFFSET = 1;

    public final char storageType;
    public final String pathOrInlineDv;
    /** Where the DV's size field starts in its file; null for an inline DV (and when the log omits it). */
    public final Integer offset;
    public final int sizeInBytes;
    /** Rows the DV removes from its data file. */
    public final long cardinality;
    /** The DV file's location ({@code u} resolved under the table root, {@code p} as given); null when inline. */
    public final String location;

    private DeletionVectorDescriptor(char storageType, String pathOrInlineDv, Integer offset, int sizeInBytes,
                                     long cardinality, String location) {
        this.storageType = storageType;
        this.pathOrInlineDv = pathOrInlineDv;
        this.offset = offset;
        this.sizeInBytes = sizeInBytes;
        this.cardinality = cardinality;
        this.location = location;
    }

    /**
     * Delta's {@code uniqueId}: {@code <storageType><pathOrInlineDv>}, then {@code @<offset>}
     * when there is one. With the path, the key of a file in the set of live files.
     */
    public String uniqueId() {
        String base = storageType + pathOrInlineDv;
        return offset == null ? base : base + "@" + offset;
    }

    /** Where the DV starts in its file (an absent offset means the first DV). */
    public int fileOffset() {
        return offset == null ? FIRST_OFFSET : offset;
    }

    /** Whether the DV is in the log itself. */
    public boolean isInline() {
        return storageType == 'i';
    }

    /**
     * What tells this DV apart from any other in this JVM (its cache key): the resolved file and
     * offset, or the inline text; a {@code u} uniqueId alone is relative to its table's root.
     */
    String cacheKey() {
        return isInline() ? uniqueId() : location + "@" + fileOffset();
    }

    /** How errors name the DV. */
    String where() {
        return isInline() ? "an inline deletion vector in the log" : location + " (deletion vector at offset "
            + fileOffset() + ")";
    }

    /** The descriptor of an {@code add}/{@code remove} body, or null when it has none. */
    static DeletionVectorDescriptor of(JsonNode body, Path root, Object source) {
        JsonNode d = body.get("deletionVector");
        if (d == null || d.isNull()) {
            return null;
        }
        String type = d.path("storageType").asText("");
        String text = d.path("pathOrInlineDv").asText(null);
        JsonNode off = d.get("offset");
        Integer offset = off == null || off.isNull() ? null : off.asInt();
        if (type.length() != 1 || "uip".indexOf(type.charAt(0)) < 0 || text == null
                || !d.path("sizeInBytes").canConvertToInt() || !d.path("cardinality").canConvertToLong()
                || d.path("sizeInBytes").asInt() < 0 || d.path("cardinality").asLong() < 0
                || (offset != null && offset < 0)) {
            throw IndexedDFException.corrupt(source, "deletionVector " + d + " is not a deletion vector descriptor "
                + "(storageType u, i or p, pathOrInlineDv, sizeInBytes, cardinality)");
        }
        char storage = type.charAt(0);
        String location = null;
        if (storage == 'u') {
            location = DeltaPaths.uri(new Path(root, relativePath(text, source)));
        } else if (storage == 'p') {
            if (!DeltaPaths.isAbsolute(text)) {
                throw IndexedDFException.corrupt(source, "deletion vector path " + text + " is not an absolute URI");
            }
            location = DeltaPaths.uri(DeltaPaths.location(root, text, source));
        }
        return new DeletionVectorDescriptor(storage, text, storage == 'i' ? null : offset,
            d.path("sizeInBytes").asInt(), d.path("cardinality").asLong(), location);
    }

    /** A {@code u} DV's file relative to the table root: {@code [<prefix>/]deletion_vector_<uuid>.bin}. */
    private static String relativePath(String text, Object source) {
        if (text.length() < ENCODED_UUID_LENGTH) {
            throw IndexedDFException.corrupt(source, "a 'u' deletion vector path ends in a 20-character Z85 uuid, got "
                + text);
        }
        String prefix = text.substring(0, text.length() - ENCODED_UUID_LENGTH);
        ByteBuffer b;
        try {
            b = ByteBuffer.wrap(Z85.decode(text.substring(prefix.length()), 16));
        } catch (IllegalArgumentException e) {
            throw IndexedDFException.corrupt(source, "the deletion vector path " + text + " holds no Z85 uuid: "
                + e.getMessage());
        }
        String name = "deletion_vector_" + new UUID(b.getLong(), b.getLong()) + ".bin";
        return prefix.isEmpty() ? name : prefix + "/" + name;
    }
}
