package io.indexeddf.log;

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.Path;

/**
 * The paths Delta's log names files by ({@code add.path}, {@code remove.path}, a {@code p}
 * deletion vector's {@code pathOrInlineDv}, a sidecar's {@code path}): URI references (RFC 2396)
 * that are percent-decoded once to give the file's path. This is the only place the connector
 * decodes them; everything that reads a file afterwards takes the Hadoop {@link Path} made here
 * ({@link AddFile#location}), never a path string parsed again.
 *
 * <p>A reference that starts with a scheme ({@code ^[A-Za-z][A-Za-z0-9+.-]*:}) is an absolute URI
 * and must be a valid one. Any other is a path relative to the table root, decoded as the Python
 * reader decodes it ({@code urllib.parse.unquote}): each {@code %XX} becomes its byte, runs of bytes
 * are read as UTF-8, and a {@code %} not followed by two hex digits, or a character a URI would
 * have escaped (a space, a {@code :} in the first segment, {@code #}, {@code ?}), stands for itself.
 * So Spark's and delta-rs's {@code time=1971-07-22%2003%253A06%253A40/...} (the folder
 * {@code time=1971-07-22 03%3A06%3A40}), Delta Kernel's {@code time=1971-07-22T03%3A06%3A40Z/...}
 * and an unescaped {@code time=1971-07-22T03:06:40Z/...} all name the folder they were written in,
 * as delta-rs and DuckDB read them.
 */
public final class DeltaPaths {
    private static final Pattern SCHEME = Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]*:");

    private DeltaPaths() {
    }

    /** Whether {@code encoded} is an absolute URI (it starts with a scheme). */
    public static boolean isAbsolute(String encoded) {
        return SCHEME.matcher(encoded).find();
    }

    /**
     * The path the log's {@code encoded} names: a relative path percent-decoded once, or an
     * absolute URI as written (checked to be one). {@code source} names the log file in errors.
     */
    public static String decode(String encoded, Object source) {
        if (isAbsolute(encoded)) {
            return absolute(encoded, source).toString();
        }
        return unquote(encoded);
    }

    /** Where Hadoop reads the file the log names by {@code encoded}, in the table at {@code root}. */
    public static Path location(Path root, String encoded, Object source) {
        if (isAbsolute(encoded)) {
            return new Path(absolute(encoded, source));
        }
        String path = unquote(encoded);
        if (path.isEmpty()) {
            throw IndexedDFException.corrupt(source, "a file path in the log is empty");
        }
        // The three-argument constructor takes the path as it is (no scheme parsed out of a ':').
        return new Path(root, new Path(null, null, path));
    }

    /** The Hadoop path of a location {@link #uri} gave: exact, whatever characters the path holds. */
    public static Path fromUri(String uri) {
        return new Path(URI.create(uri));
    }

    /** {@code location} as a string {@link #fromUri} turns back into the same path (its encoded URI). */
    public static String uri(Path location) {
        return location.toUri().toString();
    }

    private static URI absolute(String encoded, Object source) {
        try {
            return new URI(encoded);
        } catch (URISyntaxException e) {
            throw IndexedDFException.corrupt(source, "file path " + encoded + " is not a URI: " + e.getMessage());
        }
    }

    /** Python's {@code urllib.parse.unquote}: {@code %XX} decoded, byte runs read as UTF-8, all else kept. */
    static String unquote(String s) {
        if (s.indexOf('%') < 0) {
            return s;
        }
        StringBuilder out = new StringBuilder(s.length());
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int i = 0;
        int n = s.length();
        while (i < n) {
            char c = s.charAt(i);
            if (c == '%' && i + 2 < n && hex(s.charAt(i + 1)) >= 0 && hex(s.charAt(i + 2)) >= 0) {
                bytes.write(hex(s.charAt(i + 1)) * 16 + hex(s.charAt(i + 2)));
                i += 3;
                continue;
            }
            if (bytes.size() > 0) {
                out.append(new String(bytes.toByteArray(), StandardCharsets.UTF_8));
                bytes.reset();
            }
            out.append(c);
            i++;
        }
        if (bytes.size() > 0) {
            out.append(new String(bytes.toByteArray(), StandardCharsets.UTF_8));
        }
        return out.toString();
    }

    private static int hex(char c) {
        return Character.digit(c, 16) >= 0 && c < 128 ? Character.digit(c, 16) : -1;
    }
}
