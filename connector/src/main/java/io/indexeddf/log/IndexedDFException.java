package io.indexeddf.log;

/**
 * An error a user can cause, named like the Python error it corresponds to.
 *
 * <p>The message starts with {@code indexeddf.errors.<Name>: }, the form the Python side
 * ({@code indexeddf.spark.typed_error}) recognises in a Spark exception and raises again as
 * the typed Python error. It lives with the log, which throws most of them and imports
 * nothing of Spark; the Spark side throws it too (options, writes, SQL commands).
 */
public class IndexedDFException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** The Python error class name, e.g. {@code InvalidOptionError}. */
    public final String errorName;

    public IndexedDFException(String errorName, String message) {
        super("indexeddf.errors." + errorName + ": " + message);
        this.errorName = errorName;
    }

    public IndexedDFException(String errorName, String message, Throwable cause) {
        super("indexeddf.errors." + errorName + ": " + message, cause);
        this.errorName = errorName;
    }

    /** An {@code InvalidOptionError}. */
    public static IndexedDFException option(String message) {
        return new IndexedDFException("InvalidOptionError", message);
    }

    /** An {@code UnsupportedFeatureError}: the table uses a Delta feature indexeddf does not implement. */
    public static IndexedDFException unsupportedFeature(String feature) {
        return new IndexedDFException("UnsupportedFeatureError",
            "the table uses the Delta feature " + feature + ", which indexeddf does not implement; "
            + "read it with a Delta engine that does (delta-rs, Spark with delta-spark), or rewrite "
            + "the table without the feature");
    }

    /** A {@code CorruptLogError}: {@code where} (a log file, a table) holds {@code what}. */
    public static IndexedDFException corrupt(Object where, String what) {
        return new IndexedDFException("CorruptLogError", where + ": " + what);
    }
}
